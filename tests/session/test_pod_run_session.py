"""The pod's run as the session follows it (issue 42, items 1-3): a resume is a new run
whose header tells the last reading, not the old stop; what belonged to the old run (an
acknowledgement, a GPU fault) ends with it; a planned stop is one INFO event with its
cause and who, and no WARN or CRIT.

The session on an injected clock (``tests/session/world.py``), the real alert rules,
the real audit log file (the console's operations are read back from it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from console.model.gpu_state import Gpu, GpuReport
from console.model.snapshot import StopPlan
from console.session.view import ConsoleState
from console.ui.widgets.header import PodHeader
from tests.session.world import World, world

T0 = 1_800_000_000.0  # a Friday, 17:00 in Seoul: working hours
SLOTS = ("FLASH", "Q27")


def agent(w: World, **wd: Any) -> None:
    """The agent answers: its plan as read now (busy unless told)."""
    doc = {"armed": True, "next_stop_reason": "idle", "stop_in_s": 1500.0,
           "now": w.clock(), "clock_speed": 1.0, "busy": True, "idle_s": 0.0,
           "idle_stop_after_s": 1800.0, **wd}
    w.pod.pod = replace(w.pod.pod, agent_error=None, watchdog_armed=True,
                        stop_plan=StopPlan.parse(doc, w.clock()),
                        agent_slots={s: {"state": "ready"} for s in SLOTS})


def container_gone(w: World, status: str = "RUNNING") -> None:
    w.pod.pod = replace(w.pod.pod, status=status, agent_error="connection refused",
                        stop_plan=None, gpus=None, agent_slots={})
    w.slots.down = set(SLOTS)


async def poll(w: World, after: float) -> ConsoleState:
    w.clock.advance(after)
    w.session.refresh_now()
    assert await w.session.poll()
    return w.session.state()


def header(st: ConsoleState) -> str:
    h = PodHeader(st.view.title, st.view.demo, st.view.read_only)
    return " │ ".join(t.plain for _, t in h.segments(st.pod, st.now, st.stale,
                                                      st.operation, None, st.stop))


def loud(w: World) -> list[str]:
    return [f"{a.severity} {a.title}" for a in w.session.alerts.firing()
            if a.severity in ("warn", "crit")]


def audit(w: World, action: str, args: dict[str, Any], result: str) -> None:
    """A record as the registry writes it, stamped with the test's clock."""
    rec = {"t": w.clock(), "user": "alice", "host": "laptop", "action": action,
           "arguments": args, "result": result}
    path = w.ctx.registry.audit.path
    with path.open("a") as fh:
        fh.write(json.dumps(rec) + "\n")


def hot_ecc(t: float) -> GpuReport:
    return GpuReport(gpus=(Gpu(0, "NVIDIA RTX PRO 6000", "GPU-0", util_pct=90.0,
                               ecc_dbe_volatile=2),), source="nvml", sampled_at=t)


async def _idle_stop(w: World) -> float:
    """Busy, idle, warned, the watchdog's idle stop (recorded, then the pod exits).
    Returns when the stop was made."""
    agent(w, busy=False, idle_s=1500.0, stop_in_s=300.0, warning=True)
    st = await poll(w, 10.0)
    assert st.run is not None and st.run.state == "warned"
    stop_at = w.clock() + 299
    w.clock.advance(299)
    agent(w, busy=False, idle_s=1800.0, stop_in_s=0.0, last_stop_reason="idle",
          last_stop={"reason": "idle", "at": stop_at, "by": "watchdog", "ok": None})
    await poll(w, 1.0)
    container_gone(w)
    await poll(w, 6.0)
    w.pod.pod = replace(w.pod.pod, status="EXITED", cost_per_hr=0.0)
    st = await poll(w, 6.0)
    assert st.run is not None and (st.run.state, st.run.cause) == ("stopped", "idle")
    return stop_at


async def test_after_an_idle_stop_and_a_resume_the_header_is_the_new_runs(
        tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    w.pod.pod = replace(w.pod.pod, started_at=T0 - 3600, gpus=hot_ecc(T0))
    agent(w)
    st = await poll(w, 0.0)
    ecc = [a for a in w.session.alerts.firing() if a.key.startswith("ecc:0")]
    assert ecc and ecc[0].severity == "crit"
    assert st.run is not None and (st.run.number, st.run.state) == (1, "serving")
    # the operator acknowledges what fires (the ECC fault among it)
    assert w.session.acknowledge("root")
    stop_at = await _idle_stop(w)
    st = w.session.state()
    assert "stopped at" in header(st) and "(idle)" in header(st), header(st)
    # `r` twenty seconds later: the same machine, started again. The agent (it outlived
    # its container, as the demo's does) still reports the idle stop it made
    w.clock.advance(20.0)
    w.slots.down = set()
    w.pod.run(started_at=w.clock())
    w.pod.pod = replace(w.pod.pod, gpus=GpuReport(gpus=(Gpu(0, "NVIDIA RTX PRO 6000",
                                                            "GPU-0", util_pct=80.0),),
                                                  source="nvml", sampled_at=w.clock()))
    agent(w, busy=True, last_stop_reason="idle",
          last_stop={"reason": "idle", "at": stop_at, "by": "watchdog", "ok": True})
    st = await poll(w, 2.0)
    # from the first busy reading on: serving, a countdown, no "stopping"/"stopped"
    assert st.run is not None and (st.run.number, st.run.state) == (2, "serving")
    assert st.stop is None
    text = header(st)
    assert "stopping" not in text and "stopped" not in text and "stop in" in text, text
    assert not [a for a in st.alerts if a.key == "stopped"], st.alerts
    # the old run's ECC fault ended with it; its acknowledgement went too
    assert not [a for a in st.alerts if a.key.startswith("ecc:")], st.alerts
    assert st.gpu_marks == {}
    assert any(e.kind == "ended" and "ECC" in e.title for e in st.alert_history)
    assert not [a for a in st.alerts if a.acked_by is not None], st.alerts
    st = await poll(w, 10.0)
    assert st.run is not None and st.run.state == "serving" and st.stop is None


async def test_an_ack_of_the_old_run_is_not_adopted_by_the_new_one(tmp_path: Path) -> None:
    """An acknowledgement made before the run began (in the shared book, by another
    session) does not mark the new run's alert."""
    w = world(tmp_path, T0)
    w.pod.pod = replace(w.pod.pod, started_at=T0 - 3600)
    agent(w)
    await poll(w, 0.0)
    await _idle_stop(w)
    w.clock.advance(20.0)
    w.slots.down = set()
    w.pod.run(started_at=w.clock())
    agent(w)
    await poll(w, 2.0)
    w.slots.down = {"Q27"}  # the new run's own trouble
    await poll(w, 2.0)
    down = w.session.alerts.active.get("down:Q27")
    assert down is not None and down.state == "firing"
    # another session acknowledged a down:Q27 of the old run, fourteen minutes ago
    assert w.session.alerts.adopt_ack("down:Q27", "root", w.clock() - 14 * 60) is None
    assert w.session.alerts.active["down:Q27"].acked_by is None
    assert w.session.alerts.adopt_ack("down:Q27", "root", w.clock()) is not None


async def test_a_planned_stop_is_one_info_event_with_cause_and_who(tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    w.pod.pod = replace(w.pod.pod, started_at=T0 - 3600, gpus=GpuReport(
        gpus=(Gpu(0, "NVIDIA RTX PRO 6000", "GPU-0", util_pct=90.0, temp_c=60.0),),
        source="nvml", sampled_at=T0))
    agent(w)
    await poll(w, 0.0)
    assert loud(w) == []
    stop_at = await _idle_stop(w)
    for _ in range(5):  # the stopped pod, a minute on: nothing loud
        await poll(w, 12.0)
    assert loud(w) == [], loud(w)
    # from the stop on (the warning before it is the watchdog's, and stands): one INFO
    fired = [e for e in w.session.alerts.history if e.kind == "firing" and e.t >= stop_at]
    assert [e.severity for e in fired] == ["info"], fired
    assert [a.key for a in w.session.alerts.firing()] == ["stopped"]
    title = w.session.alerts.active["stopped"].title
    assert title.startswith("pod stopped (idle) by watchdog at "), title
    assert "provider" not in title


async def test_stop_now_then_resume_says_who_and_is_not_stopping(tmp_path: Path) -> None:
    """`w s y` is the console's own stop (the audit log says who), not "stopped through
    the provider"; after `r` the running pod is not "stopping (stop-now)"."""
    w = world(tmp_path, T0)
    w.pod.pod = replace(w.pod.pod, started_at=T0 - 3600)
    agent(w)
    await poll(w, 0.0)
    audit(w, "watchdog", {"cmd": "stop-now"}, "started")
    w.clock.advance(1.0)
    # the agent had no time to show the action: the container is gone at the next read
    container_gone(w)
    st = await poll(w, 5.0)
    assert st.run is not None and (st.run.state, st.run.cause, st.run.by) == (
        "stopping", "stop-now", "alice@laptop")
    w.pod.pod = replace(w.pod.pod, status="EXITED", cost_per_hr=0.0)
    audit(w, "watchdog", {"cmd": "stop-now"}, "ok")
    st = await poll(w, 6.0)
    assert st.stop is not None and st.stop.done
    assert "stop-now" in header(st) and "provider" not in header(st), header(st)
    assert loud(w) == []
    info = [a.title for a in w.session.alerts.firing() if a.key == "stopped"]
    assert info and "(stop-now) by alice@laptop" in info[0], info
    # `r`: a new run; the audit log's stop-now is the old run's
    audit(w, "resume", {}, "ok")
    w.clock.advance(10.0)
    w.slots.down = set()
    w.pod.run(started_at=w.clock())
    agent(w, agent_actions=None)
    w.pod.pod = replace(w.pod.pod, agent_actions=(
        {"id": "stop-x", "kind": "stop-now", "state": "ok", "started_at": T0 + 1.0},))
    st = await poll(w, 2.0)
    assert st.run is not None and (st.run.number, st.run.state) == (2, "serving")
    assert st.stop is None and "stopping" not in header(st), header(st)


async def test_a_planned_stop_silences_the_gateways_routes_to_the_pod(
        tmp_path: Path) -> None:
    """LiteLLM routes to the pod's slots alone: while the pod is stopped on purpose its
    5xx and failing deployments are the stop, not an outage. Its own health is not."""
    from console.model.gateway import DeploymentRow, GatewaySnapshot

    w = world(tmp_path, T0)
    w.pod.pod = replace(w.pod.pod, started_at=T0 - 3600)
    agent(w)
    ports = {t.slot: t.port for t in w.ctx.poller.targets}

    def failing(ready: bool = True) -> GatewaySnapshot:
        deps = tuple(DeploymentRow(s, "chat", f"http://127.0.0.1:{p}/v1",
                                   {"requests": 10.0, "failures": 10.0}, "failing")
                     for s, p in ports.items())
        return GatewaySnapshot("http://gw", w.clock(), True, ready, deployments=deps,
                               total={"error_5xx_ratio": 1.0},
                               groups={"chat": {"error_5xx_ratio": 1.0}})

    await poll(w, 0.0)
    # the same gateway on a running pod: loud (this test can fail)
    w.session.cycle.gateway = failing()
    await poll(w, 2.0)
    assert [k for k in loud(w) if "gateway" in k], loud(w)
    w.session.cycle.gateway = None
    await poll(w, 2.0)
    assert loud(w) == [], loud(w)
    await _idle_stop(w)
    w.session.cycle.gateway = failing()
    for _ in range(3):
        await poll(w, 12.0)
    assert loud(w) == [], loud(w)
    # the gateway itself not ready is its own trouble, stop or not
    w.session.cycle.gateway = failing(ready=False)
    await poll(w, 12.0)
    assert [k for k in loud(w) if "gateway not ready" in k], loud(w)
    w.session.cycle.gateway = failing()
    await poll(w, 12.0)
    # `r`: its window still counts the calls that failed during the stop (the demo's
    # "gateway 5xx 41%" a few seconds after the resume): the stop's, not the new run's
    w.clock.advance(20.0)
    w.slots.down = set()
    w.pod.run(started_at=w.clock())
    agent(w)
    for _ in range(3):
        await poll(w, 30.0)
        assert loud(w) == [], loud(w)
    # once the window has passed, failures are the new run's own
    await poll(w, w.settings.window_s)
    assert [k for k in loud(w) if "gateway" in k], loud(w)


async def test_the_old_runs_stop_event_and_gpu_alerts_end_with_it(tmp_path: Path) -> None:
    """With a hold (alerts clear a while after their condition goes), the old run's hot
    GPU does not linger on the new run: it ends at its first reading (its stop's INFO
    has no hold: it clears then too)."""
    from console.config.settings import AlertTiming

    w = world(tmp_path, T0, alerts=AlertTiming(down_for_s=0, for_s=0, hold_s=600))
    hot = GpuReport(gpus=(Gpu(0, "NVIDIA RTX PRO 6000", "GPU-0", temp_c=91.0,
                              throttled=("sw_thermal_slowdown",)),),
                    source="nvml", sampled_at=T0)
    w.pod.pod = replace(w.pod.pod, started_at=T0 - 3600, gpus=hot)
    agent(w)
    await poll(w, 0.0)
    assert "throttle:0" in w.session.alerts.active
    await _idle_stop(w)
    assert "stopped" in w.session.alerts.active
    w.clock.advance(20.0)
    w.slots.down = set()
    w.pod.run(started_at=w.clock())
    w.pod.pod = replace(w.pod.pod, gpus=GpuReport(
        gpus=(Gpu(0, "NVIDIA RTX PRO 6000", "GPU-0", temp_c=45.0),), source="nvml",
        sampled_at=w.clock()))
    agent(w)
    st = await poll(w, 2.0)
    assert st.run is not None and st.run.number == 2
    assert not [k for k in w.session.alerts.active if k in ("stopped", "throttle:0")], \
        w.session.alerts.active
    ended = [e.detail for e in st.alert_history if e.kind == "ended"
             and e.title.startswith("GPU 0 throttled")]
    assert ended == ["ended with run 1 of pod p1"], st.alert_history


async def test_the_next_stop_is_told_as_its_own_not_the_previous_ones(
        tmp_path: Path) -> None:
    """Run 2's scheduled stop: the agent goes before any reading shows its record (it
    still reported run 1's idle stop). The header says the schedule's stop, not
    "stopped at 17:55 (idle)"."""
    w = world(tmp_path, T0)
    w.pod.pod = replace(w.pod.pod, started_at=T0 - 3600)
    agent(w)
    await poll(w, 0.0)
    stop_at = await _idle_stop(w)
    w.clock.advance(20.0)
    w.slots.down = set()
    w.pod.run(started_at=w.clock())
    old = {"last_stop_reason": "idle",
           "last_stop": {"reason": "idle", "at": stop_at, "by": "watchdog", "ok": True}}
    agent(w, **old)
    await poll(w, 2.0)
    agent(w, next_stop_reason="schedule", stop_in_s=240.0, warning=True, **old)
    st = await poll(w, 600.0)
    assert st.run is not None and (st.run.number, st.run.state) == (2, "warned")
    container_gone(w, "EXITED")
    st = await poll(w, 240.0)
    assert st.run is not None and (st.run.number, st.run.state, st.run.cause) == (
        2, "stopped", "schedule")
    text = header(st)
    assert "(schedule)" in text and "(idle)" not in text, text
    assert loud(w) == [], loud(w)


async def test_a_new_runs_ack_is_shared_and_the_old_runs_is_not(tmp_path: Path) -> None:
    """A console and a wall on one state dir. An alert that stands across runs (the host
    driver too old) was acknowledged in run 1: in run 2 it shows unacknowledged in both,
    and an acknowledgement made in run 2 reaches the wall (the shared book held run 1's)."""
    import asyncio

    console, wall = (world(tmp_path, T0, run_blocking=asyncio.to_thread) for _ in range(2))

    def run(w: World, started: float, status: str = "RUNNING") -> None:
        w.pod.run(started, status)
        w.pod.pod = replace(w.pod.pod, host_cuda="12.8")

    async def both(after: float) -> None:
        for w in (console, wall):
            await poll(w, after)
            await w.session.settle()

    for w in (console, wall):
        run(w, T0 - 3600)
    await both(0.0)
    assert console.session.acknowledge("alice")
    await console.session.settle()
    await both(10.0)
    assert wall.session.alerts.active["cuda"].acked_by == "alice"
    # stopped (seen by both), then started again: run 2
    for w in (console, wall):
        run(w, T0 - 3600, "EXITED")
    await both(10.0)
    for w in (console, wall):
        run(w, console.clock() + 10.0)
    await both(20.0)
    for w in (console, wall):
        assert w.session.run is not None and w.session.run.number == 2
        assert w.session.alerts.active["cuda"].acked_by is None, w.session.alerts.active
    await both(10.0)  # the shared book's old acknowledgement is not adopted
    assert wall.session.alerts.active["cuda"].acked_by is None
    assert console.session.acknowledge("bob")
    await console.session.settle()
    await both(10.0)
    assert wall.session.alerts.active["cuda"].acked_by == "bob"


async def test_gpus_of_a_pod_being_stopped_on_purpose_raise_nothing(tmp_path: Path) -> None:
    """The watchdog is stopping the pod (its record says so, the provider still says
    RUNNING): what its GPUs read meanwhile (a hot GPU as the slots go) is no WARN."""
    w = world(tmp_path, T0)
    w.pod.pod = replace(w.pod.pod, started_at=T0 - 3600)
    agent(w)
    await poll(w, 0.0)
    hot = GpuReport(gpus=(Gpu(0, "NVIDIA RTX PRO 6000", "GPU-0", temp_c=91.0,
                              throttled=("sw_thermal_slowdown",)),),
                    source="nvml", sampled_at=w.clock())
    agent(w, busy=False, stop_in_s=0.0, last_stop_reason="idle",
          last_stop={"reason": "idle", "at": w.clock(), "by": "watchdog", "ok": None})
    w.pod.pod = replace(w.pod.pod, gpus=hot)
    st = await poll(w, 1.0)
    assert st.run is not None and (st.run.state, st.run.cause) == ("stopping", "idle")
    assert loud(w) == [], loud(w)
    # the same GPU on a pod nobody stops: a WARN (this test can fail)
    agent(w)
    w.pod.pod = replace(w.pod.pod, gpus=hot)
    await poll(w, 1.0)
    assert [t for t in loud(w) if "GPU 0" in t], loud(w)
