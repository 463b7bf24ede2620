"""Every way out of provisioning ends with nothing billing, or a loud report naming the pod.

The RunPod emulator misbehaves on purpose (an HTML page or half a JSON body on a
201, a create that hangs, routes that answer 500, a start that starts and then
500s); each created pod is a real SSH host running the real agent. After each
scenario the emulator says which pods bill.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from console.operations.ledger import Ledger
from console.operations.provision import (
    EXIT_FATAL,
    EXIT_INTERRUPTED,
    EXIT_LEAKED,
    EXIT_UNHEALTHY,
    ProvisionFailed,
)
from tests.conftest import REPO
from tests.support import sshd
from tests.support.emulated_pods import KEY, World
from tests.support.waits import held_within

pytestmark = pytest.mark.skipif(not sshd.available() and not os.environ.get("CI"),
                                reason="openssh-server not installed")


def creates(w: World) -> int:
    return sum(1 for m, p, _ in w.state.log if m == "POST" and p == "/v2/pods")


def ledger(w: World) -> Ledger:
    return Ledger(w.root / "state" / "pods.jsonl")




@pytest.mark.parametrize("knob", ["create_garbage_after_create",
                                  "create_truncated_after_create"])
async def test_unreadable_201_is_looked_up_by_name(world: World, knob: str) -> None:
    world.state.stock["GPU A1"] = 4
    setattr(world.state, knob, 1)
    prov = world.provisioner()
    res = await prov.fallback()
    assert creates(world) == 1 and len(world.state.pods) == 1
    assert world.running() == [res.pod.id]
    assert ledger(world).open_entries() == []
    await prov.client.aclose()


async def test_lost_create_with_failing_lookup_stops_and_names_the_pod(world: World) -> None:
    world.state.stock["GPU A1"] = 4
    world.state.create_5xx_after_create = 1
    world.state.outage = {"GET /v2/pods"}  # the lookup by name fails too
    prov = world.provisioner(rounds=1)
    with pytest.raises(ProvisionFailed) as exc:
        await prov.fallback()
    assert exc.value.code == EXIT_LEAKED
    name = exc.value.leaked_name
    assert name and name.startswith("pod-console-kind-a-") and name in exc.value.message
    assert creates(world) == 1  # never a second create while one is unknown
    [entry] = ledger(world).open_entries()
    assert entry.name == name
    # the API comes back: the next run's sweep finds the pod by name and terminates it
    world.state.outage = set()
    lines = await prov.sweep()
    assert any("terminated" in line for line in lines), lines
    assert world.running() == [] and ledger(world).open_entries() == []
    await prov.client.aclose()


async def test_hung_create_is_resolved_once(world: World) -> None:
    world.state.stock["GPU A1"] = 4
    world.state.create_hang_after_create_s = 3
    prov = world.provisioner(client_timeout_s=1)
    res = await prov.fallback()
    # (the emulator logs a hung create only once it answers: count pods, not log lines)
    assert len(world.state.pods) == 1 and world.running() == [res.pod.id]
    await prov.client.aclose()


async def test_hung_create_and_dead_lookup_make_no_second_pod(world: World) -> None:
    world.state.stock["GPU A1"] = 4
    world.state.create_hang_after_create_s = 3
    world.state.outage = {"GET /v2/pods"}
    prov = world.provisioner(client_timeout_s=1, rounds=1)
    with pytest.raises(ProvisionFailed) as exc:
        await prov.fallback()
    assert exc.value.code == EXIT_LEAKED and len(world.state.pods) == 1
    await prov.client.aclose()


async def test_an_api_that_is_down_is_not_no_capacity(world: World) -> None:
    world.state.stock["GPU A1"] = 4
    world.state.outage = {"POST /v2/pods"}
    prov = world.provisioner(rounds=3)
    with pytest.raises(ProvisionFailed) as exc:
        await prov.fallback()
    assert exc.value.code == EXIT_FATAL and "API failing" in exc.value.message
    assert world.state.pods == {}
    assert not [s for s in world.sleeps if s >= 60]  # no 10-minute wait for an outage
    await prov.client.aclose()


async def test_resume_whose_start_answers_500_is_stopped_again(world: World) -> None:
    old = world.state.add_stopped_pod("pod-console-kind-a", "GPU A1")
    world.state.start_5xx_after_start = 5
    prov = world.provisioner()
    lp = prov.profiles[0]
    with pytest.raises(ProvisionFailed) as exc:
        await prov.resume(old, lp)
    assert exc.value.code == EXIT_FATAL and "stopped again" in exc.value.message
    starts = [x for x in world.state.log if x[1] == f"/v2/pods/{old}/action"]
    assert len(starts) == 2  # one start (never repeated), one stop
    assert world.state.pods[old]["status"] == "EXITED" and world.running() == []
    assert ledger(world).open_entries() == []
    await prov.client.aclose()


async def test_resume_when_nothing_answers_is_a_loud_report(world: World) -> None:
    old = world.state.add_stopped_pod("pod-console-kind-a", "GPU A1")
    world.state.outage = {"POST /v2/pods/"}
    prov = world.provisioner()
    with pytest.raises(ProvisionFailed) as exc:
        await prov.resume(old, prov.profiles[0])
    assert exc.value.code == EXIT_LEAKED and old in exc.value.message
    assert "may be billing" in exc.value.message
    assert [e.pod_id for e in ledger(world).open_entries()] == [old]
    await prov.client.aclose()


async def test_a_progress_callback_that_raises_cannot_skip_the_delete(tmp_path: Path) -> None:
    # What Escape did: the closed dialog raised on the next progress line, and the
    # cleanup's own progress line raised before its DELETE.
    w = World(tmp_path, bad_start=True)
    w.server.start()
    try:
        w.state.stock["GPU A1"] = 2

        def gone(*_a) -> None:
            raise LookupError("NoMatches: '#pstep'")

        prov = w.provisioner(health_wait_s=8)
        prov.progress = gone
        with pytest.raises(ProvisionFailed) as exc:
            await prov.fallback()
        assert exc.value.code == EXIT_UNHEALTHY
        assert w.running() == [] and ledger(w).open_entries() == []
        await prov.client.aclose()
    finally:
        w.server.stop()
        w.hosts.stop_all()


def _bringing_up(w: World) -> bool:
    """The supervisor runs on the pod and its slot is starting (60 s, ``slow_world``)."""
    return any(line.startswith("slots:") for line in w.lines)


async def test_cancelling_bring_up_terminates_the_new_pod(slow_world: World) -> None:
    w = slow_world
    w.state.stock["GPU A1"] = 2
    prov = w.provisioner(health_wait_s=120)
    task = asyncio.create_task(prov.fallback())
    assert await held_within(lambda: bool(w.running()), 60)
    assert await held_within(lambda: _bringing_up(w), 60)  # well inside the bring-up
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert w.running() == []
    assert [p["status"] for p in w.state.pods.values()] == ["TERMINATED"]
    assert ledger(w).open_entries() == []
    await prov.client.aclose()


async def test_cancelling_a_resume_stops_the_pod(slow_world: World) -> None:
    w = slow_world
    old = w.state.add_stopped_pod("pod-console-kind-a", "GPU A1")
    prov = w.provisioner(health_wait_s=120)
    task = asyncio.create_task(prov.resume(old, prov.profiles[0]))
    assert await held_within(lambda: w.state.pods[old]["status"] == "RUNNING", 30)
    assert await held_within(lambda: _bringing_up(w), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert w.state.pods[old]["status"] == "EXITED" and w.running() == []
    await prov.client.aclose()


async def test_a_pod_that_goes_away_while_waiting_for_ssh_fails_fast(world: World) -> None:
    world.state.stock["GPU A1"] = 2
    world.state.host_factory = None  # RUNNING, but SSH never comes

    def vanish() -> None:
        deadline = time.time() + 60
        # gone while the provisioner waits for its SSH (and has said so)
        while time.time() < deadline and not any(line.startswith("wait ssh:")
                                                 for line in world.lines):
            time.sleep(0.05)
        with world.state.lock:
            for p in world.state.pods.values():
                world.state.set_status(p, "TERMINATED")

    threading.Thread(target=vanish, daemon=True).start()
    prov = world.provisioner(ssh_wait_s=600)
    t0 = time.monotonic()
    with pytest.raises(ProvisionFailed) as exc:
        await prov.fallback()
    assert time.monotonic() - t0 < 60
    assert "gone" in exc.value.message or "TERMINATED" in exc.value.message
    assert any(line.startswith("wait ssh:") for line in world.lines)  # said while waiting
    await prov.client.aclose()


# -- the CLI, as cron runs it --------------------------------------------------------

def _cli_env(w: World, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {w.profiles_dir}\nstate_dir: {tmp_path / 'state'}\n"
                   f"pod:\n  ssh_key: {w.hosts.client_key()}\n"
                   f"  agent_dir: {w.root / 'cli agent dir'}\n")  # a space: quoted
    env = dict(os.environ, RUNPOD_API_KEY=KEY, RUNPOD_API_BASE=w.server.base_url,
               PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    env.pop("POD_CONSOLE_STATE_DIR", None)
    return cfg, env


def _up(cfg: Path, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "console.cli", "up", "--config", str(cfg),
                             "--rounds", "1", "--round-wait", "0", "--health-wait", "300",
                             "--no-resume", *extra], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_created(w: World, proc: subprocess.Popen[str], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if w.running() and (w.root / "pods").exists():
            return
        time.sleep(0.1)
    raise AssertionError("no pod was created")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_up_interrupted_by_a_signal_terminates_what_it_created(
        slow_world: World, tmp_path: Path, sig: signal.Signals) -> None:
    w = slow_world
    w.state.stock["GPU A1"] = 2
    cfg, env = _cli_env(w, tmp_path)
    proc = _up(cfg, env)
    try:
        _wait_created(w, proc)
        time.sleep(1.0)
        # a second up/down meanwhile is refused: it would sweep this one's pod
        r = subprocess.run([sys.executable, "-m", "console.cli", "down", "--config",
                            str(cfg)], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 3 and "another pod-console up/down" in r.stderr
        os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == EXIT_INTERRUPTED, out + err
    assert f"{sig.name} received" in out and "interrupted" in err
    assert w.running() == []
    audit = [json.loads(x) for x in (tmp_path / "state" / "audit.jsonl").read_text()
             .splitlines()]
    assert [(a["action"], a["result"]) for a in audit] == [("up", "started"),
                                                          ("up", "interrupted")]
    assert Ledger(tmp_path / "state" / "pods.jsonl").open_entries() == []


def test_kill_9_leaves_the_pod_named_and_down_terminates_it(slow_world: World,
                                                            tmp_path: Path) -> None:
    w = slow_world
    w.state.stock["GPU A1"] = 2
    cfg, env = _cli_env(w, tmp_path)
    proc = _up(cfg, env)
    try:
        _wait_created(w, proc)
        time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    [pod] = w.running()
    [entry] = Ledger(tmp_path / "state" / "pods.jsonl").open_entries()
    assert entry.name and entry.name.startswith("pod-console-")
    # killed after the provider made the pod: the ledger has its id, or (killed between
    # the provider's answer and the ledger's next line, as a loaded CI machine did) the
    # name it was asked for, which ``down`` looks up
    assert entry.pod_id in (pod, None), entry
    assert entry.pod_id == pod or w.state.pods[pod]["name"] == entry.name, entry
    r = subprocess.run([sys.executable, "-m", "console.cli", "down", "--config", str(cfg)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert f"leftover: terminated {pod}" in r.stderr, r.stdout + r.stderr
    assert w.running() == []
    assert Ledger(tmp_path / "state" / "pods.jsonl").open_entries() == []


def test_up_with_an_unwritable_audit_log_creates_nothing(world: World,
                                                         tmp_path: Path) -> None:
    world.state.stock["GPU A1"] = 2
    cfg, env = _cli_env(world, tmp_path)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "audit.jsonl").symlink_to("/dev/full")  # ENOSPC on every write
    r = subprocess.run([sys.executable, "-m", "console.cli", "up", "--config", str(cfg),
                        "--rounds", "1"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == EXIT_FATAL and "audit log cannot be written" in r.stderr
    assert "Traceback" not in r.stderr and world.state.pods == {}


def test_down_on_a_full_disk_still_stops_and_says_the_record_is_lost(world: World,
                                                                    tmp_path: Path) -> None:
    pod = world.state.add_stopped_pod("pod-console-kind-a", "GPU A1")
    world.state.set_status(world.state.pods[pod], "RUNNING")
    cfg, env = _cli_env(world, tmp_path)
    cfg.write_text(cfg.read_text() + f"  runpod_id: {pod}\n")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "audit.jsonl").symlink_to("/dev/full")
    r = subprocess.run([sys.executable, "-m", "console.cli", "down", "--config", str(cfg)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "stopped" in r.stdout, r.stdout + r.stderr
    assert "AUDIT RECORD LOST" in r.stderr and "Traceback" not in r.stderr
    assert world.state.pods[pod]["status"] == "EXITED"
