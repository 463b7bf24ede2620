"""No viewer keeps a pod alive (issue 42, item 4): a ``pod-console wall`` that gets no
stop plan (none is served to it without ``gpu_metrics_url`` or Prometheus) sent its
completion probe every 5 minutes; the agent counted it as traffic and the idle stop
never came. The same pod without a wall open stopped after its idle minutes.

Real parts: the demo's pod — the real agent (its watchdog on the accelerated pod clock,
×120, with no warning lead kept for a reader: the demo profile's 30 idle minutes are 15
real seconds), the simulated slots (HTTP, their real counters), the RunPod emulator the
agent stops the pod through. A real wall
session (read-only: no agent connection, no GPU endpoint, no gateway: no stop plan)
polls the slots every second with a probe every 3 s allowed, through traffic and after
it stops — two of them, as a wall and a web wall's tab (a process each): each sees the
other's probes in the counters. The agent's own idle count must never restart once the
traffic is gone, and the idle stop must come on time."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest

from console.session.context import make_context
from console.session.session import Session
from console.sources.agent_client import AgentClient
from pod_agent.requests import StatusRequest

pytestmark = pytest.mark.realtime

SPEED = 120.0
IDLE_REAL_S = 30 * 60 / SPEED
"""The demo profile's idle limit (30 min on the pod's clock), in real seconds."""
WARN_REAL_S = 0.0
"""The demo's warning lead for a person to read (``deployment.WARN_REAL_S``, 25 real s)
given none: nobody reads it here, and the demo widens the idle limit to the warning's
lead and 5 pod minutes (at 25 s, 80 pod minutes: 40 real s of waiting)."""
LATE_S = 30.0
"""How late the stop may come (real seconds): the agent's ticks and the slots share two
loaded cores with everything else."""


async def _watchdog(agent: AgentClient) -> dict:
    try:
        r = await agent.request(StatusRequest(), timeout_s=10)
    except Exception:  # the pod (and its agent) stopping: no answer is an answer here
        return {}
    return dict((r.final or {}).get("watchdog") or {}) if r.ok else {}


async def test_a_wall_with_no_stop_plan_does_not_keep_an_idle_pod_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from console.demo import deployment
    from console.demo.deployment import DemoDeployment
    from pod_agent.profile import duration_s

    monkeypatch.setattr(deployment, "WARN_REAL_S", WARN_REAL_S)
    monkeypatch.setenv("POD_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    demo = DemoDeployment(workdir=tmp_path / "demo", seed=7, startup_s=2.0, rate=2.0,
                          clock_speed=SPEED)
    await asyncio.to_thread(demo.start)
    sessions: list[Session] = []
    try:
        pid = demo.pod_id
        assert pid is not None
        agent = AgentClient(demo.transport_for(pid))
        # the wall's view: no GPU endpoint, no gateway, no agent (read-only): the pod's
        # stop plan reaches it from nowhere
        settings = demo.settings(refresh_s=1.0).model_copy(
            update={"gpu_metrics_url": None, "gateway_url": None})
        for _ in range(2):
            ctx = make_context(settings, read_only=True,
                               runpod_base=demo.emulator.base_url, probe_interval_s=3.0)
            assert ctx.pod_collector is not None
            sessions.append(Session(ctx, wall=True))
        session = sessions[0]

        async def poll_all() -> None:
            await asyncio.gather(*(s.poll() for s in sessions))

        deadline = time.monotonic() + 120
        while True:  # up and serving, its figures in
            await poll_all()
            snap = session.snapshot
            if snap is not None and snap.slots and all(s.figures for s in snap.slots):
                break
            assert time.monotonic() < deadline, "the demo's slots never served"
            await asyncio.sleep(0.5)
        assert session.pod is not None and session.pod.stop_plan is None  # none served
        assert sessions[1].pod is not None and sessions[1].pod.stop_plan is None
        # the premise: the profile's own 30 idle minutes, not widened for a reader
        idle_after = demo.profiles()[0].profile.schedule.idle_stop_after
        assert duration_s(idle_after) / SPEED <= IDLE_REAL_S, idle_after
        faults = {title: fn for title, _, fn in demo.faults()}
        faults["traffic stops"]()
        quiet_at = time.monotonic()
        stopped_at = None
        idle_seen: list[float] = []
        idle_from: float | None = None
        """The wall's clock when the agent's idle count was first seen going (2 min)."""
        last_status = 0.0
        while stopped_at is None:
            assert time.monotonic() - quiet_at < IDLE_REAL_S + LATE_S, (
                f"no idle stop {IDLE_REAL_S + LATE_S:.0f} s after the traffic stopped; "
                f"the agent's idle seconds as read: {idle_seen}")
            await poll_all()
            if demo.state.pods[pid]["status"] in ("EXITED", "STOPPED"):
                stopped_at = time.monotonic()
                break
            if time.monotonic() - last_status >= 3.0:
                last_status = time.monotonic()
                wd = await _watchdog(agent)
                last = wd.get("last_stop") or {}
                # once the agent makes its idle stop it counts idle time afresh (a failed
                # stop is retried after another period): the pod is stopping, though the
                # provider may not say so yet
                if idle_from is not None and isinstance(last, dict) and \
                        last.get("reason") == "idle":
                    stopped_at = time.monotonic()
                    break
                if isinstance(wd.get("idle_s"), int | float):
                    idle_seen.append(float(wd["idle_s"]))
                    if idle_from is None and idle_seen[-1] > 120:
                        idle_from = time.monotonic()
            await asyncio.sleep(1.0)  # the wall's refresh
        # the idle count, once it started, never went back to 0 (a probe would reset it)
        started = next((i for i, v in enumerate(idle_seen) if v > 120), None)
        assert started is not None, idle_seen
        run = idle_seen[started:]
        assert all(b >= a for a, b in itertools.pairwise(run)), idle_seen
        # and neither wall sent a probe while the pod counted idle time
        assert idle_from is not None
        for s in sessions:
            sent = s.poller.own_probes(s.now() - (time.monotonic() - idle_from))
            assert sum(sent.values()) == 0, sent
    finally:
        for s in sessions:
            await s.aclose()
        await demo.stop()

