"""Alerts that follow what the operator (or the watchdog) did (issue 30, finding 4): the
session on an injected clock, its sources in process, the real alert rules.

* A planned stop — the watchdog's, the console's ``w s``, one made elsewhere and seen
  through the provider — is one info event, not a CRIT per slot and an unreachable agent.
* A GPU hardware fault outlives the data: it ends when the GPU is seen healthy, or with
  its pod ("ended with pod X", not "cleared").
* After a fallback nothing of the old pod is shown or alerted on the new one.
* An extension's end is said before it comes.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from msgspec.structs import replace

from console.model.gpu_state import Gpu, GpuReport, XidRecord
from console.model.snapshot import PodSnapshot, StopPlan
from tests.session.world import World, world

T0 = 1_800_000_000.0  # a Friday, 17:00 in Seoul: working hours
SLOTS = ("FLASH", "Q27")


def plan(read_at: float, **watchdog) -> StopPlan:
    """The agent's ``status`` → ``watchdog`` as it words it, read at ``read_at``."""
    doc = {"armed": True, "next_stop_reason": "idle", "stop_in_s": 1800.0, "now": read_at,
           "clock_speed": 1.0, **watchdog}
    return StopPlan.parse(doc, read_at)


def agent_up(w: World, **watchdog) -> None:
    """The agent answers: its stop plan as read now."""
    w.pod.pod = replace(w.pod.pod, agent_error=None, watchdog_armed=True,
                        stop_plan=plan(w.clock(), **watchdog))


def pod_gone_quiet(w: World) -> None:
    """The pod's container is gone (its agent with it); the provider still says RUNNING
    for a while, as RunPod does."""
    w.pod.pod = replace(w.pod.pod, agent_error="connection refused", stop_plan=None,
                        gpus=None)
    w.slots.down = set(SLOTS)


async def poll(w: World, after: float, *, pod: bool = True) -> None:
    w.clock.advance(after)
    if pod:
        w.session.refresh_now()  # the pod's reading too (as after an operation)
        w.session.cycle.pod_reads.wanted = True
    assert await w.session.poll()


def keys(w: World) -> dict[str, str]:
    return {a.key: a.severity for a in w.session.alerts.firing()}


def outages(w: World) -> list[str]:
    return [k for k in keys(w) if k.startswith(("down:", "probe:", "agent"))]


async def _stop_then_exit(w: World) -> None:
    """The stop is made: the slots and the agent go, then the provider says EXITED."""
    pod_gone_quiet(w)
    for _ in range(5):  # half a minute of polls while the provider still says RUNNING
        await poll(w, 6.0)
        assert outages(w) == [], keys(w)
        assert keys(w).get("stopped") == "info", keys(w)
    w.pod.pod = replace(w.pod.pod, status="EXITED", cost_per_hr=0.0)
    await poll(w, 6.0)
    assert outages(w) == [] and keys(w).get("stopped") == "info", keys(w)


@pytest.mark.parametrize("how", ["idle stop due", "watchdog record", "console stop-now",
                                 "provider only"])
async def test_a_planned_stop_is_one_info_event(tmp_path: Path, how: str) -> None:
    """One event for a stop; INFO when somebody meant it, WARN for "provider only"."""
    w = world(tmp_path, T0)
    w.pod.pod = replace(w.pod.pod, started_at=T0 - 3600)
    agent_up(w)
    await poll(w, 0.0)
    assert outages(w) == [] and "stopped" not in keys(w)
    if how == "idle stop due":  # the watchdog's time has come: its last word
        agent_up(w, stop_in_s=-2.0, warning=True)
    elif how == "watchdog record":  # the agent recorded the stop it is making
        agent_up(w, last_stop={"reason": "idle", "at": w.clock() - 1, "by": "watchdog",
                               "ok": None, "detail": "stopping"}, last_stop_reason="idle")
    elif how == "console stop-now":  # `w s y`: the agent's stop-now action
        agent_up(w)
        w.pod.pod = replace(w.pod.pod, agent_actions=(
            {"id": "stop-1", "kind": "stop-now", "state": "running",
             "started_at": w.clock() - 1, "ended_at": None},))
    if how != "provider only":
        await poll(w, 2.0)
    if how == "provider only":  # stopped by someone else: the provider says so at once
        w.slots.down = set(SLOTS)
        w.pod.pod = replace(w.pod.pod, status="EXITED", agent_error="connection refused",
                            stop_plan=None, cost_per_hr=0.0)
        await poll(w, 6.0)
        # nobody here meant it: one WARN for the stop (issue 42: a stop is planned for
        # every cause but the provider and unknown), still no CRIT per slot
        assert outages(w) == [] and keys(w).get("stopped") == "warn", keys(w)
    else:
        await _stop_then_exit(w)
    fired = [e for e in w.session.alerts.history if e.kind == "firing"]
    assert [e.title.split()[0] for e in fired] in (["pod"], ["stop"]), fired
    assert not [t for t, _ in w.notes if t.startswith("ALERT") and "down" in t]
    state = w.session.state()
    stop = getattr(state, "stop", None)
    assert stop is not None and stop.done
    assert state.stale is None  # stopped on purpose: not STALE


async def test_an_unplanned_outage_is_still_an_outage(tmp_path: Path) -> None:
    """Nothing said a stop was coming: the same silence is a CRIT per slot and a WARN."""
    w = world(tmp_path, T0)
    w.pod.pod = replace(w.pod.pod, started_at=T0 - 3600)
    agent_up(w)
    await poll(w, 0.0)
    pod_gone_quiet(w)
    await poll(w, 6.0)
    assert {"down:FLASH": "crit", "down:Q27": "crit", "agent": "warn"}.items() <= \
        keys(w).items(), keys(w)
    assert "stopped" not in keys(w)


def xid_report(t: float, sampled: float) -> GpuReport:
    return GpuReport(gpus=(Gpu(0, "NVIDIA RTX PRO 6000", "GPU-0", util_pct=100.0, temp_c=59.0),
                           Gpu(1, "NVIDIA RTX PRO 6000", "GPU-1", util_pct=90.0,
                               ecc_dbe_volatile=0)),
                     source="nvml", sampled_at=sampled,
                     xids=(XidRecord(t, 0, 79, "critical", "GPU has fallen off the bus",
                                     "a fallback pod (f)"),))


async def test_an_xid_outlives_the_data_and_ends_with_its_pod(tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    w.pod.pod = replace(w.pod.pod, started_at=T0 - 3600, gpus=xid_report(T0 - 5, T0))
    await poll(w, 0.0)
    xid = [k for k in keys(w) if k.startswith("xid:0:79")]
    assert xid and keys(w)[xid[0]] == "crit"
    # the pod stops: the GPU readings go with it. Nothing was repaired
    w.pod.pod = replace(w.pod.pod, status="EXITED", gpus=None, agent_error="refused")
    w.slots.down = set(SLOTS)
    for _ in range(3):
        await poll(w, 60.0)
        assert xid[0] in keys(w), keys(w)
    # 20 minutes on (past the Xid's 15 recent minutes) it still stands
    await poll(w, 20 * 60.0)
    assert xid[0] in keys(w)
    assert not [t for t, _ in w.notes if t.startswith("cleared") and "Xid" in t]
    # a fallback: the console's pod is another one now. The old pod's fault ends with it
    fresh = GpuReport(gpus=(Gpu(0, "NVIDIA RTX PRO 6000", "GPU-0", util_pct=1.0),),
                      source="nvml", sampled_at=w.clock())
    w.pod.pod = PodSnapshot(pod_id="p2", status="RUNNING", cost_per_hr=4.0,
                            started_at=w.clock(), gpus=fresh)
    w.slots.down = set()
    await poll(w, 2.0)
    assert not [k for k in keys(w) if k.startswith("xid:")], keys(w)
    ended = [e for e in w.session.alerts.history if e.kind == "ended"]
    assert [(e.title.startswith("GPU 0 Xid 79"), e.detail) for e in ended] == \
        [(True, "ended with pod p1")]
    assert any(t.startswith("ended with pod p1: GPU 0 Xid 79") for t, _ in w.notes), w.notes
    assert not [e for e in w.session.alerts.history if e.kind == "resolved"
                and "Xid" in e.title]
    assert getattr(w.session.state(), "gpu_marks", None) == {}  # new pod's GPU 0: clean


async def test_ecc_ends_only_when_the_gpu_reads_healthy(tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    bad = GpuReport(gpus=(Gpu(1, "NVIDIA RTX PRO 6000", "GPU-1", ecc_dbe_volatile=1),),
                    source="nvml", sampled_at=T0)
    w.pod.pod = replace(w.pod.pod, gpus=bad)
    await poll(w, 0.0)
    ecc = [k for k in keys(w) if k.startswith("ecc:1")]
    assert ecc and keys(w)[ecc[0]] == "crit"
    # the agent goes quiet: no readings, no verdict
    w.pod.pod = replace(w.pod.pod, gpus=None, agent_error="timed out")
    await poll(w, 30.0)
    assert ecc[0] in keys(w)  # nothing says the GPU is healthy: it stands
    assert getattr(w.session.state(), "gpu_marks", None) == {1: "ECC"}  # its row says so
    # seen healthy (a reset cleared the volatile count): it clears, as a repair does
    good = GpuReport(gpus=(Gpu(1, "NVIDIA RTX PRO 6000", "GPU-1", ecc_dbe_volatile=0),),
                     source="nvml", sampled_at=w.clock())
    w.pod.pod = replace(w.pod.pod, gpus=good, agent_error=None)
    await poll(w, 10.0)
    assert ecc[0] not in keys(w)
    assert any(t.startswith("cleared: GPU 1 double-bit ECC") for t, _ in w.notes)


async def test_after_a_fallback_nothing_of_the_old_pod_is_shown(tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    hot = GpuReport(gpus=(Gpu(0, "NVIDIA RTX PRO 6000", "GPU-0", temp_c=91.0,
                              throttled=("sw_thermal_slowdown",)),),
                    source="nvml", sampled_at=T0)
    w.pod.pod = replace(w.pod.pod, gpus=hot, p2p_disabled=True)
    await poll(w, 0.0)
    assert "throttle:0" in keys(w) and "p2p" in keys(w)
    # the deployment moved to a new pod between two pod readings (10 s apart)
    w.pod.pod = PodSnapshot(pod_id="p2", status="RUNNING", cost_per_hr=3.0,
                            started_at=w.clock(), p2p_disabled=False,
                            gpus=GpuReport(gpus=(Gpu(0, "H200", "GPU-9", temp_c=40.0),),
                                           source="nvml", sampled_at=w.clock()))
    reads = w.pod.calls
    await poll(w, 2.0, pod=False)  # the next refresh, not the pod's turn: read anyway
    assert w.pod.calls == reads + 1
    st = w.session.state()
    assert st.pod is not None and st.pod.pod_id == "p2"
    assert st.pod.p2p_disabled is False
    assert not [k for k in keys(w) if k.startswith(("throttle:", "p2p"))]
    assert getattr(st, "gpu_marks", None) == {}


async def test_a_warning_comes_before_an_extension_ends(tmp_path: Path) -> None:
    """An extension until 19:00 (pod time, ×60 clock): said some minutes before, then
    not again once it is over."""
    w = world(tmp_path, T0)
    zone = dt.timezone(dt.timedelta(hours=9))
    pod_now = T0 - 7 * 3600.0  # the pod's own clock, far from ours
    until = dt.datetime.fromtimestamp(pod_now + 30 * 60, zone).isoformat()

    def extended(now: float, stops_at_end: bool = True) -> None:
        w.pod.pod = replace(w.pod.pod, watchdog_armed=True, stop_plan=plan(
            w.clock(), now=now, next_stop_reason="schedule", stop_in_s=None,
            clock_speed=60.0, clock_simulated=True, warn_before_s=600.0,
            extension={"until_iso": until, "by": "alice", "reason": "eval run",
                       "stops_at_end": stops_at_end}))

    extended(pod_now)
    await poll(w, 0.0)
    assert "extension-ends" not in keys(w)  # 30 pod minutes left
    await poll(w, 21.0, pod=False)  # 21 s ×60: 21 pod minutes on, 9 left
    alert = w.session.alerts.active.get("extension-ends")
    assert alert is not None and alert.severity == "warn", keys(w)
    assert "ends in 9 min" in alert.title and "alice" in alert.title
    # the schedule applies again at its end (no stop): said, as information
    extended(pod_now + 25 * 60, stops_at_end=False)
    await poll(w, 0.0)
    assert w.session.alerts.active["extension-ends"].severity == "info"
