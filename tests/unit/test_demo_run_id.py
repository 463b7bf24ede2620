"""Issue 42: a simulated stop and resume are two runs to the demo's agent.

A real pod's run is one start of its container (``pod_agent.stopstate.run_id``: the
kernel's boot id and the start of the container's first process). The demo's pods all
run on this machine, one boot and one first process: the demo set no run id, so a stop
and a resume were one run to the agent (the disarm, the warnings sent and the last stop
day carried over into the next start). Each simulated start and resume now gives the
pod's agent a fresh ``POD_AGENT_RUN_ID``; read back here as the agent reads it, through
the RunPod emulator's own start and stop actions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from console.demo.deployment import DEMO_KEY, REPO, DemoDeployment, shipped_profiles_dir


def _agent_run_id(demo: DemoDeployment, pod_id: str) -> str:
    """The run id an agent started now on ``pod_id`` would have (its own code, its env)."""
    env = demo.transport_for(pod_id).env
    out = subprocess.run([sys.executable, "-c", "from pod_agent import stopstate; "
                          "print(stopstate.run_id())"], env=env, cwd=str(REPO),
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def test_a_resumed_pod_is_a_new_run_to_its_agent(tmp_path: Path) -> None:
    demo = DemoDeployment(workdir=tmp_path / "demo")
    demo.profiles_dir.mkdir(parents=True)
    for src in sorted(shipped_profiles_dir().glob("*.yaml")):
        demo._profile_copy(src)
    demo.state.host_factory = demo._host_factory
    gpu = demo.profiles()[0].profile.gpu_type_ids[0]
    demo.emulator.start()
    try:
        pod = demo.state.add_stopped_pod("pod-console-demo", gpu)
        api = httpx.Client(base_url=demo.emulator.base_url,
                           headers={"Authorization": f"Bearer {DEMO_KEY}"}, timeout=10)

        def act(action: str) -> None:
            r = api.post(f"/pods/{pod}/action", json={"action": action})
            assert r.status_code == 200, r.text

        act("start")
        first = _agent_run_id(demo, pod)
        assert first == _agent_run_id(demo, pod)  # an agent restarted in one run: the same
        act("stop")
        act("start")  # the resume
        second = _agent_run_id(demo, pod)
        assert second != first, "a stop and a resume are one run to the agent"
        assert first.startswith(f"demo-{pod}-") and second.startswith(f"demo-{pod}-")
    finally:
        demo.emulator.stop()
