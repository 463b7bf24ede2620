"""The app's keys over a recording: ``p`` (the live pause) and, while a recording is
shown, space t/T j/J [/] 1/2/3. A mixin of :class:`~console.ui.app.PodConsoleApp`: what
these keys move is the app's ``replay`` (``console/session/record/replay.py`` holds the
cursor and what each move says); this module turns keys into those moves and repaints."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.screen import ModalScreen

from console.session.record.replay import Replay

if TYPE_CHECKING:
    from console.ui.app import PodConsoleApp


class ReplayKeys:
    """Methods of the app (``self`` is a :class:`PodConsoleApp`)."""

    @property
    def replaying(self: PodConsoleApp) -> bool:
        """A recording opened with ``pod-console replay`` (not the live pause)."""
        return self.live_tape is None

    def check_action(self: PodConsoleApp, action: str,
                     parameters: tuple[object, ...]) -> bool | None:
        """The replay keys only while a recording is shown, ``p`` only live; neither
        while a dialog or a text box has the keys (the jump dialog's own typing)."""
        if action.startswith("replay_") or action == "live_pause":
            from textual.widgets import Input

            if isinstance(self.screen, ModalScreen) or isinstance(self.focused, Input):
                return False
            if action == "live_pause":
                return not self.replaying
            return self.replay is not None
        return True

    def action_live_pause(self: PodConsoleApp) -> None:
        """``p``: hold the screen on the poll shown now (polling and recording go on; the
        replay keys move over what was polled); ``p`` again: live."""
        if self.replaying or self.live_tape is None:
            return
        if self.replay is not None:
            self.replay = None
            self._stop_replay_timer()
            self.note("live again")
        elif not self.live_tape.times():
            self.note("nothing polled yet to pause on", "warn")
            return
        else:
            self.replay = Replay(self.live_tape, at=self.live_tape.times()[-1], live=True)
            self.note("paused: polling goes on; t/T step, j/J jump, [/] alerts, space "
                      "plays, p returns to live", "bold")
        self.refresh_screens()

    def _stop_replay_timer(self: PodConsoleApp) -> None:
        if self._replay_timer is not None:
            self._replay_timer.stop()
            self._replay_timer = None

    def _replay_moved(self: PodConsoleApp, said: str | None, bell: bool = True) -> None:
        if said is None:
            if bell:
                self.bell()  # at an end: nothing that way
        else:
            self.note(said, "dim", replace=self._replay_noted)
        self._replay_noted = said is not None
        self.refresh_screens()

    _replay_noted = False

    def action_replay_toggle(self: PodConsoleApp) -> None:
        if self.replay is None:
            return
        said = self.replay.toggle()
        if self.replay.live:  # the live session's timer polls: the pause has its own
            self._stop_replay_timer()
            if self.replay.cursor.playing:
                from console.session.record.replay import REPLAY_TICK_S

                self._replay_timer = self.set_interval(REPLAY_TICK_S, self._replay_tick)
        self._replay_moved(said)

    def _replay_tick(self: PodConsoleApp) -> None:
        if self.replay is not None and self.replay.tick():
            self.refresh_screens()
        if self.replay is None or not self.replay.cursor.playing:
            self._stop_replay_timer()

    def action_replay_step(self: PodConsoleApp, n: int) -> None:
        if self.replay is not None:
            self._replay_moved(self.replay.step(n))

    def action_replay_marker(self: PodConsoleApp, direction: int) -> None:
        if self.replay is not None:
            said = self.replay.marker(direction)
            if said is None:
                self.bell()
                self.note("no marker " + ("after" if direction > 0 else "before") + " this",
                          "dim")
            self._replay_moved(said, bell=False)

    def action_replay_speed(self: PodConsoleApp, which: int) -> None:
        if self.replay is not None:
            self._replay_moved(self.replay.speed(which))

    def action_replay_jump(self: PodConsoleApp, direction: int) -> None:
        from console.ui.screens.jump import JumpScreen

        if self.replay is not None:
            self.push_screen(JumpScreen(direction > 0, lambda text: self.replay_jump(
                text, direction > 0)))

    def replay_jump(self: PodConsoleApp, text: str, forward: bool = True) -> str | None:
        """Move the replay to what was typed; None when it moved, else why not."""
        from console.session.record.cursor import WhenError

        if self.replay is None:
            return "no recording is shown"
        try:
            said = self.replay.jump(text, forward)
        except WhenError as exc:
            return str(exc)
        self._replay_moved(said)
        return None
