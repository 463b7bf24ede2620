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

from console.model.pod_stop import stop_near
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
        keys = self._keys_now()
        self.state = state
        if self.is_mounted and self._keys_now() != keys:
            self.refresh_bindings()  # the bar follows what the keys can do now
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
        """An operation the registry allows, none while a recording is shown (the live
        pause: its keys are the replay's there, ``t`` steps a sample)."""
        if action == "op" and parameters:
            op = str(parameters[0])
            return op in self.state.allowed and self.state.replay is None
        return True

    @property
    def unoffered_actions(self) -> frozenset[str]:
        """Actions the key bar leaves out though their key still answers: ``r`` on a
        running pod (pressed, its preflight says "already RUNNING")."""
        st = self.state
        if st.pod is not None and st.pod.status == "RUNNING" and "resume" in st.allowed:
            return frozenset({"op('resume')"})
        return frozenset()

    @property
    def urgent_actions(self) -> frozenset[str]:
        """Actions the key bar shows right after help and quit, whatever its width and
        even where their binding is not shown: ``w`` while the pod's stop is near (the
        key every stop warning names)."""
        st = self.state
        if "watchdog" in st.allowed and st.replay is None and stop_near(st.pod, st.now):
            return frozenset({URGENT_BINDINGS[0].action})
        return frozenset()

    def _keys_now(self) -> tuple[object, ...]:
        """What the bar's keys depend on: a poll that changes none of it redraws no key."""
        st = self.state
        return (st.allowed, st.replay is None, self.unoffered_actions, self.urgent_actions)

    def action_op(self, operation_id: str) -> None:
        self.post_message(self.Operation(operation_id))
