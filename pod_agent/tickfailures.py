"""The watchdog's own health: its ticks that failed, since when, and why (issue 42).

A tick that raises used to be swallowed: the one safeguard that saves money stopped
without a word. Each part of a tick (the memory guard, the traffic read, the stop
policy) now fails on its own; what failed is kept here, logged with its traceback the
first time (and whenever the error changes, so a tick every 30 s does not fill the log
with one traceback), audited, and served in ``status --json`` (``watchdog.failing``),
which the console turns into a CRIT. A tick with no failure ends the run of failures.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_ERROR = 300
"""Characters of an error kept and served (a traceback goes to the log, whole)."""


def describe(part: str, exc: BaseException) -> str:
    """One line: the part of the tick and the exception, printable (it is served)."""
    text = f"{part}: {type(exc).__name__}: {exc}"
    return "".join(c if c.isprintable() else " " for c in text)[:MAX_ERROR]


@dataclass
class TickFailures:
    since: float | None = None
    """Pod clock (wall): the first failed tick of the current run of failures."""
    ticks: int = 0
    """Failed ticks in that run (each tick counts once, however many parts failed)."""
    total: int = 0
    """Failed ticks since the agent started."""
    last_error: str | None = None
    last_at: float | None = None
    _logged: str | None = None

    def tick(self, now: float, failures: list[tuple[str, BaseException]],
             log: Callable[[dict[str, Any], str], None]) -> None:
        """The outcome of one tick: ``failures`` (part, exception), empty when it went
        well. ``log(record, traceback)`` writes the audit record and the agent's log."""
        if not failures:
            if self.since is not None:
                log({"op": "watchdog-tick-recovered", "failed_ticks": self.ticks,
                     "since": self.since, "last_error": self.last_error}, "")
            self.since = self._logged = None
            self.ticks = 0
            return
        if self.since is None:
            self.since = now
        self.ticks += 1
        self.total += 1
        self.last_at = now
        self.last_error = "; ".join(describe(p, e) for p, e in failures)[:MAX_ERROR]
        if self.last_error != self._logged:
            self._logged = self.last_error
            tb = "".join("".join(traceback.format_exception(type(e), e, e.__traceback__))
                         for _, e in failures)
            log({"op": "watchdog-tick-failed", "error": self.last_error,
                 "failed_ticks": self.ticks, "since": self.since,
                 "traceback": tb[-4000:]}, tb)

    def to_json(self) -> dict[str, Any] | None:
        """None while the ticks go well."""
        if self.since is None:
            return None
        return {"since": self.since, "ticks": self.ticks, "total": self.total,
                "last_error": self.last_error, "last_at": self.last_at}
