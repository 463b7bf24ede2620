"""The session hands its poller the completion probe's hold (``pod_stop.probe_hold``),
derived from the pod's last reading at each probe: held while the pod counts idle time,
the log says so once."""

from __future__ import annotations

from pathlib import Path

from msgspec.structs import replace

from console.model.pod_stop import PROBE_WAITS_FOR_IDLE, PROBE_WAITS_FOR_TRAFFIC
from console.model.snapshot import StopPlan
from tests.session.world import world

IDLE = StopPlan(next_reason="idle", idle_s=600.0, idle_after_s=1800.0, busy=False)


async def test_the_session_holds_the_probe_on_its_idle_pod_and_says_so(tmp_path: Path
                                                                       ) -> None:
    w = world(tmp_path, 1_790_000_000.0)
    s = w.session
    await s.poll()
    hold = w.slots.probe_hold  # what the session handed its poller
    # the pod's agent serves no stop plan: the slots' own counters say whether it is used
    assert hold() == PROBE_WAITS_FOR_TRAFFIC  # not known yet: it may be counting idle
    w.slots.in_use_now = True  # others' requests run
    assert hold() is None
    w.pod.pod = replace(w.pod.pod, stop_plan=IDLE)
    w.clock.advance(30)  # the pod's cadence: it is read again
    await s.poll()
    assert w.slots.probe_hold() == PROBE_WAITS_FOR_IDLE
    said = [t for t, _ in w.notes if "probes wait while the pod is idle" in t]
    assert len(said) == 1, w.notes
    w.pod.pod = replace(w.pod.pod, stop_plan=replace(IDLE, busy=True))
    w.clock.advance(30)
    await s.poll()
    assert w.slots.probe_hold() is None  # in use: the probe goes
    w.pod.pod = replace(w.pod.pod, stop_plan=IDLE)
    w.clock.advance(30)
    await s.poll()
    assert w.slots.probe_hold() == PROBE_WAITS_FOR_IDLE
    # said once: sparse traffic flips idle and busy between the agent's looks all day
    assert sum("probes wait while" in t for t, _ in w.notes) == 1, w.notes
