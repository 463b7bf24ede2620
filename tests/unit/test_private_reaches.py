"""Every reach into a library's private parts is listed in ``console/ui/private_reach.py``
with the digest of the code it was written against; the installed libraries still have
that code; a library that changed under a reach turns it off (or, for the web wall's
guard, refuses to serve); and a private name the console uses that is not listed fails
here."""

from __future__ import annotations

import importlib
import inspect
import logging
import pkgutil
import re
from collections.abc import Iterator

import pytest
from textual.command import CommandPalette

import console
from console.ui import private_reach
from console.ui.private_reach import BY_NAME, REACHES, current, holds
from tests.conftest import REPO

LISTED = [
    "partial terminal writes",
    "palette that closes once",
    "exception hook",
    "where a failure came from",
    "web wall guard",
    "keys in the order typed",
]
"""The guarded reaches (a new one is added here and in the registry, with its digest)."""

NOT_LIBRARIES = {
    "_SubParsersAction": "argparse's (the standard library): register(sub) of each command",
    "_exit": "os._exit, documented: the exit guard ends a process whose threads hang",
    "_current_frames": "sys._current_frames, documented: the exit guard's thread dump",
    "_bucket": "a histogram family's name suffix, in strings",
    "_total": "a counter family's name suffix, in strings",
    "_family_reset": "a function of console.sources.collect.figures, named in a docstring",
    "_type": "a profile key's suffix (pod_agent.profile), in a string",
    "_parsing": "a profile key's suffix (pod_agent.profile), in a string",
}
"""Private-looking names the scan finds that are no library's private part."""


@pytest.fixture(autouse=True)
def fresh_answers() -> Iterator[None]:
    holds.cache_clear()
    yield
    holds.cache_clear()


def test_the_registry_lists_the_guarded_reaches() -> None:
    assert [r.name for r in REACHES] == LISTED
    for reach in REACHES:
        assert reach.parts and reach.read, reach.name
        for part in reach.parts:
            private_reach.resolve(part)  # each names something the library has


def test_the_installed_libraries_have_the_code_each_reach_was_written_for() -> None:
    from textual import _compositor

    from console.ui.widgets import partial_writes

    for reach in REACHES:
        if (reach.name == "partial terminal writes"
                and _compositor.ChopsUpdate.render_segments is partial_writes.render_segments):
            continue  # installed already: only over Textual's pinned method (its own test)
        assert current(reach) in reach.read, (
            f"{reach.name}: {', '.join(reach.parts)} changed (sha256 {current(reach)}); "
            f"read {reach.used_by} against the new code and add its digest")
        assert holds(reach.name)


def _changed(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> None:
    """``owner.name`` replaced by code that reads otherwise (a later release's)."""
    def later(self: object, *args: object) -> None:
        return None

    monkeypatch.setattr(owner, name, later)


def test_a_changed_palette_gets_textuals_own(monkeypatch: pytest.MonkeyPatch,
                                             caplog: pytest.LogCaptureFixture) -> None:
    from console.ui.palette import ConsolePalette
    from console.ui.palette_commands import PaletteCommands

    assert type(PaletteCommands.palette()) is ConsolePalette
    holds.cache_clear()
    _changed(monkeypatch, CommandPalette, "_select_or_command")
    with caplog.at_level(logging.WARNING, logger=private_reach.__name__):
        palette = PaletteCommands.palette()
    assert type(palette) is CommandPalette
    assert "palette that closes once off" in caplog.text and "differs" in caplog.text


def test_a_changed_textual_serve_is_not_served(monkeypatch: pytest.MonkeyPatch) -> None:
    from textual_serve.server import Server

    from console.ui import web_wall

    web_wall.check_library()
    holds.cache_clear()
    _changed(monkeypatch, Server, "_process_messages")
    with pytest.raises(web_wall.WebWallError, match="not serving"):
        web_wall.make_server("true", "127.0.0.1", 8000, None, 1)


def test_a_changed_timer_ends_the_console_instead(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure handed over by Textual's timer is survived only while the timer is the
    code whose name the boundary reads."""
    from types import SimpleNamespace

    from textual.timer import Timer

    from console.ui.error_boundary import ErrorBoundary

    app = SimpleNamespace(exiting=False, screen_stack=[])
    boundary = ErrorBoundary(app)
    caller = Timer._tick.__code__
    assert boundary.survivable(ValueError("x"), caller) == ("timer", None)
    holds.cache_clear()
    _changed(monkeypatch, Timer, "_tick")
    assert boundary.survivable(ValueError("x"), caller) is None


def _library_bases(cls: type) -> Iterator[type]:
    return (b for b in cls.__mro__[1:]
            if not b.__module__.startswith(("console", "builtins", "typing", "abc")))


def _console_classes() -> Iterator[type]:
    for info in pkgutil.walk_packages(console.__path__, "console."):
        if info.name.startswith("console.demo.faketorch"):
            continue  # a stand-in for torch, imported only inside a fake engine
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and obj.__module__ == module.__name__:
                yield obj
    from console.ui.web_wall import make_server

    yield type(make_server("true", "127.0.0.1", 8000, None, 1))  # a class inside


def test_every_private_method_overridden_is_listed() -> None:
    listed = {(part.partition(":")[2].rpartition(".")[2]) for r in REACHES for part in r.parts}
    unlisted = []
    for cls in _console_classes():
        for attr in vars(cls):
            if not attr.startswith("_") or attr.startswith("__"):
                continue
            for base in _library_bases(cls):
                if attr in vars(base) and not _made_by_a_metaclass(base, attr):
                    if attr not in listed:
                        unlisted.append(f"{cls.__module__}.{cls.__qualname__}.{attr} "
                                        f"overrides {base.__module__}.{base.__qualname__}'s")
                    break
    assert not unlisted, "\n".join(unlisted)


def _made_by_a_metaclass(base: type, attr: str) -> bool:
    """Textual's and pydantic's class machinery sets these on every class (not code the
    console overrides)."""
    return not callable(getattr(base, attr)) or attr in {"_abc_impl", "_is_protocol",
                                                          "_is_runtime_protocol"}


def test_every_private_name_the_console_uses_is_listed() -> None:
    """Every ``_name`` of something the console and the agent do not define themselves
    (an attribute, a name in ``getattr``, a string, an import) is a listed part, or no
    library's (:data:`NOT_LIBRARIES`)."""
    files = [p for root in ("console", "pod_agent") for p in (REPO / root).rglob("*.py")
             if p.name != "private_reach.py"]
    defined: set[str] = set()
    used: dict[str, set[str]] = {}
    for path in files:
        text = path.read_text()
        defined |= set(re.findall(r"\b(_[A-Za-z]\w*)\s*(?::|=(?!=))", text))
        defined |= set(re.findall(r"(?:def|class)\s+(_\w+)", text))
        for m in re.finditer(r"\.(_[A-Za-z]\w*)\b|getattr\([^,]+,\s*\"(_[A-Za-z]\w*)\""
                             r"|\"(_[a-z]\w*)\"|^\s*(?:from|import)\s+([\w.]+)"
                             r"(?:\s+import\s+([^\n]+))?", text, re.M):
            names = [g for g in m.groups()[:3] if g]
            module, imported = m.group(4), m.group(5)
            if module and not module.startswith(("console", "pod_agent", ".")):
                names += [p for p in module.split(".") if p.startswith("_")]
                names += [n.strip().split(" as ")[0] for n in (imported or "").strip(
                    "()").split(",") if n.strip().startswith("_")]
            for name in names:
                if not name.startswith("__"):
                    used.setdefault(name, set()).add(str(path.relative_to(REPO)))
    listed = {piece for r in REACHES for part in r.parts
              for piece in re.split(r"[.:]", part) if piece.startswith("_")}
    unlisted = {n: sorted(w) for n, w in used.items()
                if n not in defined and n not in listed and n not in NOT_LIBRARIES}
    assert not unlisted, unlisted
    assert all(n in used for n in NOT_LIBRARIES), "an allowance no longer needed"


def test_the_checks_find_an_unlisted_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both scans are real: without its entry, the error boundary's reach is found."""
    without = tuple(r for r in REACHES if r.name != "where a failure came from")
    monkeypatch.setattr(private_reach, "REACHES", without)
    monkeypatch.setitem(globals(), "REACHES", without)
    with pytest.raises(AssertionError, match="_flush_next_callbacks"):
        test_every_private_name_the_console_uses_is_listed()
    without = tuple(r for r in REACHES if r.name != "exception hook")
    monkeypatch.setitem(globals(), "REACHES", without)
    with pytest.raises(AssertionError, match=r"PodConsoleApp\._handle_exception"):
        test_every_private_method_overridden_is_listed()
    assert BY_NAME["exception hook"].parts == ("textual.app:App._handle_exception",)
