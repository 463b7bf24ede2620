"""The seam between what was recorded and what shows it.

A ``Tape`` is a run of polls in time order. Replay (a recording on disk) and the live
pause (the recording that is being written) both hand one to the screens, which only ask
for the state at a poll and for the markers. How the polls are stored, and how a state
is rebuilt from stored samples with the catalog's own code, is the tape's business.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Literal, Protocol

from msgspec import Struct

from console.session.view import ConsoleState

MarkerKind = Literal["alert", "operation", "xid", "watchdog", "recording", "clock"]


class Marker(Struct, frozen=True):
    """Something that happened at a moment of the recording: an alert that fired or
    cleared, an operation (with its audit id), an Xid event, a watchdog decision, the
    recorder's own news (paused on a full disk, resumed), or a step of the wall clock
    (``clock``: the polls' times jump there, no duration does)."""

    t: float
    kind: MarkerKind
    text: str
    key: str = ""
    """The alert's key, the operation's audit id, the GPU index: what ties the marker to
    the rest of the record."""


class Tape(Protocol):
    """Recorded polls, oldest first."""

    def times(self) -> Sequence[float]:
        """When each recorded poll ran (epoch seconds), ascending."""
        ...

    def state_at(self, index: int) -> ConsoleState:
        """The console's state as of poll ``index``: its figures computed from the stored
        samples by the same code the live console uses, its history covering the
        recorded hour up to that poll."""
        ...

    def markers(self) -> Sequence[Marker]:
        """Every marker, oldest first."""
        ...

    def close(self) -> None:
        ...


def index_at(times: Sequence[float], t: float) -> int:
    """The last poll at or before ``t`` (the first poll when ``t`` is earlier than all)."""
    if not times:
        raise ValueError("an empty tape has no polls")
    return max(0, bisect.bisect_right(times, t) - 1)


class MemoryTape:
    """States kept as they were shown: for tests, and for a tape built in memory."""

    def __init__(self, states: Sequence[ConsoleState], markers: Sequence[Marker] = (),
                 maxlen: int | None = None) -> None:
        self._states = list(states)
        self._times = [s.polled_at if s.polled_at is not None else s.now for s in self._states]
        self._markers = sorted(markers, key=lambda m: m.t)
        self.maxlen = maxlen
        """At most this many polls (the oldest go first); None: no bound."""

    def append(self, state: ConsoleState, markers: Sequence[Marker] = ()) -> int:
        """One more poll at the end (the live pause records into a bounded one); how many
        of the oldest polls went to keep ``maxlen`` (a cursor on it moves back as many)."""
        t = state.polled_at if state.polled_at is not None else state.now
        if self._times and t <= self._times[-1]:
            return 0  # the same poll again (a redraw, not a poll): kept once
        self._states.append(state)
        self._times.append(t)
        self._markers.extend(sorted(markers, key=lambda m: m.t))
        dropped = 0
        if self.maxlen is not None and len(self._states) > self.maxlen:
            dropped = len(self._states) - self.maxlen
            del self._states[:dropped], self._times[:dropped]
            first = self._times[0]
            self._markers = [m for m in self._markers if m.t >= first]
        return dropped

    def times(self) -> Sequence[float]:
        return self._times

    def state_at(self, index: int) -> ConsoleState:
        return self._states[index]

    def markers(self) -> Sequence[Marker]:
        return self._markers

    def close(self) -> None:
        self._states.clear()
