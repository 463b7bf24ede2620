"""Replay without Textual: what the screens are shown from a tape, and the session a
replay runs on.

:class:`Replay` is a :class:`~console.session.record.cursor.ReplayCursor` and the state
it shows: the tape's state at the cursor, read-only (no operation allowed: the screens
hide and refuse every operation key), with :class:`~console.session.view.ReplayMark` for
the header (REPLAY or PAUSED, the recorded time, playing at what speed or paused). The
keys (``console/ui/app.py``) call its methods, which answer with the line the action log
shows.

Two uses:

- ``pod-console replay FILE``: :class:`ReplaySession` takes the place of the live
  :class:`~console.session.session.Session`: its tick moves the cursor instead of
  polling, and its registry is a wall's (every operation refused at the sender).
- the live pause (``p``): the live session goes on polling, and the app appends each
  poll's state to a bounded :class:`~console.session.record.tape.MemoryTape`
  (:class:`LiveTape`); a Replay on it is what the screens show until ``p`` again.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from msgspec.structs import replace

from console.model import fmt
from console.model.alerts import AlertBook, AlertEvent
from console.model.history import History
from console.model.snapshot import DeploymentSnapshot, PodSnapshot
from console.session.record.cursor import SPEEDS, ReplayCursor
from console.session.record.tape import Marker, MemoryTape, Tape, index_at
from console.session.session_like import SessionLike
from console.session.view import ConsoleContext, ConsoleState, ConsoleView, ReplayMark, StagedStart

if TYPE_CHECKING:
    from console.model.fleet import FleetSnapshot
    from console.operations.registry import OperationRegistry
    from console.session.record.store import Recorder

REPLAY_TICK_S = 0.25
"""How often a replay's clock is looked at while it plays (60× moves 15 s a tick)."""
AROUND_S = 30 * 60
"""A replay's plots show the recorded hour around the cursor: this much either side."""
LIVE_POLLS = 1800
"""Polls the live pause can go back over (an hour at a 2 s refresh: the plots' window)."""


class Replay:
    """A cursor on a tape and what it shows (see the module docstring). ``live``: the
    tape is the one being recorded now (the header says PAUSED and how far behind)."""

    def __init__(self, tape: Tape, *, at: float | None = None, live: bool = False,
                 clock: Callable[[], float] = time.monotonic,
                 tz: dt.tzinfo | None = None, state_dir: Path | None = None) -> None:
        self.tape = tape
        self.live = live
        self.tz = tz
        self.state_dir = state_dir
        """Where a replay's refused operations are recorded (None: the default)."""
        self.cursor = ReplayCursor(tape, clock=clock, at=at)
        self._ahead: tuple[int, History] | None = None

    def mark(self) -> ReplayMark:
        c = self.cursor
        t = c.t
        when = time.strftime("%H:%M:%S", time.localtime(t))
        day = time.strftime("%Y-%m-%d", time.localtime(t))
        play = f"▶ {c.speed:g}×" if c.playing else "paused"
        behind = None
        if self.live:
            last = c.times()[-1]
            behind = last - t
        return ReplayMark("PAUSED" if self.live else "REPLAY", when, day, play, behind,
                          self.ahead(t))

    def ahead(self, t: float) -> History:
        """The plots' history ``AROUND_S`` after ``t`` (the tape's last poll at most):
        its points reach back an hour, so it holds the hour around the cursor. One
        history is kept: playing moves it on a poll at a time."""
        times = self.cursor.times()
        j = index_at(times, t + AROUND_S)
        if self._ahead is None or self._ahead[0] != j:
            at = getattr(self.tape, "history_at", None)
            self._ahead = (j, at(j) if at is not None else self.tape.state_at(j).history)
        return self._ahead[1]

    def state(self) -> ConsoleState:
        """The tape's state at the cursor, read-only, with the header's mark."""
        s = self.cursor.state()
        return replace(s, view=replace(s.view, read_only=True), allowed=frozenset(),
                       operation=None, replay=self.mark())

    # -- the keys: each answers with what the action log says -----------------------------
    def toggle(self) -> str:
        playing = self.cursor.toggle()
        return (f"replay: playing at {self.cursor.speed:g}×" if playing
                else f"replay: paused at {fmt.clock(self.cursor.t)}")

    def step(self, n: int) -> str | None:
        """None: it did not move (at an end)."""
        if not self.cursor.step(n):
            return None
        return f"replay: {fmt.clock(self.cursor.t)}"

    def jump(self, text: str, forward: bool) -> str:
        """Raises :class:`~console.session.record.cursor.WhenError` on bad input."""
        self.cursor.jump(text, forward, tz=self.tz)
        return f"replay: jumped to {fmt.clock(self.cursor.t)}"

    def marker(self, direction: int) -> str | None:
        """None: no marker that way."""
        m = self.cursor.marker(direction)
        if m is None:
            return None
        return f"marker {fmt.clock(m.t)} {m.kind}: {m.text}"

    def speed(self, which: int) -> str:
        """``1``, ``2``, ``3``: 1×, 10×, 60×."""
        self.cursor.set_speed(SPEEDS[which - 1])
        return f"replay: {self.cursor.speed:g}×"

    def tick(self) -> bool:
        """While playing: the clock's move; True when the poll shown changed."""
        return self.cursor.advance()


class LiveTape(MemoryTape):
    """The polls of this console, as they were shown, the last ``LIVE_POLLS`` of them;
    its markers are the alerts that fired or cleared (until the recorder's tape takes
    its place: every marker of the recording)."""

    def __init__(self, maxlen: int = LIVE_POLLS) -> None:
        super().__init__([], maxlen=maxlen)
        self._seen = float("-inf")

    def record(self, state: ConsoleState) -> int:
        """One poll's state (a poll that is already on the tape is not added again);
        how many of the oldest went (see ``MemoryTape.append``)."""
        marks = alert_markers(state.alert_history, self._seen)
        if marks:
            self._seen = marks[-1].t
        return self.append(state, marks)


def alert_markers(events: Iterable[AlertEvent], after: float) -> list[Marker]:
    """Markers for the alert events later than ``after``, worded as the recorder words
    them: ``CRIT Q27 down`` when one fires, ``cleared: Q27 down`` and the like after."""
    return [Marker(e.t, "alert", f"{e.severity.upper()} {e.title}" if e.kind == "firing"
                   else f"{'cleared' if e.kind == 'resolved' else e.kind}: {e.title}")
            for e in events if e.t > after]


class ReplaySession:
    """What ``pod-console replay`` runs on in the live session's place: no sources, no
    alert judging, no delivery; its tick moves the replay. The app reads it as it reads
    a session (both are a :class:`~console.session.session_like.SessionLike`).
    ``registry``: a wall's (every operation refused at the sender, and recorded so)."""

    def __init__(self, replay: Replay, registry: OperationRegistry, *,
                 on_change: Callable[[str], None] | None = None) -> None:
        # no context and no staged start: nothing here polls, loads or judges
        self.ctx: ConsoleContext | None = None
        self.staged: StagedStart | None = None
        self.wall = True
        self.alerts = AlertBook()
        """Empty: a replay judges nothing (its recorded alerts are in its state)."""
        self.polls = 0
        self.poll_failure: tuple[float, str] | None = None
        self.replay = replay
        self.registry = registry
        self._notify = on_change or (lambda kind: None)

    @property
    def fleet(self) -> FleetSnapshot | None:
        return None

    @property
    def recorder(self) -> Recorder | None:
        return None  # a replay records nothing

    async def adopt(self, ctx: ConsoleContext) -> bool:
        raise RuntimeError("a replay adopts no context: nothing here polls")

    @property
    def ready(self) -> bool:
        return True

    def now(self) -> float:
        return self.replay.cursor.t

    @property
    def view(self) -> ConsoleView:
        return self.state().view

    @property
    def history(self) -> History:
        return self.replay.cursor.state().history

    @property
    def refresh_s(self) -> float:
        """The app's timer: how often the replay's clock is looked at."""
        return REPLAY_TICK_S

    def step_refresh(self, direction: int) -> float | None:
        return None  # nothing polls

    def tick(self) -> None:
        if self.replay.tick():
            self._notify("poll")

    def refresh_now(self) -> None:
        """Nothing to poll: a redraw."""
        self._notify("poll")

    def refresh_asked(self) -> None:
        self.refresh_now()

    async def poll(self) -> bool:
        return False

    @property
    def snapshot(self) -> DeploymentSnapshot | None:
        return self.replay.cursor.state().snapshot

    @property
    def pod(self) -> PodSnapshot | None:
        return self.replay.cursor.state().pod

    def state(self) -> ConsoleState:
        return self.replay.state()

    def stale_text(self) -> str | None:
        return self.replay.cursor.state().stale

    def started(self) -> None:
        return None

    def acknowledge(self, who: str, key: str | None = None) -> list[str]:
        return []

    async def slot_logs(self, slot: str, lines: int = 200) -> list[str]:
        return ["(a replay has no log lines: the recording holds numbers, not logs)"]

    def want_fleet(self) -> None:
        return None

    async def aclose(self) -> None:
        self.replay.tape.close()


def _is_session_like(s: ReplaySession) -> SessionLike:
    return s  # mypy: a replay's session is what the app drives


def replay_registry(state_dir: Path) -> OperationRegistry:
    """A wall's registry for a replay: every operation is there (its key is known) and
    every one is refused at the sender, the refusal recorded in the audit log."""
    from console.operations.audit import AuditLog
    from console.operations.ops import build_registry

    return build_registry(AuditLog(state_dir / "audit.jsonl"), True, agent=None, wall=True)
