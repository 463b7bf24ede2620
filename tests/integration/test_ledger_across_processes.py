"""The ledger once more than one run or process touches it (issue 31, findings 1-5).

Real processes side by side — a cron ``up``, a ``down``, and the console's ``f`` (the
provisioner's registry handler, run in this process as the console runs it) — against
the RunPod emulator made to misbehave: a lost create whose lookup fails, a create and a
lookup that hang, a disk that will not take the ``kept`` record, a malformed ledger line.
Each created pod is a real SSH host running the real agent.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.operations import ledger as ledger_mod
from console.operations.audit import write_record
from console.operations.ledger import Ledger
from console.operations.provision import (
    EXIT_FATAL,
    EXIT_INTERRUPTED,
    EXIT_LEAKED,
    ProvisionFailed,
)
from tests.conftest import REPO
from tests.support import sshd
from tests.support.emulated_pods import KEY, World
from tests.support.waits import held_by

pytestmark = pytest.mark.skipif(not sshd.available() and not os.environ.get("CI"),
                                reason="openssh-server not installed")


def creates(w: World) -> int:
    return sum(1 for m, p, _ in w.state.log if m == "POST" and p == "/v2/pods")


def _cli_env(w: World, tmp_path: Path, extra: str = "") -> tuple[Path, dict[str, str]]:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {w.profiles_dir}\nstate_dir: {tmp_path / 'state'}\n"
                   f"pod:\n  ssh_key: {w.hosts.client_key()}\n"
                   f"  agent_dir: {w.root / 'cli-agent'}\n" + extra)
    env = dict(os.environ, RUNPOD_API_KEY=KEY, RUNPOD_API_BASE=w.server.base_url,
               PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    env.pop("POD_CONSOLE_STATE_DIR", None)
    env.pop("POD_CONSOLE_CONTEXT", None)
    return cfg, env


def _cli(cfg: Path, env: dict[str, str], *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "console.cli", *argv, "--config", str(cfg)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _up(cfg: Path, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    return _cli(cfg, env, "up", "--rounds", "1", "--round-wait", "0", "--health-wait", "300",
                "--no-resume", *extra)


def _run(cfg: Path, env: dict[str, str], *argv: str, timeout: float = 180
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console.cli", *argv, "--config", str(cfg)],
                          env=env, capture_output=True, text=True, timeout=timeout)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)


def _running_pod(w: World, name: str) -> str:
    pid = w.state.add_stopped_pod(name, "GPU A1")
    w.state.set_status(w.state.pods[pid], "RUNNING")
    return pid


# -- 1: a pod the console follows is never swept ----------------------------------------

async def test_a_pod_whose_kept_record_cannot_be_written_is_not_followed(
        world: World, monkeypatch) -> None:
    """The issue's case: the disk takes ``created`` and then refuses ``kept``. The
    console followed the pod anyway, and the evening ``down`` terminated it."""
    world.state.stock["GPU A1"] = 2
    real = Ledger.record

    def full_disk_at_kept(self: Ledger, event: str, **fields) -> None:
        if event == "kept":  # ENOSPC for this record, as a full disk answers
            write_record(Path("/dev/full"), json.dumps({"event": event, **fields}))
        real(self, event, **fields)

    monkeypatch.setattr(ledger_mod.Ledger, "record", full_disk_at_kept)
    followed: list[str] = []

    async def on_ready(res) -> None:
        followed.append(res.pod.id)

    prov = world.provisioner()
    prov.on_ready = on_ready
    with pytest.raises(ProvisionFailed) as exc:
        await prov.fallback()
    await prov.client.aclose()
    assert exc.value.code == EXIT_FATAL and "could NOT be recorded as kept" in exc.value.message
    assert followed == [] and prov.pod_id is None  # the console does not follow it
    assert world.running() == []  # nor leave it billing for a sweep to find
    assert not (world.root / "state" / "current_pod.json").exists()
    assert any("CANNOT RECORD" in line for line in world.lines)


def test_a_sweep_never_terminates_the_current_pod_of_any_context(world: World,
                                                                 tmp_path: Path) -> None:
    w = world
    cfg, env = _cli_env(w, tmp_path, "contexts:\n  a: {}\n  b: {}\n")
    state = tmp_path / "state"
    adopted_by_b = _running_pod(w, "pod-console-b")   # context b's current pod
    own = _running_pod(w, "pod-console-a")            # context a's own current pod
    leftover = _running_pod(w, "pod-console-x")       # nobody's: a real leftover
    a_ledger = Ledger(state / "contexts" / "a" / "pods.jsonl")
    for i, pid in enumerate((adopted_by_b, own, leftover)):
        a_ledger.record("create-requested", name=f"n{i}")
        a_ledger.record("created", name=f"n{i}", pod=pid, cost=2.0)
    for ctx, pid in (("b", adopted_by_b), ("a", own)):
        (state / "contexts" / ctx).mkdir(parents=True, exist_ok=True)
        (state / "contexts" / ctx / "current_pod.json").write_text(
            json.dumps({"pod_id": pid, "host": "127.0.0.1"}))
    r = _run(cfg, env, "down", "--context", "a")
    assert r.returncode == 0, r.stdout + r.stderr
    assert w.state.pods[adopted_by_b]["status"] == "RUNNING", r.stderr  # was terminated
    assert w.state.pods[own]["status"] == "EXITED"  # stopped as a's pod, volume kept
    assert w.state.pods[leftover]["status"] == "TERMINATED"
    assert f"kept {adopted_by_b}" in r.stderr and f"kept {own}" in r.stderr
    assert a_ledger.open_entries() == []


# -- 2: while a create's outcome is unknown, nothing creates ----------------------------

async def test_an_unknown_create_blocks_every_later_create(world: World,
                                                           tmp_path: Path) -> None:
    w = world
    w.state.stock["GPU A1"] = 4
    w.state.create_5xx_after_create = 1
    w.state.outage = {"GET /v2/pods"}  # the lookup by name fails, run after run
    cfg, env = _cli_env(w, tmp_path)
    # each failed lookup surfaces at once: the retries' own backoff (30 s a run) is not
    # what this test is about (tests/unit/test_runpod_retries.py is)
    env["RUNPOD_API_RETRIES"] = "0"
    first = await asyncio.to_thread(_run, cfg, env, "up", "--rounds", "1", "--no-resume")
    assert first.returncode == EXIT_LEAKED, first.stdout + first.stderr
    [entry] = Ledger(tmp_path / "state" / "pods.jsonl").open_entries()
    assert entry.name and entry.name in first.stderr and creates(w) == 1
    # the next cron run: it cannot check the name either, and must not create
    second = await asyncio.to_thread(_run, cfg, env, "up", "--rounds", "1", "--no-resume")
    assert second.returncode == EXIT_LEAKED, second.stdout + second.stderr
    assert "not creating another" in second.stderr and entry.name in second.stderr
    assert creates(w) == 1, "a second pod was created while the first was unknown"
    # the console's f: the same
    prov = w.provisioner()
    out = await prov.fallback_action(lambda *a: None)
    assert not out.ok and "not creating another" in out.message and creates(w) == 1
    await prov.client.aclose()
    # the API answers again: the next down finds the pod by its name and terminates it
    w.state.outage = set()
    r = await asyncio.to_thread(_run, cfg, env, "down")
    assert f"({entry.name}, left over" in r.stderr, r.stdout + r.stderr
    assert w.running() == [] and Ledger(tmp_path / "state" / "pods.jsonl").open_entries() == []


# -- 3: one lock for every process that creates, starts, stops or sweeps ------------------

async def test_the_consoles_f_and_a_cron_up_or_down_never_run_at_once(
        slow_world: World, tmp_path: Path) -> None:
    w = slow_world
    w.state.stock["GPU A1"] = 4
    cfg, env = _cli_env(w, tmp_path)
    progress: list[str] = []

    def said(step: str, fraction: float | None, message: str) -> None:
        progress.append(f"{step}: {message}")

    # a cron up is bringing its pod up (a 60 s slot start): the console's f is refused
    up = _up(cfg, env)
    try:
        await asyncio.to_thread(held_by, lambda: bool(w.running()), "a pod running", 90,
                                up)
        [cron_pod] = w.running()
        prov = w.provisioner()
        out = await prov.fallback_action(said)
        await prov.client.aclose()
        assert not out.ok and "another pod-console up/down" in out.message, out.message
        assert w.running() == [cron_pod] and len(w.state.pods) == 1  # not swept, no 2nd
        os.kill(up.pid, signal.SIGTERM)
        _, err = await asyncio.to_thread(up.communicate, timeout=120)
        assert up.returncode == EXIT_INTERRUPTED, err
    finally:
        _stop(up)
    assert w.running() == []
    # the console's f is bringing a pod up: the cron down is refused, the pod untouched
    prov = w.provisioner(health_wait_s=120)
    task = asyncio.create_task(prov.fallback_action(said))
    try:
        await asyncio.to_thread(held_by, lambda: bool(w.running()), "a pod running", 90)
        [console_pod] = w.running()
        r = await asyncio.to_thread(_run, cfg, env, "down", timeout=120)
        assert r.returncode == EXIT_FATAL and "another pod-console up/down" in r.stderr, \
            r.stdout + r.stderr
        assert "console f" in r.stderr  # who holds it
        assert w.running() == [console_pod] and not task.done()
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await prov.client.aclose()
    assert w.running() == []


# -- 4: SIGTERM while the create hangs ---------------------------------------------------

def test_sigterm_during_a_hanging_create_says_the_pod_may_bill_before_the_stop_timeout(
        world: World, tmp_path: Path) -> None:
    w = world
    w.state.stock["GPU A1"] = 2
    w.state.create_hang_after_create_s = 300  # the pod exists, the answer never comes
    w.state.hang = {"GET /v2/pods": 300}  # and the lookup by name hangs too
    cfg, env = _cli_env(w, tmp_path)
    # a service manager's stop timeout shorter than systemd's default 90 s, given to the
    # cleanup as ``--cleanup-wait`` (the default 45 s is the same bound, only longer to sit
    # through): the hung lookup is given up on at 5 s
    up = _up(cfg, env, "--cleanup-wait", "5")
    try:
        held_by(lambda: bool(w.state.pods), "the create reaching the provider", 90, alive=up)
        [pod] = w.state.pods
        time.sleep(0.5)  # the create is in flight, well inside the client's timeout
        t0 = time.monotonic()
        os.kill(up.pid, signal.SIGTERM)
        out, err = up.communicate(timeout=100)  # systemd's default stop timeout is 90 s
        took = time.monotonic() - t0
    finally:
        _stop(up)
    assert took < 90, took
    assert "no answer within the 5 s an interrupted run has to clean up" in out + err, out + err
    # the pod is alive: "what this run created was terminated" (6) would be false
    assert w.state.pods[pod]["status"] == "RUNNING"
    assert up.returncode == EXIT_LEAKED, out + err
    name = w.state.pods[pod]["name"]
    assert "MAY STILL BE BILLING" in err and name in err
    [entry] = Ledger(tmp_path / "state" / "pods.jsonl").open_entries()
    assert entry.name == name
    audit = [json.loads(x) for x in (tmp_path / "state" / "audit.jsonl").read_text()
             .splitlines()]
    assert audit[-1]["result"] == "interrupted" and audit[-1]["leaked"]
    # the API answers again: the next down terminates it
    w.state.hang = {}
    r = _run(cfg, env, "down")
    assert f"terminated {pod}" in r.stderr, r.stdout + r.stderr
    assert w.running() == []


# -- 5: a malformed ledger line --------------------------------------------------------

def test_a_malformed_ledger_line_is_said_and_skipped_and_the_pod_still_stops(
        world: World, tmp_path: Path) -> None:
    w = world
    pod = _running_pod(w, "pod-console-kind-a")
    cfg, env = _cli_env(w, tmp_path, f"  runpod_id: {pod}\n")
    (tmp_path / "state").mkdir()
    # the first stopped every down (ValueError in open_entries, exit 3, pod billing)
    (tmp_path / "state" / "pods.jsonl").write_text(
        '{"t": "abc", "event": "create-requested", "name": "x"}\nnull\n[1]\n')
    r = _run(cfg, env, "down")
    assert r.returncode == 0, r.stdout + r.stderr
    assert w.state.pods[pod]["status"] == "EXITED"
    assert "line 1 skipped" in r.stderr and "line 3 skipped" in r.stderr
    assert "Traceback" not in r.stderr
    again = _run(cfg, env, "down")  # said once, not at every cron run
    assert again.returncode == 0 and "skipped" not in again.stderr, again.stderr
