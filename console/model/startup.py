"""A slot's start-up phases as the pod agent reads them from its engine's log
(``pod_agent/engines``: downloading, loading weights, compiling, capturing CUDA graphs,
KV-cache init, ready) with the seconds spent in each: the start under way and the last
one that reached ready (``status`` → ``slots`` → ``phases``, ``last_phases``).

The agent is read every few seconds, the screen every refresh: the phase now counts on
from the reading (``phase_cell``'s ``since_read``), and every phase the agent lists is
said in the action log as it ends (``phase_lines``), however short — a 4 s KV-cache
phase between two readings never appeared in the cell, and is in the log."""

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
    return isinstance(agent_slot, Mapping) and agent_slot.get("state") in ("starting",
                                                                          "backoff")


def shown_health(health: str, agent_state: str | None) -> str:
    """The one word a slot's row, its wall card and its alert agree on: ``starting``
    while the agent brings an engine up that does not answer yet (an INFO, not an
    outage); otherwise what /health said. An engine that died and waits for its restart
    (the agent's ``backoff``) is down: its CRIT says so, and so does its row."""
    if health != "up" and (health == "starting" or agent_state == "starting"):
        return "starting"
    return health


def phase_cell(agent_slot: Mapping[str, Any] | None, since_read: float = 0.0) -> str | None:
    """The phase now and its seconds so far (``LOAD 42s``), while the slot starts;
    ``since_read``: how long ago the agent said it (its seconds count on from then).
    None in ``backoff``: the phases are those of the start that died, not one under way."""
    if not isinstance(agent_slot, Mapping) or agent_slot.get("state") != "starting":
        return None
    assert agent_slot is not None
    got = _phases(agent_slot.get("phases"))
    if not got:
        return None
    ph, s = got[-1]
    return f"{SHORT.get(ph, ph[:5].upper())} {_short_secs(s + max(0.0, since_read))}"


def _short_secs(s: float) -> str:
    """At most three columns (the health cell is nine): ``42s``, ``7m``, ``3h``, ``12d``."""
    for unit, size in (("s", 1.0), ("m", 60.0), ("h", 3600.0), ("d", 86400.0)):
        if s / size < 99.5:
            return f"{s / size:.0f}{unit}"
    return "99d"


def phase_cells(agent_slots: Mapping[str, Mapping[str, Any]] | None,
                since_read: float = 0.0) -> dict[str, str]:
    """Slot → its phase cell, for the slots that are starting."""
    out: dict[str, str] = {}
    for slot, st in (agent_slots or {}).items():
        cell = phase_cell(st if isinstance(st, Mapping) else None, since_read)
        if cell is not None:
            out[slot] = cell
    return out


def detail_rows(agent_slot: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The detail screen's rows: this start's phases (while it starts) and the last
    start's, beside each other."""
    if not agent_slot:
        return []
    rows = []
    if agent_slot.get("state") == "starting":
        rows.append(("start-up now", phases_text(agent_slot.get("phases")) or "starting"))
    elif agent_slot.get("state") == "backoff" and phases_text(agent_slot.get("phases")):
        # the engine died and waits for its restart: how far the attempt got, not a
        # start-up under way
        rows.append(("attempt that died", phases_text(agent_slot.get("phases"))))
    last = phases_text(agent_slot.get("last_phases"))
    if last:
        rows.append(("last start-up", last))
    return rows


def _ended(agent_slot: Mapping[str, Any] | None) -> tuple[object, list[tuple[str, float]]]:
    """(which start, its phases that have ended): while it starts, all but the one under
    way; once it is over, all of the last start's."""
    if not isinstance(agent_slot, Mapping):
        return None, []
    run = agent_slot.get("started_at")
    if starting(agent_slot):
        return run, _phases(agent_slot.get("phases"))[:-1]
    return run, _phases(agent_slot.get("last_phases"))


def phase_lines(slot: str, before: Mapping[str, Any] | None,
                after: Mapping[str, Any] | None) -> list[str]:
    """The action log's lines for what a new reading of a slot's start-up adds to the one
    before: each phase that has ended since (``Q27 start-up: KV-cache init 4s``), and the
    whole start once it is over."""
    if before is None:
        return []  # the first reading: nothing has ended since a reading before it
    run0, done0 = _ended(before)
    run1, done1 = _ended(after)
    if run1 != run0:
        done0 = []  # another start: everything of it is new
    out = [f"{slot} start-up: {ph} {_secs(s)}" for ph, s in done1[len(done0):]
           if ph != "ready"]
    if after is not None and starting(before) and not starting(after) and done1:
        total = sum(s for ph, s in done1 if ph != "ready")
        out.append(f"{slot} start-up done in {_secs(total)}: {phases_text(done1)}")
    return out
