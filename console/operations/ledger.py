"""``STATE_DIR/pods.jsonl``: every pod an operation asked RunPod for, until it is settled.

Written *before* a create or a start goes out (fsynced), again when the pod id is
known, and once more when the pod is kept, stopped or terminated. Whatever
happens to the process in between — ``kill -9``, a power cut, an exception
nobody expected — the next ``pod-console up`` or ``down`` reads the entries that
were never settled and stops or terminates those pods (:func:`open_entries`).
A pod that costs money is therefore always named somewhere on disk.

Events: ``create-requested`` (name), ``created`` (name, pod), ``resume-requested``
(pod), then one of ``kept`` (pod; its GPU kind, count and $/h), ``terminated``,
``stopped`` (pod or name); ``skipped`` (line) notes a line that is not a record, once
reported.

Only one process at a time writes it or acts on what it says: :func:`exclusive` is
the lock (``STATE_DIR/up.lock``) that ``up``, ``down`` and the console's ``r`` and
``f`` all take before they create, start, stop or sweep. A run that holds it is the
only one that can have a bring-up in progress, so a sweep under the lock never takes
another run's pod for a leftover.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from msgspec import Struct

from console.operations.audit import AuditError, write_record

SETTLED = ("kept", "terminated", "stopped", "abandoned")
LOCK_NAME = "up.lock"


class Busy(Exception):
    """Another process holds the state directory's lock (``up``, ``down``, ``r`` or ``f``)."""


@contextlib.contextmanager
def exclusive(state_dir: Path, who: str) -> Iterator[None]:
    """Hold ``STATE_DIR/up.lock`` for the block, or raise :class:`Busy` at once.

    ``flock`` is per open file: a second holder in the same process is refused too,
    and the kernel drops the lock when its holder dies (``kill -9`` included)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(state_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            with contextlib.suppress(OSError, ValueError):
                holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
            raise Busy(f"another pod-console up/down (or a console's r/f) is running on "
                       f"{state_dir}" + (f" ({holder})" if holder else "")) from None
        with contextlib.suppress(OSError):  # who holds it, for the next one's message
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}: {who}\n".encode(), 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):  # still held: nobody reads it half-cleared
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def in_progress(state_dir: Path) -> str | None:
    """Who holds the lock now ("pid 123: pod-console up"), or None.

    Read from what the holder wrote, never by taking the lock: a probe that took it for
    an instant could make a cron ``up`` starting at that instant refuse to run. A holder
    killed with ``-9`` leaves its line behind; its pid, gone, says it holds nothing."""
    try:
        text = (state_dir / LOCK_NAME).read_text(errors="replace").strip()
    except OSError:
        return None
    if not text.startswith("pid "):
        return None
    try:
        pid = int(text[4:].split(":", 1)[0])
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except (ValueError, OSError):
        pass  # alive but not ours to signal (EPERM), or unreadable: say what it says
    return text


class Entry(Struct):
    """One request that may have left a pod billing."""

    kind: str
    """create | resume"""
    name: str | None
    pod_id: str | None
    since: float
    cost: float | None = None

    def describe(self) -> str:
        cost = f", ${self.cost:.2f}/h" if self.cost else ""
        if self.kind == "resume":
            return f"pod {self.pod_id} (started{cost})"
        if not self.pod_id:
            return f"a pod named {self.name} (a create whose answer never came)"
        return f"pod {self.pod_id} named {self.name} (created{cost})"


class BadLine(Struct, frozen=True):
    """A line of the ledger that is not a record: reported once, then skipped."""

    number: int
    why: str
    text: str


def _problem(rec: Any) -> str | None:
    """Why ``rec`` is not a ledger record (None: it is one)."""
    if not isinstance(rec, dict):
        return f"not an object but {type(rec).__name__}"
    t = rec.get("t")
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
        return "its time 't' is not a number"
    if not isinstance(rec.get("event"), str):
        return "it names no event"
    for key in ("name", "pod"):
        v = rec.get(key)
        if v is not None and not isinstance(v, str):
            return f"its {key!r} is not a string"
    return None


def _cost(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        return None
    return float(v)


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path

    def record(self, event: str, **fields: Any) -> None:
        """Append one event; raises :class:`AuditError` when it cannot be written whole."""
        rec = {"t": round(time.time(), 3), "event": event, **fields}
        write_record(self.path, json.dumps(rec, sort_keys=True, default=str))

    def scan(self) -> tuple[list[dict[str, Any]], list[BadLine]]:
        """The records, and the lines that are not records (a line cut by a crash, a
        hand edit) that no ``skipped`` event has reported yet."""
        try:
            text = self.path.read_text(errors="replace")
        except FileNotFoundError:
            return [], []
        out: list[dict[str, Any]] = []
        bad: list[BadLine] = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):
                why: str | None = "not JSON"
            else:
                why = _problem(rec)
            if why is None:
                out.append(rec)
            else:
                bad.append(BadLine(number, why, line[:120]))
        told = {ev.get("line") for ev in out if ev.get("event") == "skipped"}
        return out, [b for b in bad if b.number not in told]

    def events(self) -> list[dict[str, Any]]:
        return self.scan()[0]

    def bad_lines(self) -> list[BadLine]:
        return self.scan()[1]

    def open_entries(self) -> list[Entry]:
        """Requests that were never settled, oldest first (lines that are not records
        are skipped: :meth:`bad_lines` says which)."""
        by_key: dict[str, Entry] = {}
        for ev in self.events():
            kind = ev.get("event")
            name, pod, t = ev.get("name"), ev.get("pod"), float(ev["t"])
            if kind == "create-requested" and name:
                by_key[f"name:{name}"] = Entry("create", name, None, t)
            elif kind == "created" and name:
                e = by_key.pop(f"name:{name}", None) or Entry("create", name, None, t)
                e.pod_id = pod or None
                e.cost = _cost(ev.get("cost"))
                by_key[f"pod:{pod}" if pod else f"name:{name}"] = e
            elif kind == "resume-requested" and pod:
                by_key[f"pod:{pod}"] = Entry("resume", name, pod, t)
            elif kind in SETTLED:
                if pod:
                    by_key.pop(f"pod:{pod}", None)
                if name:
                    by_key.pop(f"name:{name}", None)
        return sorted(by_key.values(), key=lambda e: e.since)


__all__ = ["AuditError", "BadLine", "Busy", "Entry", "Ledger", "exclusive",
           "in_progress"]


class PaidPrice(Struct, frozen=True):
    """The $/h a pod of one GPU kind and count cost when it was last kept."""

    gpu: str
    count: int
    cost: float
    t: float


def last_prices(path: Path) -> dict[tuple[str, int], PaidPrice]:
    """(GPU kind, count) → the $/h of the last pod kept on it: what a fallback's question
    can say of a kind before the provider has made a pod (RunPod's REST API has no price
    list). Blocking: read it in a worker. An unreadable ledger knows no price."""
    try:
        events = Ledger(path).events()
    except OSError:
        return {}
    out: dict[tuple[str, int], PaidPrice] = {}
    for ev in events:
        gpu, count, cost = ev.get("gpu"), ev.get("count"), _cost(ev.get("cost"))
        if (ev.get("event") != "kept" or not isinstance(gpu, str) or not gpu
                or isinstance(count, bool) or not isinstance(count, int) or count < 1
                or not cost):
            continue
        out[(gpu, count)] = PaidPrice(gpu, count, cost, float(ev["t"]))
    return out
