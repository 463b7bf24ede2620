"""The command palette, closed once and only once, and never failing for being closed.

Textual's palette gathers its hits in a worker. On a loaded machine that worker may
start, or go on, after the palette has been dismissed (Enter picked the only hit): its
``query_one(CommandList)`` then raised ``NoMatches`` and, its worker exiting on error,
took the whole console down. Two Enters (or an Enter and a selection) close to each
other dismissed it twice: the second ``dismiss`` popped the screen beneath — the main
screen — and left a blank console that ignored every key, and ran the command twice.

This palette gathers nothing once it is closing, treats a missing list as "closed
meanwhile", and dismisses itself only while it is the screen on top, once. It overrides
and calls Textual's private gathering and selection: the app opens it only while those
are the code it was written against (``console/ui/private_reach.py``), else Textual's own.
"""

from __future__ import annotations

import inspect
from typing import Any

from textual import work
from textual.await_complete import AwaitComplete
from textual.command import CommandPalette
from textual.css.query import NoMatches
from textual.worker import get_current_worker

_GATHER = inspect.unwrap(CommandPalette._gather_commands)
"""Textual's own gathering (the coroutine inside its ``@work`` wrapper)."""


class ConsolePalette(CommandPalette):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.closing = False
        """Dismissed (or being dismissed): nothing more is gathered, run or popped."""

    @property
    def _live(self) -> bool:
        return not self.closing and self.is_attached and self.app.screen is self

    @work(exclusive=True, group=CommandPalette._GATHER_COMMANDS_GROUP)
    async def _gather_commands(self, search_value: str) -> None:
        if not self._live:
            return
        try:
            await _GATHER(self, search_value)
        except NoMatches:
            if self._live and not get_current_worker().is_cancelled:
                raise  # the list is missing from a palette still open: a real fault
            # closed while it gathered: there is nothing to show the hits in

    def _select_or_command(self, event: Any = None) -> None:
        if self.closing:
            if event is not None:
                event.stop()
            return
        super()._select_or_command(event)

    def dismiss(self, result: Any = None) -> AwaitComplete:
        """Close this palette once, and only when it is the screen on top."""
        if self.closing or self.app.screen is not self:
            self.closing = True
            self._cancel_gather_commands()
            return AwaitComplete.nothing()
        self.closing = True
        self._cancel_gather_commands()
        return super().dismiss(result)
