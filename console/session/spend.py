"""Today's (and this month's) spend over every run of the pod this console saw, not only
the current one.

RunPod says when the pod last started and what it costs an hour, but keeps no bill a
client can read: after a stop and a resume, "since it started" forgets the morning's
run. This book remembers each run the console observed (pod id, start, $/h, the last
time it was seen RUNNING) in ``STATE_DIR/spend.json``, 40 days' worth, and adds up the
part of each earlier run that falls in today (or this month). A run's end is the last
poll that saw it running, so an earlier run is counted short by at most one pod poll,
never long.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from msgspec import Struct, to_builtins
from msgspec.structs import replace

from console.model.snapshot import PodSnapshot
from console.sources.provider.base import sane_cost

KEEP_S = 40 * 86400
"""A month and then some: runs are a few a day, so the book stays a few KB."""
SAVE_EVERY_S = 60.0


class Run(Struct, frozen=True):
    pod_id: str
    started_at: float
    cost_per_hr: float
    last_running: float

    @property
    def key(self) -> tuple[str, float]:
        return self.pod_id, self.started_at

    def cost_between(self, t0: float, t1: float) -> float:
        hours = max(0.0, min(t1, self.last_running) - max(t0, self.started_at)) / 3600
        return hours * self.cost_per_hr


def midnight(now: float, tz: dt.tzinfo | None = None) -> float:
    local = dt.datetime.fromtimestamp(now, tz)
    return local.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


def month_start(now: float, tz: dt.tzinfo | None = None) -> float:
    local = dt.datetime.fromtimestamp(now, tz)
    return local.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp()


class SpendBook:
    """The runs in ``path`` (None: in memory only). ``read_only``: read, never written (a
    wall: it only shows what consoles recorded; its viewers must not change the state
    directory): ``due`` is never true and ``save`` refuses."""

    def __init__(self, path: Path | None, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self.runs: dict[tuple[str, float], Run] = {}
        self._saved_at = -1e18
        self._retry_at = -1e18
        self._dirty = False
        if path is not None:
            self.runs = {r.key: r for r in _load(path)}

    def observe(self, pod: PodSnapshot | None, now: float) -> None:
        """Note a poll of the pod; a RUNNING pod extends (or opens) its current run."""
        cost = sane_cost(pod.cost_per_hr) if pod is not None else None
        if (pod is None or pod.status != "RUNNING" or pod.pod_id is None
                or pod.started_at is None or cost is None
                or not math.isfinite(pod.started_at) or not math.isfinite(now)):
            return
        key = (pod.pod_id, pod.started_at)
        old = self.runs.get(key)
        self.runs[key] = (Run(pod.pod_id, pod.started_at, cost, now) if old is None
                          else replace(old, last_running=now, cost_per_hr=cost))
        self._dirty = self._dirty or old is None
        for k in [k for k, r in self.runs.items() if r.last_running < now - KEEP_S]:
            del self.runs[k]

    def earlier_today(self, pod: PodSnapshot | None, now: float,
                      tz: dt.tzinfo | None = None) -> float:
        """$ of today's runs other than the pod's current one (that one the pod counts)."""
        return self.earlier_since(midnight(now, tz), pod, now)

    def earlier_since(self, t0: float, pod: PodSnapshot | None, now: float) -> float:
        """$ since ``t0`` of the runs other than the pod's current one."""
        current = None if pod is None else (pod.pod_id, pod.started_at)
        return sum(r.cost_between(t0, now) for k, r in self.runs.items()
                   if k != current or pod is None or pod.status != "RUNNING")

    def this_month(self, pod: PodSnapshot | None, now: float,
                   tz: dt.tzinfo | None = None) -> float:
        """$ since the first of the month, the current run's part included."""
        t0 = month_start(now, tz)
        out = self.earlier_since(t0, pod, now)
        if (pod is not None and pod.status == "RUNNING" and pod.started_at is not None
                and pod.cost_per_hr is not None):
            out += max(0.0, now - max(t0, pod.started_at)) / 3600 * pod.cost_per_hr
        return out

    def due(self, now: float) -> bool:
        """Whether ``save`` should run now: a new run at once, else once a minute."""
        if self.path is None or self.read_only or now < self._retry_at:
            return False
        return self._dirty or now - self._saved_at >= SAVE_EVERY_S

    def postpone(self, now: float) -> None:
        """A save failed: the next attempt waits ``SAVE_EVERY_S`` (no retry every poll)."""
        self._retry_at = now + SAVE_EVERY_S

    def save(self, now: float) -> None:
        """Write the book whole (temp file, fsync, rename): a crash leaves the old one."""
        if self.path is None:
            return
        if self.read_only:
            raise PermissionError(f"{self.path}: a read-only spend book is never written")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            # allow_nan=False: a file every later reader can parse, or no file at all
            json.dump([to_builtins(r) for r in self.runs.values()], fh, allow_nan=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        self._saved_at, self._dirty = now, False


def _run_of(r: Any) -> Run | None:
    """One saved run, or None when it is not one: a NaN or absurd $/h (a provider's
    broken answer saved before it was refused), times that are not times."""
    try:
        run = Run(str(r["pod_id"]), float(r["started_at"]), float(r["cost_per_hr"]),
                  float(r["last_running"]))
    except (ValueError, TypeError, KeyError, OverflowError):
        return None
    if (not run.pod_id or sane_cost(run.cost_per_hr) is None
            or not all(math.isfinite(t) and t > 0 for t in (run.started_at,
                                                             run.last_running))
            or run.last_running < run.started_at):
        return None
    return run


def _load(path: Path) -> list[Run]:
    """The saved runs; an unreadable book is started afresh (it only ever adds to a
    figure the pod itself gives), never a reason not to start. A run that does not
    hold up is dropped alone: one NaN must not break every figure for 40 days."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return []
    if not isinstance(raw, list):
        return []
    return [run for r in raw if (run := _run_of(r)) is not None]


class SessionSpend:
    """A session's spend book: read once (off the loop) at its first pod reading, each
    reading after noted in it, saved when due. Until it is read, an empty book in memory
    answers (the earlier runs are then not yet counted, never counted wrong)."""

    def __init__(self, run_blocking: Callable[..., Awaitable[Any]],
                 note: Callable[[str, str], None]) -> None:
        self._run_blocking = run_blocking
        self._note = note
        self._book: SpendBook | None = None
        self._none = SpendBook(None)

    @property
    def book(self) -> SpendBook:
        return self._book or self._none

    async def observe(self, path: Path | None, read_only: bool, pod: PodSnapshot,
                      now: float) -> None:
        """A new pod reading into the book (``read_only``: a wall's, never written)."""
        if self._book is None:
            # a wall reads the book the consoles keep and writes nothing in the state dir
            self._book = await self._run_blocking(SpendBook, path, read_only)
        book = self._book
        book.observe(pod, now)
        if book.due(now):
            try:
                await self._run_blocking(book.save, now)
            except OSError as exc:  # a full disk costs the morning's figure, not the poll
                book.postpone(now)  # tried again in a minute, said once a minute
                self._note(f"today's spend could not be saved: {exc}", "warn")
