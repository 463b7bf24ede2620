"""Formatting of numbers for the screen: one place, so every cell reads the same way.

Undefined figures print as "–" (never 0): a quantile with no observations is unknown.
"""

from __future__ import annotations

import time

DASH = "–"
HEALTH_GLYPH = {"up": ("●", "UP", "green"), "down": ("✖", "DOWN", "red"),
                "starting": ("◐", "START", "yellow"), "unknown": ("?", "UNKN", "grey50")}
SEVERITY = {"crit": ("✖", "CRIT", "bold red"), "warn": ("▲", "WARN", "yellow"),
            "info": ("ℹ", "INFO", "cyan")}


def secs(x: float | None) -> str:
    if x is None:
        return DASH
    if x < 1:
        return f"{x * 1000:.0f}ms"
    return f"{x:.2f}s"


def pct(x: float | None, digits: int = 0) -> str:
    return DASH if x is None else f"{x * 100:.{digits}f}%"


def num(x: float | None, digits: int = 0) -> str:
    if x is None:
        return DASH
    if abs(x) >= 10_000:
        return f"{x / 1000:.1f}k"
    return f"{x:.{digits}f}"


def duration(s: float | None) -> str:
    if s is None:
        return DASH
    s = int(max(0, s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h >= 24:
        return f"{h // 24}d{h % 24:02d}h"
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s"


def clock(t: float | None) -> str:
    return DASH if t is None else time.strftime("%H:%M:%S", time.localtime(t))


def money(x: float | None) -> str:
    return DASH if x is None else f"${x:,.2f}"
