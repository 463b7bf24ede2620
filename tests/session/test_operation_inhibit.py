"""An operation's own effects are not alerts (issue 42, item 3): after "✓ Q27 restarted
(up after 5 s)" a CRIT "Q27 up but completions fail" fired with two gateway WARNs for
~12 s. The session on an injected clock, its sources in process, the real alert rules and
the real registry: a restart (``R``), a rebalance (``b``) and a resume hold their slots'
WARNs and CRITs from their start until the slots are up again (or a deadline passes);
one INFO says so; what comes after, or what a failed operation leaves, is news."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from console.model.inhibit import SETTLE_S
from console.operations.ops import rebalance, restart, resume
from console.operations.registry import Outcome
from tests.session.world import World, world
from tests.support.waits import LIMIT_S

T0 = 1_800_000_000.0  # a Friday, 17:00 in Seoul: working hours


class Gate:
    """An operation's handler that runs until the test lets it end, as it says."""

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.ok = True

    async def __call__(self, args: dict[str, Any], progress: Any) -> Outcome:
        await self.go.wait()
        return Outcome(self.ok, "done" if self.ok else "failed: it did not come up",
                       state="ok" if self.ok else "failed")


def with_ops(w: World) -> dict[str, Gate]:
    gates = {}
    for module in (restart, rebalance, resume):
        gates[module.SPEC.id] = gate = Gate()
        w.ctx.registry.register(module.SPEC, gate)
    return gates


async def poll(w: World, after: float) -> None:
    w.clock.advance(after)
    assert await w.session.poll()


def firing(w: World) -> dict[str, str]:
    return {a.key: a.severity for a in w.session.alerts.firing()}


def loud(w: World) -> dict[str, str]:
    return {k: v for k, v in firing(w).items() if v != "info"}


def held_info(w: World) -> list[str]:
    return [a.title for a in w.session.alerts.firing() if a.key.startswith("operation:")]


async def start(w: World, op: str, args: dict[str, Any]) -> asyncio.Task[Outcome]:
    task = asyncio.ensure_future(w.ctx.registry.invoke(op, args))
    # its audit record is written in a thread first: a condition, waited on in real time
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LIMIT_S
    while w.ctx.registry.in_flight != op:
        assert loop.time() < deadline, f"{op} never started"
        await asyncio.sleep(0.01)
    return task


async def test_a_restart_holds_its_slots_alerts_until_it_is_up(tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    gates = with_ops(w)
    await poll(w, 0.0)
    assert loud(w) == {}
    task = await start(w, "restart", {"slot": "Q27"})
    w.slots.down = {"Q27"}  # the restart takes it down
    for _ in range(3):
        await poll(w, 2.0)
        assert loud(w) == {}, firing(w)  # not "Q27 down"
    assert any("Restart slot running" in t and "Q27" in t for t in held_info(w)), firing(w)
    gates["restart"].go.set()
    assert (await task).ok
    await poll(w, 2.0)  # done; Q27 still starting: held until up
    assert loud(w) == {}, firing(w)
    w.slots.down = set()
    await poll(w, 2.0)  # up: released
    assert loud(w) == {} and held_info(w) == [], firing(w)
    # after its release, a new outage of the same slot is news
    await poll(w, SETTLE_S)
    w.slots.down = {"Q27"}
    await poll(w, 2.0)
    assert loud(w).get("down:Q27") == "crit", firing(w)
    assert held_info(w) == []


async def test_a_held_consequence_fires_once_the_deadline_passes(tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    gates = with_ops(w)
    await poll(w, 0.0)
    task = await start(w, "rebalance", {"set": {"FLASH": 0.5, "Q27": 0.4}})
    w.slots.down = {"FLASH", "Q27"}
    await poll(w, 2.0)
    assert loud(w) == {}, firing(w)
    gates["rebalance"].go.set()
    await task
    w.slots.down = {"FLASH"}  # Q27 is back; FLASH never comes up
    await poll(w, 2.0)
    assert loud(w) == {}, firing(w)
    await poll(w, SETTLE_S)  # the deadline: an outage, said
    assert loud(w).get("down:FLASH") == "crit", firing(w)
    assert "down:Q27" not in firing(w)


async def test_a_failed_operation_holds_nothing_after_its_end(tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    gates = with_ops(w)
    await poll(w, 0.0)
    task = await start(w, "restart", {"slot": "FLASH"})
    w.slots.down = {"FLASH"}
    await poll(w, 2.0)
    assert loud(w) == {}
    gates["restart"].ok = False
    gates["restart"].go.set()
    assert not (await task).ok
    await poll(w, 2.0)
    assert loud(w).get("down:FLASH") == "crit", firing(w)  # what it left is real
    assert held_info(w) == []


async def test_a_restart_holds_only_its_own_slot(tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    gates = with_ops(w)
    await poll(w, 0.0)
    task = await start(w, "restart", {"slot": "Q27"})
    w.slots.down = {"Q27", "FLASH"}  # FLASH goes down too: not the restart's doing
    await poll(w, 2.0)
    assert loud(w) == {"down:FLASH": "crit"}, firing(w)
    gates["restart"].go.set()
    await task


async def test_a_resume_holds_the_pod_its_agent_and_every_slot(tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    gates = with_ops(w)
    w.pod.pod = replace(w.pod.pod, status="EXITED", cost_per_hr=0.0)
    w.slots.down = {"FLASH", "Q27"}
    await poll(w, 0.0)
    task = await start(w, "resume", {})
    w.pod.pod = replace(w.pod.pod, status="RUNNING", cost_per_hr=4.0,
                        agent_error="connection refused", started_at=w.clock())
    w.session.cycle.pod_reads.wanted = True
    await poll(w, 2.0)
    assert loud(w) == {}, firing(w)  # no "agent unreachable", no slot down
    assert any("Resume pod running" in t for t in held_info(w)), firing(w)
    w.pod.pod = replace(w.pod.pod, agent_error=None)
    gates["resume"].go.set()
    assert (await task).ok
    w.slots.down = set()
    w.session.cycle.pod_reads.wanted = True
    await poll(w, 2.0)
    assert loud(w) == {}, firing(w)
