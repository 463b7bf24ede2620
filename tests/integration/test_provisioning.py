"""Resume and fallback provisioning against the RunPod v2 emulator, on real SSH hosts.

Only RunPod and the GPUs are emulated: each created pod is a real OpenSSH server
on loopback running the real agent, which starts the simulated vLLM as its
slot. Time is injected (``sleep`` records instead of waiting), so a 10-minute
wait between rounds costs nothing. After every scenario the emulator is asked
which pods are still running: only the one that came up healthy may be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import deque
from pathlib import Path

import pytest

from console.operations.provision import (
    EXIT_FATAL,
    EXIT_HOST_CHECKS,
    EXIT_NO_CAPACITY,
    EXIT_UNHEALTHY,
    ProvisionFailed,
)
from pod_agent.profiles import load_profiles
from tests.conftest import REPO
from tests.support import sshd
from tests.support.emulated_pods import KEY, World, free_ports

pytestmark = pytest.mark.skipif(not sshd.available() and not os.environ.get("CI"),
                                reason="openssh-server not installed")

def _healthy(port: int) -> bool:
    import httpx
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


async def test_first_kind_sold_out_second_works(world: World) -> None:
    world.state.stock["GPU B1"] = 2
    prov = world.provisioner()
    res = await prov.fallback()
    assert res.profile.name == "kind-b"
    assert [(a["gpu"], a["outcome"]) for a in res.attempts] == [
        ("GPU A1", "sold out"), ("GPU A2", "sold out"), ("GPU B1", "ok")]
    assert world.running() == [res.pod.id]  # exactly the healthy one
    assert _healthy(world.port)
    targets = json.loads((world.root / "rendered" / "prometheus" / "targets.json").read_text())
    assert targets[0]["labels"]["pod"] == res.pod.id
    # no allowedCudaVersions ever went to RunPod
    assert all("allowedCudaVersions" not in json.dumps(p) for p in world.state.pods.values())
    await prov.client.aclose()


async def test_sold_out_for_rounds_then_stock(world: World) -> None:
    world.state.restock_after_creates = 6  # two full rounds of three GPU types
    world.state.restock = 2
    prov = world.provisioner(rounds=5)
    res = await prov.fallback()
    assert res.profile.name == "kind-a"
    rounds = sorted({a["round"] for a in res.attempts})
    assert rounds == [1, 2, 3]
    # two 10-minute waits, injected (the 0.5 s polls of SSH and health are not counted)
    assert sum(s for s in world.sleeps if s >= 1) == pytest.approx(2 * 600)
    assert any("round 2/5 in 600 s" in line for line in world.lines)
    assert world.running() == [res.pod.id]
    await prov.client.aclose()


async def test_everything_sold_out_gives_exit_2_and_no_pod(world: World) -> None:
    prov = world.provisioner(rounds=2)
    with pytest.raises(ProvisionFailed) as exc:
        await prov.fallback()
    assert exc.value.code == EXIT_NO_CAPACITY
    assert world.running() == [] and world.state.pods == {}
    await prov.client.aclose()


async def test_resume_refused_falls_back(world: World) -> None:
    old = world.state.add_stopped_pod("pod-console-kind-a", "GPU A1")
    world.state.resume_capacity = False
    world.state.stock["GPU A2"] = 2
    prov = world.provisioner()
    lp = load_profiles(world.profiles_dir)[0]
    res = await prov.up(old, lp)
    assert res.pod.id != old
    assert world.state.pods[old]["status"] == "EXITED"  # the old one kept, not billing
    assert any("not enough free GPUs on the host machine" in line for line in world.lines)
    assert world.running() == [res.pod.id]
    await prov.client.aclose()


async def test_resume_works(world: World) -> None:
    old = world.state.add_stopped_pod("pod-console-kind-a", "GPU A1")
    prov = world.provisioner()
    res = await prov.up(old, load_profiles(world.profiles_dir)[0])
    assert res.pod.id == old and world.running() == [old]
    msg = await prov.down(old)
    assert "stopped" in msg and world.running() == []
    assert "already EXITED" in await prov.down(old)  # safe to run twice
    await prov.client.aclose()


async def test_5xx_on_create_although_created_makes_no_duplicate(world: World) -> None:
    world.state.stock["GPU A1"] = 4
    world.state.create_5xx_after_create = 1
    prov = world.provisioner()
    res = await prov.fallback()
    assert len(world.state.pods) == 1  # looked up by name instead of creating again
    assert world.running() == [res.pod.id]
    await prov.client.aclose()


async def test_429_honours_retry_after(world: World) -> None:
    world.state.stock["GPU A1"] = 2
    world.state.rate_limit_next = 2
    world.state.retry_after_s = 7
    prov = world.provisioner()
    res = await prov.fallback()
    assert world.sleeps[:2] == [7.0, 7.0]
    assert world.running() == [res.pod.id]
    await prov.client.aclose()


async def test_401_is_fatal_at_once(world: World) -> None:
    world.state.stock["GPU A1"] = 2
    prov = world.provisioner(key="wrong-key")
    with pytest.raises(ProvisionFailed) as exc:
        await prov.fallback()
    assert exc.value.code == EXIT_FATAL and "401" in exc.value.message
    assert "wrong-key" not in exc.value.message and "wrong-key" not in repr(prov.client)
    assert world.state.pods == {} and world.sleeps == []
    await prov.client.aclose()


async def test_cuda_12_8_host_is_replaced_by_13_2(world: World) -> None:
    world.state.stock["GPU A1"] = 4
    world.state.host_cudas = deque(["12.8", "13.2"])
    prov = world.provisioner()
    res = await prov.fallback()
    outcomes = [a["outcome"] for a in res.attempts]
    assert outcomes[0].startswith("host rejected: driver CUDA 12.8 < required 13.0")
    assert outcomes[-1] == "ok" and res.pod.cuda == "13.2"
    statuses = sorted(p["status"] for p in world.state.pods.values())
    assert statuses == ["RUNNING", "TERMINATED"]
    assert world.running() == [res.pod.id]
    await prov.client.aclose()


async def test_cuda_too_old_everywhere_gives_exit_4(world: World) -> None:
    world.state.stock["GPU A1"] = 10
    world.state.host_cudas = deque(["12.8"])
    prov = world.provisioner(cuda_attempts=3)
    with pytest.raises(ProvisionFailed) as exc:
        await prov.fallback()
    assert exc.value.code == EXIT_HOST_CHECKS
    assert world.running() == [] and len(world.state.pods) == 3
    await prov.client.aclose()


async def test_bootstrap_failing_half_way_terminates_the_pod(tmp_path: Path) -> None:
    w = World(tmp_path, bad_start=True)  # the slot cannot fit one request: never healthy
    w.server.start()
    try:
        w.state.stock["GPU A1"] = 2
        prov = w.provisioner(health_wait_s=5)  # never healthy: how long is not the point
        with pytest.raises(ProvisionFailed) as exc:
            await prov.fallback()
        assert exc.value.code == EXIT_UNHEALTHY and "terminated" in exc.value.message
        assert w.running() == []
        await prov.client.aclose()
    finally:
        w.server.stop()
        w.hosts.stop_all()


async def test_terminate_failing_is_loud(tmp_path: Path) -> None:
    w = World(tmp_path, bad_start=True)
    w.server.start()
    try:
        w.state.stock["GPU A1"] = 2
        w.state.fail_terminate = 10  # terminate keeps failing (retries included)
        prov = w.provisioner(health_wait_s=5)
        with pytest.raises(ProvisionFailed) as exc:
            await prov.fallback()
        leaked = exc.value.leaked
        assert leaked is not None and f"TERMINATE FAILED for pod {leaked.id}" in \
            exc.value.message
        assert "$" in exc.value.message and "/h" in exc.value.message
        assert w.running() == [leaked.id]  # reported, not hidden
        await prov.client.aclose()
    finally:
        w.server.stop()
        w.hosts.stop_all()


def _cli_setup(world: World, tmp_path: Path, extra: str = "") -> tuple[Path, dict]:
    """A config for the emulated world (``extra``: more top-level keys) and the CLI's
    environment (the emulator's key and address)."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {world.profiles_dir}\nstate_dir: {tmp_path / 'state'}\n"
                   f"{extra}pod:\n  ssh_key: {world.hosts.client_key()}\n"
                   f"  agent_dir: {world.root / 'cli-agent'}\n")
    env = dict(os.environ, RUNPOD_API_KEY=KEY, RUNPOD_API_BASE=world.server.base_url,
               PYTHONPATH=str(REPO))
    env.pop("POD_CONSOLE_STATE_DIR", None)
    return cfg, env


def test_up_and_down_from_the_cli(world: World, tmp_path: Path) -> None:
    world.state.stock["GPU B1"] = 2
    cfg, env = _cli_setup(world, tmp_path)
    r = subprocess.run([sys.executable, "-m", "console.cli", "up", "--config", str(cfg),
                        "--round-wait", "0", "--rounds", "1"], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "UP: pod" in r.stdout and "kind-b" in r.stdout
    assert KEY not in r.stdout + r.stderr
    current = json.loads((tmp_path / "state" / "current_pod.json").read_text())
    assert world.running() == [current["pod_id"]]
    r = subprocess.run([sys.executable, "-m", "console.cli", "down", "--config", str(cfg)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0 and "stopped" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "console.cli", "down", "--config", str(cfg)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0 and "already EXITED" in r.stdout
    assert world.running() == []
    world.state.stock = dict.fromkeys(world.state.stock, 0)
    world.state.resume_capacity = False
    r = subprocess.run([sys.executable, "-m", "console.cli", "up", "--config", str(cfg),
                        "--round-wait", "0", "--rounds", "2"], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    audit = [json.loads(x) for x in (tmp_path / "state" / "audit.jsonl").read_text()
             .splitlines()]
    assert [(a["action"], a["result"]) for a in audit] == [
        ("up", "started"), ("up", "ok"), ("smoke", "ok"), ("down", "ok"), ("down", "ok"),
        ("up", "started"), ("up", "failed")]


def test_up_ends_with_the_smoke_test_and_a_failure_is_exit_5(world: World,
                                                             tmp_path: Path) -> None:
    """``up``'s last step goes through the gateway users call: one that does not answer
    is exit 5 naming the failing checks — and the pod, healthy as far as its agent can
    tell, is kept (and named) for the engineer to look at."""
    world.state.stock["GPU B1"] = 2
    dead = free_ports(1)[0]
    cfg, env = _cli_setup(world, tmp_path, f"gateway_url: http://127.0.0.1:{dead}\n")
    r = subprocess.run([sys.executable, "-m", "console.cli", "up", "--config", str(cfg),
                        "--round-wait", "0", "--rounds", "1"], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 5, r.stdout + r.stderr
    # each failing check names itself and what it saw: the evidence, not just a verdict
    assert "smoke test FAILED: models listed: gateway: /v1/models answered connection " \
        "refused" in r.stderr, r.stderr
    assert "chat: model-1: connection refused" in r.stderr, r.stderr
    [pod] = world.running()
    assert f"pod {pod} is UP" in r.stderr
    audit = [json.loads(x) for x in (tmp_path / "state" / "audit.jsonl").read_text()
             .splitlines()]
    assert [(a["action"], a["result"]) for a in audit][-1] == ("smoke", "failed")
