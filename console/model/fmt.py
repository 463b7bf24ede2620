"""Formatting of numbers for the screen: one place, so every cell reads the same way.

Undefined figures print as "–" (never 0): a quantile with no observations is unknown.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import time
from collections.abc import Sequence

DASH = "–"
# the third of each: the state's semantic style name, which the console's theme maps to how
# it looks (console/ui/themes.py); the model names no colour
HEALTH_GLYPH = {"up": ("●", "UP", "ok"), "down": ("✖", "DOWN", "crit.text"),
                "starting": ("◐", "START", "warn"), "unknown": ("?", "UNKN", "unknown")}
SEVERITY = {"crit": ("✖", "CRIT", "crit"), "warn": ("▲", "WARN", "warn"),
            "info": ("ℹ", "INFO", "info")}


def secs(x: float | None) -> str:
    """Two significant digits: enough to read a p95 at a glance, and it does not flicker
    (the detail view and `status --json` carry the full value). Rounding moves a value
    up a unit when it reaches it: 0.9996 s is "1.0s", never "1000ms"."""
    if x is None:
        return DASH
    if x < 0:
        return f"-{secs(-x)}"
    if x < 0.00995:
        return f"{x * 1000:.1f}ms"
    if x < 1:
        ms = x * 1000
        r = round(ms, 1 - math.floor(math.log10(ms)))
        if r < 1000:
            return f"{r:.0f}ms"
    if x < 9.95:
        return f"{x:.1f}s"
    return f"{x:.0f}s"


def pct(x: float | None, digits: int = 0) -> str:
    return DASH if x is None else f"{x * 100:.{digits}f}%"


def num(x: float | None, digits: int = 0) -> str:
    if x is None:
        return DASH
    if abs(x) >= 10_000:
        return f"{x / 1000:.1f}k"
    return f"{x:.{digits}f}"


def rate(x: float | None) -> str:
    """Token rates to two significant digits (430, 95, 7.5)."""
    if x is None:
        return DASH
    if x >= 100:
        return f"{round(x, -1 if x < 1000 else -2):.0f}"
    return f"{x:.2g}" if x >= 1 else f"{x:.1f}"


def duration(s: float | None, seconds: bool = True) -> str:
    if s is None:
        return DASH
    s = int(max(0, s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h >= 24:
        return f"{h // 24}d{h % 24:02d}h"
    if h:
        return f"{h}h{m:02d}m"
    return f"{m}m{sec:02d}s" if seconds else f"{m}m"


def elapsed(s: float) -> str:
    """How long something has lasted, as a reader says it: "54 s" under a minute (not
    "0m", which reads as nothing), then ``duration``'s minutes ("3m", "1h05m")."""
    s = max(0.0, s)
    return f"{int(s)} s" if s < 60 else duration(s, False)


def count(n: int, word: str, plural: str | None = None) -> str:
    """``1 attempt``, ``2 attempts`` (``plural`` where adding an s is wrong)."""
    return f"{n} {word if n == 1 else plural or word + 's'}"


def clock(t: float | None) -> str:
    return DASH if t is None else time.strftime("%H:%M:%S", time.localtime(t))


def money(x: float | None, digits: int = 2) -> str:
    return DASH if x is None else f"${x:,.{digits}f}"


def wall_time(iso: str | None) -> str:
    """An ISO instant as its own wall time, "20:00" (the profile's zone: the agent writes
    it so)."""
    import datetime as dt

    if not iso:
        return DASH
    try:
        return dt.datetime.fromisoformat(iso).strftime("%H:%M")
    except ValueError:
        return iso


OVERDUE_S = 180.0
"""A stop this many (pod) seconds past its time is late ("overdue"); before, "due now"."""


def stop_time(iso: str | None, now: float, left: float | None = None) -> str:
    """The watchdog's next stop as a person reads it: its wall time in the profile's own
    zone and how far away it is ("Tue 18:00 +09:00, in 2h10m"); the raw text if unreadable.
    ``left``: the seconds to it on the pod's clock, as the header counts them (then
    ``now`` only reads the ISO text); without it, ``now`` is the clock to count on."""
    import datetime as dt

    if not iso:
        return DASH
    try:
        when = dt.datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if when.tzinfo is None:
        return iso
    if left is None:
        left = when.timestamp() - now
    rel = ("overdue" if left < -OVERDUE_S else "due now" if left <= 0
           else f"in {duration(left, False)}")
    return f"{zoned(when)}, {rel}"


def zoned(when: _dt.datetime) -> str:
    """An aware datetime in the viewer's zone ("Tue 10:00"), with the pod's own wall time
    beside it only where its zone differs ("Tue 10:00 (18:00 +09:00 on the pod)"): a
    reader plans in their own hours, the profile's schedule is in the pod's."""
    local = when.astimezone()
    text = str(local.strftime("%a %H:%M"))
    if local.utcoffset() != when.utcoffset():
        z = when.strftime("%z")
        text += f" ({when.strftime('%H:%M')} {z[:3]}:{z[3:]} on the pod)"
    return text


def when_text(iso: object) -> str:
    """An ISO instant from the agent as ``zoned`` says it; anything else as it came
    (never raises: a log line must not fail on a remote value)."""
    import datetime as dt

    if not isinstance(iso, str) or not iso:
        return DASH
    try:
        when = dt.datetime.fromisoformat(iso)
    except ValueError:
        return iso
    return zoned(when) if when.tzinfo is not None else iso


def aligned(rows: Sequence[tuple[str, ...]]) -> list[str]:
    """Rows of cells as text lines, each column as wide as its widest cell."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]


def progress_shape(step: str, message: str) -> tuple[str, str]:
    """A progress line without its numbers: two lines of one shape are one line whose
    numbers moved (``round 2/3 in 29 s``, ``in 28 s``…), shown in place of each other."""
    return step, re.sub(r"\d+(?:\.\d+)?", "#", message)
