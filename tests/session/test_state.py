"""``state()``: what every screen shows, built from one poll, and how old the numbers
that do not come with every poll are (issue 27, item 3)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from console.model.gpu_state import Gpu, GpuReport
from console.model.snapshot import StopPlan
from console.session.reading import FRESH_SLACK_S
from console.session.session import POD_POLL_S
from tests.session.world import inline, world
from tests.support.waits import steps_until as until

T0 = 1_800_000_000.0  # a Friday, 17:00 in Seoul: working hours


async def test_state_is_built_from_one_poll(tmp_path: Path) -> None:
    gate = asyncio.Event()
    gate.set()
    held: list[str] = []

    async def blocking(fn: Any, *args: Any, **kw: Any) -> Any:
        if not gate.is_set():  # the spend book's save, mid-poll, takes its time
            held.append(getattr(fn, "__name__", "?"))
            await gate.wait()
        return await inline(fn, *args, **kw)

    w = world(tmp_path, T0, run_blocking=blocking)
    assert await w.session.poll()
    first = w.session.state()
    assert first.snapshot is not None and first.polled_at == T0
    assert first.snapshot.fetched_at == T0 and all(
        s.health == "up" for s in first.snapshot.slots)
    assert not [a for a in first.alerts if a.key.startswith("down:")]
    # the next poll: Q27 is down, and the pod's turn comes with a save of the spend book
    w.slots.down = {"Q27"}
    w.clock.advance(60)
    gate.clear()
    second = asyncio.ensure_future(w.session.poll())
    assert await until(lambda: held == ["save"])
    # mid-poll, every screen still draws the first poll whole: its slots, its alerts
    mid = w.session.state()
    assert mid.snapshot is first.snapshot and mid.pod is first.pod
    assert mid.polled_at == T0 and mid.alerts == first.alerts
    assert mid.now == T0 + 60  # the clock, for the countdowns
    gate.set()
    assert await second
    after = w.session.state()
    assert after.snapshot is not None and after.polled_at == T0 + 60
    assert after.snapshot.fetched_at == T0 + 60
    assert after.pod is not None and after.pod.fetched_at == T0 + 60
    assert [a.key for a in after.alerts if a.key.startswith("down:")] == ["down:Q27"]
    assert w.session.polls == 2


def gpus(sampled_at: float) -> GpuReport:
    return GpuReport(gpus=(Gpu(index=0, name="NVIDIA RTX PRO 6000", uuid="GPU-0",
                               util_pct=50.0),), source="nvml", sampled_at=sampled_at)


async def test_the_pod_and_gpu_ages_are_told_past_one_refresh(tmp_path: Path) -> None:
    w = world(tmp_path, T0, refresh_s=2.0)
    bound = 2.0 + FRESH_SLACK_S
    w.pod.pod = replace(w.pod.pod, gpus=gpus(T0 - 1.0))  # the agent sampled a second ago
    assert await w.session.poll()
    assert w.session.state().ages == {}  # all fresh
    w.clock.advance(2.0)
    assert await w.session.poll()  # slots only: the pod is 2 s old, the GPUs 3 s
    st = w.session.state()
    assert st.ages == {"gpus": 3.0} and st.ages["gpus"] > bound
    w.clock.advance(2.0)
    assert await w.session.poll()
    assert w.session.state().ages == {"pod": 4.0, "gpus": 5.0}
    # a pod whose clock runs 30 s ahead of ours: its sample time is put on our clock
    w.clock.advance(POD_POLL_S - 4.0)
    w.pod.pod = replace(w.pod.pod, gpus=gpus(w.clock() + 30.0 - 0.5),
                        stop_plan=StopPlan(skew_s=30.0, read_at=w.clock()))
    assert await w.session.poll()  # the pod's turn: fresh again
    assert w.session.state().ages == {}
    # after +, the bound is the new refresh's: the same 2 s are now too old
    assert w.session.step_refresh(+1) == 1.0
    w.clock.advance(2.0)
    assert w.session.state().ages == {"pod": 2.0, "gpus": 2.5}


def test_the_gpu_line_and_the_header_say_how_old_they_are() -> None:
    from console.ui.widgets.gpu_strip import gpu_line
    from console.ui.widgets.header import age_text

    line = gpu_line(gpus(T0), 80, T0, age=7.2)
    assert line.plain.endswith("  7s ago") and "GPU0" in line.plain
    assert gpu_line(gpus(T0), 30, T0, age=7.2).plain.endswith("7s ago")  # never cut off
    assert "ago" not in gpu_line(gpus(T0), 80, T0).plain
    assert age_text(75) == "1m15s ago"


def exporter(util: float, power: float) -> GpuReport:
    """What the pod's GPU endpoint says (no processes: only the agent knows whose they
    are)."""
    return GpuReport(gpus=(Gpu(index=0, name="NVIDIA RTX PRO 6000", uuid="GPU-0",
                               util_pct=util, power_w=power),), source="exporter")


async def test_the_gpu_line_is_read_at_every_poll_where_the_pod_serves_it(
        tmp_path: Path) -> None:
    """Issue 27 #3: with ``gpu_metrics_url`` the GPU line is as young as the slots. The
    pod (RunPod, the agent over SSH) is still read every ``POD_POLL_S``; the exporter at
    every poll. Whose processes sit on a GPU stays the agent's word."""
    from console.model.gpu_state import GpuProcess
    from tests.session.world import GpuEndpoint

    w = world(tmp_path, T0, refresh_s=1.0)
    bound = 1.0 + FRESH_SLACK_S
    agent = GpuReport(gpus=(Gpu(index=0, name="NVIDIA RTX PRO 6000", uuid="GPU-0",
                                util_pct=10.0, power_w=100.0,
                                processes=(GpuProcess(4242, "FLASH", 1 << 30),)),),
                      source="nvml", sampled_at=T0)
    w.pod.pod = replace(w.pod.pod, gpus=agent)
    w.pod.gpu_metrics = endpoint = GpuEndpoint(exporter(20.0, 200.0))  # type: ignore[assignment]
    assert await w.session.poll()
    for k in range(1, 12):  # eleven polls a second apart: one pod reading, eleven GPU reads
        w.clock.advance(1.0)
        endpoint.report = exporter(20.0 + k, 200.0 + k)
        assert await w.session.poll()
        st = w.session.state()
        assert st.pod is not None and st.pod.gpus is not None
        g = st.pod.gpus.gpus[0]
        assert (g.util_pct, g.power_w) == (20.0 + k, 200.0 + k)  # this poll's
        assert g.processes == agent.gpus[0].processes  # the agent's, kept
        assert "gpus" not in st.ages
        # the pod's own fields keep the pod's cadence, and say how old they are
        assert ("pod" in st.ages) == (k * 1.0 > bound and k < POD_POLL_S)
    assert w.pod.calls == 2 and endpoint.calls == 12
    # the GPU plots got a point at each read
    pts = w.session.history.series("GPU0", "gpu_power")
    assert pts.values()[-3:] == [209.0, 210.0, 211.0] and len(pts) == 12
    # the endpoint stops answering: the last good line stays, its age beside it
    endpoint.hang = True
    w.clock.advance(1.0)
    assert await w.session.poll()
    w.clock.advance(1.0)
    assert await w.session.poll()
    st = w.session.state()
    assert st.pod is not None and st.pod.gpus is not None
    assert st.pod.gpus.gpus[0].power_w == 211.0
    assert st.ages.get("gpus") == 2.0
    # an answer nobody can read fails the GPU line alone, never the slots' poll
    endpoint.hang, endpoint.error = False, ValueError("not an exposition")
    w.clock.advance(1.0)
    assert await w.session.poll()
    st = w.session.state()
    assert st.pod is not None and st.pod.gpus is not None
    assert st.pod.gpus.gpus[0].power_w == 211.0 and st.ages.get("gpus") == 3.0
    endpoint.error = None
    # a new pod (a fallback): nothing of the old pod's line is shown
    endpoint.hang = False
    w.pod.pod = replace(w.pod.pod, pod_id="p2", gpus=None)
    endpoint.report = exporter(90.0, 500.0)
    w.clock.advance(1.0)
    assert await w.session.poll()
    st = w.session.state()
    assert st.pod is not None and st.pod.pod_id == "p2" and st.pod.gpus is not None
    assert st.pod.gpus.gpus[0].power_w == 500.0


async def test_without_a_gpu_endpoint_the_gpu_line_keeps_the_pods_cadence(
        tmp_path: Path) -> None:
    """The agent alone (no exporter), or Prometheus: no read faster than the pod's, and
    the age is told."""
    w = world(tmp_path, T0, refresh_s=1.0)
    w.pod.pod = replace(w.pod.pod, gpus=gpus(T0))
    assert await w.session.poll()
    w.clock.advance(3.0)
    assert await w.session.poll()
    assert w.session.state().ages == {"pod": 3.0, "gpus": 3.0}
    assert w.pod.calls == 1
