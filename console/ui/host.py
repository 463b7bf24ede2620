"""What the app's collaborators need of the app.

The app (``console/ui/app.py``) holds its collaborators — ``navigation``,
``replay_keys``, ``palette_commands``, ``error_boundary``, ``quitting`` and the operation
flow's host — and hands itself to each. None of them imports the app: each names what it uses as a
protocol of its own that extends :class:`Host`, and mypy checks that the app is that
protocol where it hands itself over. A test can hand them a plain object.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from textual.screen import Screen
    from textual.worker import Worker

    from console.session.record.replay import Replay
    from console.session.session_like import SessionLike
    from console.session.view import ConsoleState


class Host(Protocol):
    """What every collaborator reads or calls: the session, the state shown, the action
    log, and the Textual app's screens and workers."""

    @property
    def session(self) -> SessionLike: ...

    @property
    def wall(self) -> bool: ...

    @property
    def replay(self) -> Replay | None:
        """The recording shown (a replay, the live pause), or None."""

    @property
    def exiting(self) -> bool:
        """The app is quitting: nothing new starts."""

    def note(self, text: str, style: str = "", replace: bool = False) -> None:
        """A line in the action log (``replace``: in place of the last one)."""

    def console_state(self) -> ConsoleState: ...

    def refresh_screens(self, state: ConsoleState | None = None) -> None: ...

    # -- Textual's ---------------------------------------------------------------------
    @property
    def screen(self) -> Screen[Any]: ...

    @property
    def screen_stack(self) -> list[Screen[Any]]: ...

    def push_screen(self, screen: Screen[Any],
                    callback: Callable[[Any], None] | None = None) -> object: ...

    def run_worker(self, work: Coroutine[Any, Any, None], *, group: str = "default",
                   exclusive: bool = False, exit_on_error: bool = True) -> Worker[None]: ...

    def bell(self) -> None: ...
