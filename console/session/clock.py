"""The console's two clocks, and how a step of the wall clock is told.

Every duration the console measures — a stall, an alert's ``for:`` and hold, a timeout,
a retention age, an age on screen — runs on the monotonic clock: it never jumps. The
wall clock is for what people read and schedules (a time of day, a file's name, the
pod's working hours). A wall clock does jump: a VM resumed, NTP after a suspend, a wall
display without a real-time clock that learns the date a week late. Such a step moves
no duration here; it is told once (:class:`WallSteps`), in the action log and the
recording, and nothing is decided on it.

A :class:`Clock` is what a session runs on. :class:`SystemClock` reads the machine's;
tests inject one whose two readings they move apart. A caller that gives one callable
(the demo's, an old test's) gets :class:`OneClock`: both readings from it, so that
durations follow it as they always did (no step can be told on one clock).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from msgspec import Struct


@runtime_checkable
class Clock(Protocol):
    def wall(self) -> float:
        """Epoch seconds: for display, schedules and file names only."""
        ...

    def monotonic(self) -> float:
        """Seconds that never jump: every duration is a difference of these."""
        ...


class SystemClock(Struct, frozen=True):
    """The machine's clocks."""

    def wall(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


class OneClock(Struct, frozen=True):
    """One callable read as both clocks."""

    read: Callable[[], float]

    def wall(self) -> float:
        return self.read()

    def monotonic(self) -> float:
        return self.read()


def clock_of(c: Clock | Callable[[], float] | None) -> Clock:
    """The clock a session runs on: ``c`` when it has both readings; the machine's for
    None or ``time.time``; else one callable read as both."""
    if c is None or c is time.time:
        return SystemClock()
    if isinstance(c, Clock):
        return c
    return OneClock(c)


class Step(Struct, frozen=True):
    """The wall clock moved ``by_s`` more (or less: negative) than the monotonic one
    between two readings."""

    by_s: float
    wall: float
    """The wall clock just after the step."""

    def text(self) -> str:
        return f"wall clock stepped {signed_span(self.by_s)}: durations unaffected"


def signed_span(s: float) -> str:
    """``+8d 0h``, ``-1h 0m``, ``+1m 0s``, ``+45s``: a step's size as the log says it."""
    sign = "-" if s < 0 else "+"
    n = round(abs(s))
    d, rest = divmod(n, 86400)
    h, rest = divmod(rest, 3600)
    m, sec = divmod(rest, 60)
    if d:
        return f"{sign}{d}d {h}h"
    if h:
        return f"{sign}{h}h {m}m"
    if m:
        return f"{sign}{m}m {sec}s"
    return f"{sign}{sec}s"


class WallSteps:
    """Compares each reading's wall delta with its monotonic delta since the reading
    before: more than ``tolerance_s`` apart (either way) is a step, told once (the next
    reading is compared with this one)."""

    def __init__(self) -> None:
        self._last: tuple[float, float] | None = None
        self.steps: list[Step] = []

    def observe(self, wall: float, mono: float, tolerance_s: float) -> Step | None:
        last, self._last = self._last, (wall, mono)
        if last is None:
            return None
        off = (wall - last[0]) - (mono - last[1])
        if abs(off) <= tolerance_s:
            return None
        step = Step(off, wall)
        self.steps.append(step)
        return step


class SessionClock:
    """The clock a session runs on: the one it was given, else its context's (read
    anew when the context changes: a staged start's full context brings its own), else
    the machine's."""

    def __init__(self, given: Clock | Callable[[], float] | None) -> None:
        self._given = clock_of(given) if given is not None else None
        self._of_ctx: tuple[object, Clock] | None = None
        """The context's clock as read last, and its two readings."""

    def of(self, src: Clock | Callable[[], float] | None) -> Clock:
        """The clock now, for a session whose context runs on ``src`` (None: no
        context yet)."""
        if self._given is not None:
            return self._given
        if src is None:
            return clock_of(None)
        if self._of_ctx is None or self._of_ctx[0] is not src:
            self._of_ctx = (src, clock_of(src))
        return self._of_ctx[1]
