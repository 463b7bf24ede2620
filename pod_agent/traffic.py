"""Is anyone using this pod? Each slot's own ``/metrics`` on loopback, read the way the
console reads it (its engine's names: ``pod_agent/engines/``), reduced to what the idle stop needs.

A slot shows activity when a request is running or waiting, or when it finished one
since the last read (``vllm:request_success_total`` went up). A counter that went down
is a restarted server, not traffic."""

from __future__ import annotations

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
    """Sum over every series (models, finish reasons) of the two figures."""
    from prometheus_client.parser import text_string_to_metric_families

    in_flight = finished = 0.0
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name in RUNNING:
                in_flight += s.value
            elif s.name in FINISHED:
                finished += s.value
    return SlotTraffic(in_flight, finished)


def read(port: int, timeout_s: float) -> SlotTraffic | None:
    """None when the slot does not answer (down, loading) or answers nonsense."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                    timeout=timeout_s) as resp:
            body = resp.read(16 << 20).decode("utf-8", "replace")
        return parse(body)
    except (OSError, ValueError):
        return None


def active(before: SlotTraffic | None, now: SlotTraffic | None) -> bool:
    if now is None:
        return False
    if now.in_flight > 0:
        return True
    return before is not None and now.finished > before.finished
