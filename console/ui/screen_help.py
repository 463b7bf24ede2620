"""The help of the screen shown, assembled from its bindings and its words
(``help_text``). Its own module, above the screens and the key table it reads: the
words below are what the screens themselves import (an import circle otherwise)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from textual.binding import Binding

from console.ui.help_text import binding_rows, only_bindings
from console.ui.keys import REPLAY_BINDINGS, column_legend, help_rows
from console.ui.screens.base import ConsoleScreen
from console.ui.screens.main import MainScreen
from console.ui.screens.modals import HelpScreen


def help_for(screen: Any, specs: Mapping[str, Any], allowed: Any, wall: bool = False,
             replay: bool = False, live: bool = True) -> Any:
    """The help of the screen shown: the main screen (and the wall) list every key of
    the console; another screen its own keys (and the replay's while a recording is
    shown), then that screen's words. Built from the bindings: it cannot disagree."""
    sections = screen.help_sections() if isinstance(screen, ConsoleScreen) else []
    if wall or isinstance(screen, MainScreen) or not isinstance(screen, ConsoleScreen):
        rows = help_rows(wall, specs, allowed, replay=replay, live=live)
        per_slot = screen.state.thresholds if isinstance(screen, ConsoleScreen) else {}
        return HelpScreen(rows, [] if wall else column_legend(per_slot), sections)
    rows = binding_rows(only_bindings(type(screen).BINDINGS))
    if replay:
        rows = binding_rows(REPLAY_BINDINGS) + rows
    rows = [(k, d, dang, allowed(b.action[4:-2]) if b.action.startswith("op(") else avail)
            for (k, d, dang, avail), b in zip(rows, _bindings_of(rows, screen, replay),
                                              strict=True)]
    name = getattr(screen, "HELP_TITLE", type(screen).__name__.removesuffix("Screen"))
    return HelpScreen(rows, None, sections, title=f"Keys of the {name} screen")


def _bindings_of(rows: list[tuple[str, str, bool, bool]], screen: Any, replay: bool
                 ) -> list[Binding]:
    by_key = {b.key: b for b in [*only_bindings(type(screen).BINDINGS),
                                 *(REPLAY_BINDINGS if replay else [])]}
    return [by_key[k] for k, *_ in rows]
