"""A slot's start-up phases as the pod agent reads them from its engine's log
(``pod_agent/engines``: downloading, loading weights, compiling, capturing CUDA graphs,
KV-cache init, ready) with the seconds spent in each: the start under way and the last
one that reached ready (``status`` → ``slots`` → ``phases``, ``last_phases``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SHORT = {"starting": "START", "downloading": "DL", "loading weights": "LOAD",
         "compiling": "COMP", "capturing CUDA graphs": "GRAPH", "KV-cache init": "KV",
         "ready": "READY"}
"""A phase in the health cell's nine columns, with its time (``GRAPH 42s``, ``LOAD 3m``)."""


def _phases(raw: Any) -> list[tuple[str, float]]:
    """The agent's ``[[phase, seconds], …]``; anything else is none (never raises)."""
    out: list[tuple[str, float]] = []
    if not isinstance(raw, list):
        return out
    for item in raw:
        if (isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], int | float) and item[1] >= 0):
            out.append((item[0], float(item[1])))
    return out


def _secs(s: float) -> str:
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m"


def phases_text(raw: Any) -> str:
    """``loading weights 40s · compiling 12s · …``, or "" when there are none."""
    return " · ".join(f"{ph} {_secs(s)}" for ph, s in _phases(raw))


def starting(agent_slot: Mapping[str, Any] | None) -> bool:
    return agent_slot is not None and agent_slot.get("state") in ("starting", "backoff")


def phase_cell(agent_slot: Mapping[str, Any] | None) -> str | None:
    """The phase now and its seconds so far (``LOAD 42s``), while the slot starts."""
    if not starting(agent_slot):
        return None
    assert agent_slot is not None
    got = _phases(agent_slot.get("phases"))
    if not got:
        return None
    ph, s = got[-1]
    return f"{SHORT.get(ph, ph[:5].upper())} {_short_secs(s)}"


def _short_secs(s: float) -> str:
    """At most three columns (the health cell is nine): ``42s``, ``7m``, ``3h``, ``12d``."""
    for unit, size in (("s", 1.0), ("m", 60.0), ("h", 3600.0), ("d", 86400.0)):
        if s / size < 99.5:
            return f"{s / size:.0f}{unit}"
    return "99d"


def phase_cells(agent_slots: Mapping[str, Mapping[str, Any]] | None) -> dict[str, str]:
    """Slot → its phase cell, for the slots that are starting."""
    out: dict[str, str] = {}
    for slot, st in (agent_slots or {}).items():
        cell = phase_cell(st if isinstance(st, Mapping) else None)
        if cell is not None:
            out[slot] = cell
    return out


def detail_rows(agent_slot: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The detail screen's rows: this start's phases (while it starts) and the last
    start's, beside each other."""
    if not agent_slot:
        return []
    rows = []
    if starting(agent_slot):
        rows.append(("start-up now", phases_text(agent_slot.get("phases")) or "starting"))
    last = phases_text(agent_slot.get("last_phases"))
    if last:
        rows.append(("last start-up", last))
    return rows
