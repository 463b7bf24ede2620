"""Where replay stands on a tape, and how it moves: Textual-free (the app's keys call it,
tests drive it on an injected clock).

A :class:`ReplayCursor` is at one poll of a :class:`~console.session.record.tape.Tape`
and at a moment (``position``): the poll's own time after a step, or a marker's time
after ``[``/``]`` (two markers between the same two polls are then still told apart).
Playing moves the moment forward at 1×, 10× or 60× the real clock and shows the last
poll at or before it; at the tape's end it pauses there. The keys follow below/atop:

- space: :meth:`toggle` (pause or play);
- ``t``/``T``: :meth:`step` one poll forward or back;
- ``j``/``J``: :meth:`jump` by a duration forward or back, or to a clock time
  (:func:`parse_when` reads what was typed);
- ``[``/``]``: :meth:`marker` before or after;
- ``1``/``2``/``3``: :meth:`set_speed` 1×, 10×, 60×.

The tape may grow while the cursor is on it (the live pause reads the polls being
recorded): every move reads ``times()`` afresh.
"""

from __future__ import annotations

import bisect
import datetime as dt
import re
import time
from collections.abc import Callable, Sequence

from msgspec import Struct

from console.session.record.tape import Marker, Tape, index_at
from console.session.record.when import parse_when as moment
from console.session.view import ConsoleState

SPEEDS = (1.0, 10.0, 60.0)
"""What ``1``, ``2`` and ``3`` choose."""


class WhenError(ValueError):
    """What was typed is not a time the cursor can go to (the message says what is)."""


HELP = ("a duration (5m, 1h30m, 90s, -10m), \"3m ago\", a clock time (03:10, 03:10:05), "
        "an ISO time (2026-11-18T03:10:05), start or end")

_UNITS = {"ms": 0.001, "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
          "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
          "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
          "d": 86400.0, "day": 86400.0, "days": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")


class When(Struct, frozen=True):
    """What :func:`parse_when` read: a moment (``at``), or a move (``by`` seconds, its
    sign said when ``signed``; unsigned, the key chooses: ``j`` forward, ``J`` back)."""

    at: float | None = None
    by: float = 0.0
    signed: bool = False


def parse_duration(text: str) -> float | None:
    """``5m``, ``1h30m``, ``90s``, ``90`` (seconds), ``2 min``: seconds, or None when
    ``text`` is not a duration."""
    s = text.strip().lower().replace(" ", "")
    if not s:
        return None
    total, pos = 0.0, 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None or m.end() == pos:
            return None
        unit = m.group(2) or ("s" if m.end() == len(s) and pos == 0 else "")
        if unit not in _UNITS:
            return None
        total += float(m.group(1)) * _UNITS[unit]
        pos = m.end()
    return total


def parse_when(text: str, *, position: float, now: float,
               tz: dt.tzinfo | None = None) -> When:
    """What the user typed to go to (``--at``, the ``j`` dialog), read against the
    cursor's ``position`` (a clock time is on its day) and the real ``now`` ("3m ago").
    ``tz``: the zone clock and ISO times without one are in (None: this machine's).
    Raises :class:`WhenError` saying what is accepted."""
    s = " ".join(text.strip().split())
    low = s.lower()
    if not s:
        raise WhenError(f"nothing typed: give {HELP}")
    if low in ("start", "begin", "first"):
        return When(at=float("-inf"))
    if low in ("end", "last", "now", "live"):
        return When(at=float("inf") if low != "now" else now)
    if low.endswith(" ago") or low.endswith("ago"):
        d = parse_duration(low.removesuffix("ago"))
        if d is None:
            raise WhenError(f"{s!r}: not a duration before \"ago\" (3m ago, 1h ago)")
        return When(at=now - d)
    if low[0] in "+-":
        d = parse_duration(low[1:])
        if d is None:
            raise WhenError(f"{s!r} is not a duration: give {HELP}")
        return When(by=d if low[0] == "+" else -d, signed=True)
    d = parse_duration(low)
    if d is not None:
        return When(by=d)
    try:  # a clock time (on the day shown), an ISO time: read as the command line reads them
        return When(at=moment(s, now, tz, day_of=position))
    except ValueError:
        raise WhenError(f"{s!r} is not a time: give {HELP}") from None


class ReplayCursor:
    """A position on a tape, playing or paused (see the module docstring).

    ``clock``: real seconds (monotonic) that playing follows; ``at``: the moment to
    start at (default: the first poll)."""

    def __init__(self, tape: Tape, *, clock: Callable[[], float] = time.monotonic,
                 at: float | None = None, speed: float = 1.0, playing: bool = False) -> None:
        times = tape.times()
        if not times:
            raise ValueError("an empty tape has no polls to replay")
        self.tape = tape
        self._clock = clock
        self.speed = speed
        self.index = 0
        self.position = times[0]
        self.playing = False
        self._anchor = (self.position, clock())
        if at is not None:
            self.seek(at)
        if playing:
            self.play()

    # -- where it is ---------------------------------------------------------------------
    def times(self) -> Sequence[float]:
        return self.tape.times()

    @property
    def t(self) -> float:
        """When the poll shown ran."""
        return self.times()[self.index]

    @property
    def at_end(self) -> bool:
        return self.index >= len(self.times()) - 1

    def state(self) -> ConsoleState:
        return self.tape.state_at(self.index)

    def _go(self, index: int, position: float | None = None) -> bool:
        """To poll ``index`` (clamped) and ``position`` (default: the poll's time); the
        play anchor follows. True when the poll shown changed."""
        times = self.times()
        index = max(0, min(index, len(times) - 1))
        changed = index != self.index
        self.index = index
        self.position = times[index] if position is None else position
        self._anchor = (self.position, self._clock())
        return changed

    def dropped(self, n: int) -> None:
        """The tape let its ``n`` oldest polls go (a bounded live tape): the cursor stays
        on the poll it shows, or on the oldest left when that one went."""
        if n <= 0:
            return
        times = self.times()
        self.index = max(0, self.index - n)
        self.position = max(self.position, times[self.index])
        self._anchor = (self.position, self._anchor[1])

    # -- playing -------------------------------------------------------------------------
    def play(self) -> None:
        if self.at_end:
            self._go(0)  # a finished replay plays again from the start (as a player does)
        self.playing = True
        self._anchor = (self.position, self._clock())

    def pause(self) -> None:
        self.advance()
        self.playing = False

    def toggle(self) -> bool:
        """Space: play when paused, pause when playing; True when now playing."""
        if self.playing:
            self.pause()
        else:
            self.play()
        return self.playing

    def set_speed(self, speed: float) -> None:
        """1×, 10×, 60× (the moment reached so far is kept)."""
        if speed <= 0:
            raise ValueError("a speed is positive")
        self.advance()
        self.speed = speed
        self._anchor = (self.position, self._clock())

    def advance(self) -> bool:
        """While playing: to where the real clock has carried the moment since play
        (the last poll at or before it); at the end, paused on the last poll. True when
        the poll shown changed, or playing stopped at the end."""
        if not self.playing:
            return False
        t0, r0 = self._anchor
        pos = t0 + (self._clock() - r0) * self.speed
        times = self.times()
        if pos >= times[-1]:  # the end: paused there (a change the header shows)
            self.index, self.position, self.playing = len(times) - 1, times[-1], False
            return True
        new = max(self.index, index_at(times, pos))  # never back while playing
        changed = new != self.index
        self.index, self.position = new, pos
        return changed

    # -- moving --------------------------------------------------------------------------
    def step(self, n: int) -> bool:
        """``t`` (+1) and ``T`` (-1): ``n`` polls on, from the poll shown."""
        self.advance()
        return self._go(self.index + n)

    def seek(self, t: float) -> bool:
        """To the last poll at or before ``t`` (the first poll for a moment before all;
        the last for one after all)."""
        times = self.times()
        if t == float("-inf"):
            return self._go(0)
        if t == float("inf") or t >= times[-1]:
            return self._go(len(times) - 1)
        return self._go(index_at(times, t), max(t, times[0]))

    def jump(self, text: str, forward: bool = True, *, now: float | None = None,
             tz: dt.tzinfo | None = None) -> bool:
        """``j`` (forward) / ``J`` (back): by a duration, or to a moment (what
        :func:`parse_when` reads). Raises :class:`WhenError` on what it cannot read."""
        self.advance()
        when = parse_when(text, position=self.position,
                          now=time.time() if now is None else now, tz=tz)
        if when.at is not None:
            return self.seek(when.at)
        by = when.by if when.signed or forward else -when.by
        # from the poll shown (after a marker the moment is before it), or while
        # playing from where the moment has got to
        return self.seek(max(self.position, self.t) + by)

    def marker(self, direction: int) -> Marker | None:
        """``]`` (+1): the next marker after the moment; ``[`` (-1): the one before. The
        cursor goes to the first poll at or after it (the poll that shows what it
        marks); None (and no move) when there is none that way."""
        self.advance()
        marks = self.tape.markers()
        ts = [m.t for m in marks]
        if direction > 0:
            i = bisect.bisect_right(ts, self.position)
            if i >= len(marks):
                return None
        else:
            i = bisect.bisect_left(ts, self.position) - 1
            if i < 0:
                return None
        mark = marks[i]
        times = self.times()
        self._go(min(bisect.bisect_left(times, mark.t), len(times) - 1), mark.t)
        return mark
