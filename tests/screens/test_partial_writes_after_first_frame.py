"""Issue 47 (the first number): the cropping terminal writer is installed by the console
once its first screen is up, not before it. Its check reads Textual's source of the
method it replaces and hashes it (~8 ms), spent before the first number when the app
factory installed it; the first frame is a whole screen either way."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual import _compositor

from console.ui.screens.main import MainScreen
from console.ui.widgets import partial_writes
from tests.support.static_app import build
from tests.support.waits import wait_for

TEXTUALS = _compositor.ChopsUpdate.render_segments
"""Textual's own writer, read at collection (before any app of this process ran)."""


async def test_the_writer_is_installed_once_the_first_screen_is_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Textual's own writer, as in a fresh process (an earlier test may have installed ours)
    assert TEXTUALS is not partial_writes.render_segments
    monkeypatch.setattr(_compositor.ChopsUpdate, "render_segments", TEXTUALS)
    app = build(tmp_path)
    assert _compositor.ChopsUpdate.render_segments is TEXTUALS  # the factory left it
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), 20)
        assert await wait_for(
            pilot, lambda: _compositor.ChopsUpdate.render_segments
            is partial_writes.render_segments, 10)
