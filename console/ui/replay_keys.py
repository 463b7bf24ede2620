"""The app's keys over a recording: ``p`` (the live pause) and, while a recording is
shown, space t/T j/J [/] 1/2/3. Held by the app (``app.replay_keys``), whose key actions
call it: what these keys move is the app's ``replay`` (``console/session/record/replay.py``
holds the cursor and what each move says); this module turns keys into those moves and
repaints. While a recording is shown no operation runs (:meth:`ReplayKeys.refused`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from textual.screen import ModalScreen

from console.session.record.replay import Replay
from console.ui.host import Host

if TYPE_CHECKING:
    from textual.timer import Timer
    from textual.widget import Widget

    from console.session.record.replay import LiveTape


class ReplayHost(Host, Protocol):
    """What the replay's keys need of the app besides :class:`~console.ui.host.Host`."""

    replay: Replay | None
    """Set here: the live pause starts and ends a recording of what was polled."""

    @property
    def live_tape(self) -> LiveTape | None: ...

    @property
    def replaying(self) -> bool: ...

    @property
    def focused(self) -> Widget | None: ...

    def set_interval(self, interval: float,
                     callback: Callable[[], None] | None = None) -> Timer: ...


class ReplayKeys:
    def __init__(self, app: ReplayHost) -> None:
        self.app = app
        self._timer: Timer | None = None
        """The live pause's playing (a replay's own session has the app's timer)."""
        self._noted = False
        """The last move's line is in the log: the next one replaces it."""

    def allowed(self, action: str) -> bool | None:
        """The replay keys only while a recording is shown, ``p`` only live; neither
        while a dialog or a text box has the keys (the jump dialog's own typing). True
        for every other action."""
        if action.startswith("replay_") or action == "live_pause":
            from textual.widgets import Input

            if isinstance(self.app.screen, ModalScreen) or isinstance(self.app.focused,
                                                                       Input):
                return False
            if action == "live_pause":
                return not self.app.replaying
            return self.app.replay is not None
        return True

    def live_pause(self) -> None:
        """``p``: hold the screen on the poll shown now (polling and recording go on; the
        replay keys move over what was polled); ``p`` again: live."""
        app, tape = self.app, self.app.live_tape
        if app.replaying or tape is None:
            return
        if app.replay is not None:
            app.replay = None
            self._stop_timer()
            app.note("live again")
        elif not tape.times():
            app.note("nothing polled yet to pause on", "warn")
            return
        else:
            app.replay = Replay(tape, at=tape.times()[-1], live=True)
            app.note("paused: polling goes on; t/T step, j/J jump, [/] alerts, space "
                     "plays, p returns to live", "bold")
        app.refresh_screens()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def _moved(self, said: str | None, bell: bool = True) -> None:
        if said is None:
            if bell:
                self.app.bell()  # at an end: nothing that way
        else:
            self.app.note(said, "dim", replace=self._noted)
        self._noted = said is not None
        self.app.refresh_screens()

    def toggle(self) -> None:
        replay = self.app.replay
        if replay is None:
            return
        said = replay.toggle()
        if replay.live:  # the live session's timer polls: the pause has its own
            self._stop_timer()
            if replay.cursor.playing:
                from console.session.record.replay import REPLAY_TICK_S

                self._timer = self.app.set_interval(REPLAY_TICK_S, self._tick)
        self._moved(said)

    def _tick(self) -> None:
        replay = self.app.replay
        if replay is not None and replay.tick():
            self.app.refresh_screens()
        if replay is None or not replay.cursor.playing:
            self._stop_timer()

    def step(self, n: int) -> None:
        if self.app.replay is not None:
            self._moved(self.app.replay.step(n))

    def marker(self, direction: int) -> None:
        if self.app.replay is not None:
            said = self.app.replay.marker(direction)
            if said is None:
                self.app.bell()
                self.app.note("no marker " + ("after" if direction > 0 else "before")
                              + " this", "dim")
            self._moved(said, bell=False)

    def speed(self, which: int) -> None:
        if self.app.replay is not None:
            self._moved(self.app.replay.speed(which))

    def ask_jump(self, direction: int) -> None:
        from console.ui.screens.jump import JumpScreen

        if self.app.replay is not None:
            self.app.push_screen(JumpScreen(direction > 0, lambda text: self.jump(
                text, direction > 0)))

    def jump(self, text: str, forward: bool = True) -> str | None:
        """Move the replay to what was typed; None when it moved, else why not."""
        from console.session.record.cursor import WhenError

        if self.app.replay is None:
            return "no recording is shown"
        try:
            said = self.app.replay.jump(text, forward)
        except WhenError as exc:
            return str(exc)
        self._moved(said)
        return None

    async def refused(self, operation_id: str, args: dict[str, Any] | None) -> None:
        """A recording is shown: no operation runs. A replay's registry (a wall's) refuses
        it at the sender and records the refusal; the live pause says how to return."""
        from console.session.record.replay import ReplaySession

        session = self.app.session
        if isinstance(session, ReplaySession):
            reg = session.registry
            if operation_id in reg.specs:
                out = await reg.invoke(operation_id, args)
                self.app.note(f"{out.message} (a replay)", "warn")
            return
        self.app.note(f"{operation_id}: not while paused (p returns to live)", "warn")
