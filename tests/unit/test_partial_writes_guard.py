"""The cropping terminal writer replaces a private Textual method only over the exact
implementation it was written against (a digest of its source), never over another."""

from __future__ import annotations

import importlib.util
import logging
import textwrap
from pathlib import Path

import pytest
from textual import _compositor

from console.ui.widgets import partial_writes

ORIGINAL = _compositor.ChopsUpdate.render_segments


@pytest.fixture
def textuals_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Textual's own writer in place, whatever an earlier test installed; put back after."""
    if ORIGINAL is partial_writes.render_segments:
        pytest.skip("Textual's own method was replaced before this module was imported")
    monkeypatch.setattr(_compositor.ChopsUpdate, "render_segments", ORIGINAL)


@pytest.mark.usefixtures("textuals_own")
def test_installs_over_the_method_it_was_written_for() -> None:
    assert partial_writes.digest(ORIGINAL) in partial_writes.WRITTEN_FOR
    assert partial_writes.install() is True
    assert _compositor.ChopsUpdate.render_segments is partial_writes.render_segments
    assert partial_writes.install() is True  # twice is once


def _textual_but(change: str, new: str, where: Path) -> object:
    """Textual's own method with one line changed, as a later release might have it (in
    a real file, so that its source can be read as Textual's can)."""
    import inspect

    src = textwrap.dedent(inspect.getsource(ORIGINAL))
    assert change in src
    path = where / "later_textual.py"
    path.write_text("from rich.control import Control\nfrom rich.console import Console\n\n\n"
                    + src.replace(change, new))
    spec = importlib.util.spec_from_file_location("later_textual", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.render_segments


@pytest.mark.usefixtures("textuals_own")
def test_refuses_a_changed_method_and_says_why(caplog: pytest.LogCaptureFixture,
                                               tmp_path: Path) -> None:
    changed = _textual_but("if strip is None:", "if strip is None or not strip:", tmp_path)
    assert partial_writes.digest(changed) is not None
    _compositor.ChopsUpdate.render_segments = changed  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger=partial_writes.__name__):
        assert partial_writes.install() is False
    assert _compositor.ChopsUpdate.render_segments is changed  # Textual's writes stay
    text = caplog.text
    assert "partial terminal writes off" in text and "source differs" in text
    assert "4c1cdb567e0b" in text  # the digest it wanted


@pytest.mark.usefixtures("textuals_own")
def test_refuses_where_the_source_cannot_be_read(caplog: pytest.LogCaptureFixture) -> None:
    def no_source(self: object, console: object) -> str:
        return ""

    # a function whose file is gone: inspect cannot read its source
    no_source.__code__ = no_source.__code__.replace(co_filename="/nonexistent/x.py")
    _compositor.ChopsUpdate.render_segments = no_source  # type: ignore[method-assign]
    assert partial_writes.digest(no_source) is None
    with caplog.at_level(logging.WARNING, logger=partial_writes.__name__):
        assert partial_writes.install() is False
    assert _compositor.ChopsUpdate.render_segments is no_source
    assert "source is unreadable" in caplog.text
