"""Bounded per-series history for plots: ring buffers over a time window.

A wall display runs for weeks, so every buffer has a hard ``maxlen`` derived
from the window and the polling step; older points also fall out by time. When the
step gets shorter (``+``), :meth:`History.fit_step` lengthens every buffer so that the
window still holds ``window_s`` of points.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable


class Series:
    """(t, value) points newer than ``window_s``, at most ``maxlen`` of them."""

    def __init__(self, window_s: float, maxlen: int) -> None:
        self.window_s = window_s
        self.points: deque[tuple[float, float]] = deque(maxlen=maxlen)

    def add(self, t: float, value: float | None) -> None:
        if value is None or math.isnan(value):
            return
        if self.points and t <= self.points[-1][0]:
            return  # out of order or duplicate (a backfill overlapping live data)
        self.points.append((t, value))
        self.trim(t)

    def trim(self, now: float) -> None:
        cutoff = now - self.window_s
        while self.points and self.points[0][0] < cutoff:
            self.points.popleft()

    def values(self) -> list[float]:
        return [v for _, v in self.points]

    def last(self) -> float | None:
        return self.points[-1][1] if self.points else None

    def __len__(self) -> int:
        return len(self.points)


class History:
    """All series of the console, keyed by (slot, metric)."""

    def __init__(self, window_s: float = 3600.0, min_step_s: float = 1.0) -> None:
        self.window_s = window_s
        self.maxlen = self.length_for(min_step_s)
        self._series: dict[tuple[str, str], Series] = {}
        self.backfills = 0
        """How many merges from Prometheus so far (a plot redraws after one)."""

    def length_for(self, step_s: float) -> int:
        """Points that ``window_s`` holds at one point every ``step_s``."""
        return int(self.window_s / step_s) + 1

    def fit_step(self, step_s: float) -> None:
        """Points now come every ``step_s``: every buffer (and every new one) holds the
        whole window at that step. Buffers only grow: after a longer step the window's
        time limit drops the older, denser points as they age, and a shorter maxlen
        would drop them at once (``-`` would cut the plots in half)."""
        need = self.length_for(step_s)
        if need <= self.maxlen:
            return
        self.maxlen = need
        for s in self._series.values():
            s.points = deque(s.points, maxlen=need)

    def series(self, slot: str, metric: str) -> Series:
        key = (slot, metric)
        s = self._series.get(key)
        if s is None:
            s = self._series[key] = Series(self.window_s, self.maxlen)
        return s

    def add(self, slot: str, metric: str, t: float, value: float | None) -> None:
        self.series(slot, metric).add(t, value)

    def backfill(self, slot: str, metric: str, points: Iterable[tuple[float, float]]) -> None:
        """Merge older points (Prometheus range queries) under what was polled live:
        a point at a time already held keeps the live value."""
        s = self.series(slot, metric)
        held = {t for t, _ in s.points}
        merged = sorted([*s.points, *((t, v) for t, v in points
                                      if t not in held and math.isfinite(t) and math.isfinite(v))])
        if not merged:
            return
        s.points = deque(merged, maxlen=self.maxlen)
        s.trim(merged[-1][0])
        self.backfills += 1

    def shift(self, by: float) -> None:
        """Every point's time moved ``by`` seconds: the wall clock stepped, and the
        points keep their age (a step back would otherwise drop every new point, older
        by the clock than the last one held, until the clock caught up)."""
        for s in self._series.values():
            s.points = deque(((t + by, v) for t, v in s.points), maxlen=s.points.maxlen)

    def total_points(self) -> int:
        return sum(len(s) for s in self._series.values())


def quantile_over_time(q: float, values: list[float]) -> float | None:
    """Prometheus ``quantile_over_time``: linear interpolation between sorted samples."""
    if not values:
        return None
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    xs = sorted(values)
    rank = q * (len(xs) - 1)
    lo = max(0, math.floor(rank))
    hi = min(len(xs) - 1, lo + 1)
    weight = rank - math.floor(rank)
    return xs[lo] * (1 - weight) + xs[hi] * weight
