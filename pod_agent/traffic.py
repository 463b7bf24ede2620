"""Is anyone using this pod? Each slot's own ``/metrics`` on loopback, read the way the
console reads it (its engine's names: ``pod_agent/engines/``), reduced to what the idle stop needs.

A slot shows activity when a request is running or waiting, or when it finished one
since the last read (``vllm:request_success_total`` went up). A counter that went down
is a restarted server, not traffic."""

from __future__ import annotations

import http.client
import math
import urllib.request
from dataclasses import dataclass

from .engines import ENGINES

RUNNING = tuple(n for e in ENGINES.values() for n in e.running)
"""Every engine's running and waiting gauges (a slot exports its own engine's)."""
FINISHED = frozenset(e.finished for e in ENGINES.values())


@dataclass(frozen=True)
class SlotTraffic:
    in_flight: float
    finished: float


def parse(text: str) -> SlotTraffic:
    """Sum over every series (models, finish reasons) of the two figures.

    Read here, line by line, with nothing but the standard library: the watchdog runs
    on any install of the agent (``pip install .``, a pod image without
    ``prometheus_client``), and a parser it could not import stopped every tick (issue
    42). Not the console's parser (``console/sources/collect/exposition.py``): the pod
    agent imports nothing of the console (pyproject's import-linter contract), and this
    needs only a handful of names' values, not labels. A line it cannot read is skipped:
    one odd series must not make a busy pod look idle."""
    in_flight = finished = 0.0
    for line in text.splitlines():
        got = _sample(line)
        if got is None:
            continue
        name, value = got
        if name in FINISHED:
            finished += value
        elif name in RUNNING:
            in_flight += value
    return SlotTraffic(in_flight, finished)


def _sample(line: str) -> tuple[str, float] | None:
    """(name, value) of a sample line of the names wanted; None for anything else (a
    comment, another family, a line that does not read). The value is the first field
    after the name or its label set (a timestamp may follow it); the label set ends at
    the first ``}`` outside quotes (a label value may hold one)."""
    line = line.strip()
    if not line or line[0] == "#":
        return None
    end = next((i for i, c in enumerate(line) if c in "{ \t"), len(line))
    name = line[:end]
    if name not in RUNNING and name not in FINISHED:
        return None
    rest = line[end:]
    if rest.startswith("{"):
        close = _label_set_end(rest)
        if close is None:
            return None
        rest = rest[close + 1:]
    fields = rest.split()
    try:
        value = float(fields[0]) if fields else math.nan
    except ValueError:
        return None
    return (name, value) if math.isfinite(value) else None


def _label_set_end(text: str) -> int | None:
    quoted = escaped = False
    for i, c in enumerate(text):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = quoted
        elif c == '"':
            quoted = not quoted
        elif c == "}" and not quoted:
            return i
    return None


def read(port: int, timeout_s: float) -> SlotTraffic | None:
    """None when the slot does not answer (down, loading) or answers nonsense."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                    timeout=timeout_s) as resp:
            body = resp.read(16 << 20).decode("utf-8", "replace")
        return parse(body)
    except (OSError, ValueError, http.client.HTTPException):
        # HTTPException: a slot dying mid-answer (IncompleteRead, BadStatusLine) is a slot
        # that does not answer, not a failed tick
        return None


def active(before: SlotTraffic | None, now: SlotTraffic | None) -> bool:
    if now is None:
        return False
    if now.in_flight > 0:
        return True
    return before is not None and now.finished > before.finished


def read_all(ports: dict[str, int], timeout_s: float) -> dict[str, SlotTraffic | None]:
    """Every slot's traffic (blocking: the watchdog runs it in a thread)."""
    return {name: read(port, timeout_s) for name, port in ports.items()}
