"""Times on the command line (``--from``, ``--to``, ``--at``): ``03:10`` (today, or
yesterday when that is still to come), ``3m ago`` / ``2h ago`` / ``90s ago``, an ISO
date and time (``2026-12-02T03:10``), or epoch seconds."""

from __future__ import annotations

import datetime as dt
import math
import re

_AGO = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*(?:ago)?\s*$", re.I)
_CLOCK = re.compile(r"^\s*(\d{1,2}):(\d{2})(?::(\d{2}))?\s*$")
_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_when(text: str, now: float, tz: dt.tzinfo | None = None,
               day_of: float | None = None) -> float:
    """Epoch seconds ``text`` means at ``now`` (``ValueError`` naming what it cannot
    read). ``day_of``: a clock time is on that moment's day (a replay's cursor: 03:10 of
    the day being shown); None: today, or yesterday when that is still to come."""
    m = _AGO.match(text)
    if m:
        return now - float(m[1]) * _UNIT[m[2].lower()]
    m = _CLOCK.match(text)
    if m:
        h, mi, s = int(m[1]), int(m[2]), int(m[3] or 0)
        if h > 23 or mi > 59 or s > 59:
            raise ValueError(f"{text!r}: not a time of day")
        base = now if day_of is None else day_of
        local = dt.datetime.fromtimestamp(base, tz) if tz is not None else \
            dt.datetime.fromtimestamp(base).astimezone()
        at = local.replace(hour=h, minute=mi, second=s, microsecond=0)
        if day_of is None and at.timestamp() > now:
            at -= dt.timedelta(days=1)
        return at.timestamp()
    try:
        v = float(text)
    except ValueError:
        pass
    else:
        if math.isfinite(v):
            return v
        raise ValueError(f"{text!r}: not a time")
    try:
        d = dt.datetime.fromisoformat(text.strip().replace(" ", "T", 1))
    except ValueError:
        raise ValueError(f"{text!r}: not a time (HH:MM, '3m ago', an ISO date and time, or "
                         "epoch seconds)") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=tz) if tz is not None else d.astimezone()
    return d.timestamp()
