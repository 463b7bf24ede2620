"""The memory guard's floor (issue 31, finding 7), through the real supervisor with real
slot processes (a stand-in ``vllm`` that only sleeps): a floor above what the running
slots leave free is refused with a message and stops nothing; a slot the guard stopped
starts again once the floor allows it, and not before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROFILES
from tests.support.waits import held_within


@pytest.fixture
async def sup(tmp_path: Path, monkeypatch):
    from pod_agent import supervisor as sv

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("POD_AGENT_HOME", str(home))
    monkeypatch.delenv("POD_AGENT_MEM_FLOOR_GIB", raising=False)
    vllm = tmp_path / "vllm"
    vllm.write_text("#!/bin/sh\nexec sleep 300\n")  # a slot that runs, never healthy
    vllm.chmod(0o755)
    s = sv.Supervisor(str(PROFILES / "10-rtx6000-2x.yaml"), vllm=str(vllm),
                      apply_patches=False)
    s.watch.state.armed = False  # the stop policy stays out of this test
    mem = {"avail": 20.6}
    monkeypatch.setattr("pod_agent.hostcheck.mem_available_gib", lambda: mem["avail"])
    monkeypatch.setattr("pod_agent.hostcheck.mem_total_gib", lambda: 23.5)
    held = {"FLASH": 6 << 20, "Q27": 2 << 20}  # KiB, as /proc says

    def rss(pgid: int) -> int:
        return next(held[n] for n, p in s.procs.items() if p.proc and p.proc.pid == pgid)

    monkeypatch.setattr("pod_agent.slots.group_rss_kib", rss)
    s.mem = mem  # type: ignore[attr-defined]
    for name in s.procs:
        s.keeper.start_supervising(name)
    assert await held_within(lambda: all(p.running() for p in s.procs.values()))
    try:
        yield s
    finally:
        s._stop.set()
        for name in list(s.procs):
            await s.keeper.pause(name)


async def ask(sup: Any, req: dict[str, Any]) -> dict[str, Any]:
    got: list[dict[str, Any]] = []

    async def send(ev: dict[str, Any]) -> None:
        got.append(ev)

    await sup.dispatch(req, send)
    return got[-1]


def audit(sup: Any) -> list[dict[str, Any]]:
    from pod_agent import paths

    return [json.loads(x) for x in Path(paths.audit_log()).read_text().splitlines()]


async def test_a_floor_above_what_the_slots_leave_free_is_refused(sup) -> None:
    # the field report: 23.5 GiB host, 20.6 GiB available, `watchdog mem-floor 23`
    ev = await ask(sup, {"op": "watchdog", "cmd": "mem-floor", "value": "23"})
    assert ev["kind"] == "error"
    assert "above the 20.6 GiB the running slots leave free" in ev["message"]
    assert "at most 20.6 GiB" in ev["message"]
    assert sup.watch.state.mem_floor_gib == 12.0  # unchanged
    await sup.watchdog_tick()
    await sup.watchdog_tick()
    assert all(p.running() for p in sup.procs.values())  # nothing stopped
    ok = await ask(sup, {"op": "watchdog", "cmd": "mem-floor", "value": "20.5"})
    assert ok["kind"] == "result" and ok["mem_floor_gib"] == 20.5


async def test_what_the_guard_stopped_starts_again_once_the_floor_allows(sup) -> None:
    assert (await ask(sup, {"op": "watchdog", "cmd": "mem-floor", "value": "10"}))["kind"] \
        == "result"
    flash = sup.procs["FLASH"]
    sup.mem["avail"] = 9.0  # something else on the host grew
    await sup.watchdog_tick()
    assert not flash.running() and sup.procs["Q27"].running()  # the biggest went
    assert "stopped FLASH" in sup.watch.state.last_mem_action
    sup.mem["avail"] = 15.0  # FLASH's 6 GiB came back to the host
    for _ in range(3):  # back now would put MemAvailable at 9 < 10: it would flap
        await sup.watchdog_tick()
        assert not flash.running() and "FLASH" not in sup.keeper.tasks
    ev = await ask(sup, {"op": "watchdog", "cmd": "mem-floor", "value": "8"})
    assert ev["kind"] == "result" and ev["guard_stopped"] == ["FLASH"]
    await sup.watchdog_tick()
    assert await held_within(flash.running), "the guard never started FLASH again"
    assert "restarted FLASH" in sup.watch.state.last_mem_action
    ops = [(a["op"], a.get("slot")) for a in audit(sup)
           if a["op"].startswith("memory-guard")]
    assert ops == [("memory-guard", "FLASH"), ("memory-guard-restart", "FLASH")]
    await sup.watchdog_tick()  # once
    assert [a["op"] for a in audit(sup)].count("memory-guard-restart") == 1


async def test_a_slot_restarted_by_hand_is_no_longer_the_guards(sup) -> None:
    await ask(sup, {"op": "watchdog", "cmd": "mem-floor", "value": "10"})
    sup.mem["avail"] = 9.0
    await sup.watchdog_tick()
    assert not sup.procs["FLASH"].running()
    sup.keeper.start_supervising("FLASH")  # what a `restart FLASH` does
    assert await held_within(sup.procs["FLASH"].running)
    sup.mem["avail"] = 30.0
    await sup.watchdog_tick()
    assert sup.watch.guard.stopped == {}
    assert "memory-guard-restart" not in [a["op"] for a in audit(sup)]
