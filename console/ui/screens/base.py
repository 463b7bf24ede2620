"""The one interface between the app and its screens: state down, messages up.

The app builds a :class:`~console.session.view.ConsoleState` after every poll and calls
:meth:`ConsoleScreen.show` on each open screen; screens render it and ask for
things (an operation, a slot's detail, its log lines) by posting a message the app
handles. No screen imports the app or reads its attributes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from textual.binding import Binding
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen

from console.operations.specs import SPECS
from console.session.view import ConsoleState

URGENT_BINDINGS = [Binding(SPECS["watchdog"].key, "op('watchdog')", "watchdog: extend, "
                           "disarm or stop now", id="watchdog", show=False)]
"""Keys that act on a warning needing action (``pod stops in 5 min — w extends``): bound
on every console screen (the main screen has them among its operations), so the warning
can be acted on wherever the user is."""


class ConsoleScreen(Screen):
    class Operation(Message):
        """Run a registry operation (the app asks first when it is dangerous)."""

        def __init__(self, operation_id: str, args: dict[str, Any] | None = None) -> None:
            super().__init__()
            self.operation_id = operation_id
            self.args = dict(args or {})

    class OpenDetail(Message):
        def __init__(self, slot: str) -> None:
            super().__init__()
            self.slot = slot

    class WantLogs(Message):
        """Fetch a slot's recent log lines through the agent; ``done`` gets them."""

        def __init__(self, slot: str, done: Callable[[list[str]], None]) -> None:
            super().__init__()
            self.slot = slot
            self.done = done

    def __init__(self, state: ConsoleState) -> None:
        super().__init__()
        self.state = state

    def show(self, state: ConsoleState) -> None:
        self.state = state
        if self.is_mounted:
            # mounted but not composed yet: its on_mount draws the latest state
            with contextlib.suppress(NoMatches):
                self.render_state(state)

    def render_state(self, state: ConsoleState) -> None:
        """Draw ``state``; called after every poll while the screen is open."""

    def log_line(self, t: float, text: str, style: str = "", replace: bool = False) -> None:
        """A new action-log line (screens that show the log add it); ``replace``: it
        takes the last line's place."""

    def help_sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """What this screen's help teaches beyond its keys: (title, [(word, meaning)])
        for its state words, columns and thresholds (``console.ui.help_text``)."""
        return []

    async def when_ready(self) -> None:
        """The full context has loaded: mount what waited for it (the plots)."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "op" and parameters:
            return str(parameters[0]) in self.state.allowed
        return True

    def action_op(self, operation_id: str) -> None:
        self.post_message(self.Operation(operation_id))
