"""Hostile inputs are bounded and answered with a clear error; nothing crashes or hangs.

Metric servers that never end, drip, lie about their size or bomb; expositions with
100k foreign series or NaN; YAML that recurses, nests or overflows; a FIFO as a
file; a full disk under the audit log; agent arguments that are paths or absurd.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.model.alerts import Alert, notify
from console.operations import audit as audit_mod
from console.operations.audit import AuditError, AuditLog
from console.operations.registry import OperationRegistry, OperationSpec, Outcome
from console.sources.collect import exposition, figures
from console.sources.remote import agent_command
from pod_agent.actions import read_recorded, valid_action_id
from tests.conftest import PROFILES, REPO
from tests.support.rawtcp import RawServer
from tests.support.waits import until_true

FIX = REPO / "tests" / "fixtures" / "vllm-0.32.0-cpu" / "plain" / "metrics-after-load.txt"


# -- hostile metric servers ------------------------------------------------------------

class Hostile(RawServer):
    """Answers every connection the same bad way."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        super().__init__()

    def handle(self, conn: socket.socket) -> None:
        conn.recv(65536)
        m = self.mode
        if m == "endless-chunked":
            conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            chunk = b"# " + b"x" * 65530 + b"\n"
            while not self.stop.is_set():
                conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        elif m == "drip":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            while not self.stop.is_set():
                conn.sendall(b"#")
                time.sleep(0.2)
        elif m == "huge":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 200000000\r\n\r\n")
            block = b"# " + b"y" * 65533 + b"\n"
            for _ in range(3100):
                if self.stop.is_set():
                    break
                conn.sendall(block)
        elif m == "gzip-bomb":
            import gzip

            body = gzip.compress(b"\0" * (50 * 1024 * 1024))
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body) + body)


def _metrics_cli(url: str, timeout: float) -> tuple[int, str, float, int]:
    """Run ``pod-console metrics URL --json``; (rc, stderr, seconds, max RSS in KiB)."""
    # VmHWM, not getrusage(): Linux carries ru_maxrss across fork and exec, so a child
    # of a large pytest process would report the parent's peak, not its own.
    code = ("import sys\nfrom console.cli import main\n"
            f"rc = main(['metrics', {url!r}, '--json', '--timeout', '{timeout}'])\n"
            "hwm = [ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')]\n"
            "print('RSS', hwm[0].split()[1], file=sys.stderr)\nsys.exit(rc)\n")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=REPO)
    took = time.monotonic() - t0
    rss = int(r.stderr.split("RSS ")[-1].split()[0])
    return r.returncode, r.stderr, took, rss


@pytest.mark.parametrize("mode", ["endless-chunked", "drip", "huge", "gzip-bomb"])
def test_metrics_url_is_bounded_in_time_and_memory(mode: str) -> None:
    srv = Hostile(mode)
    try:
        rc, err, took, rss_kib = _metrics_cli(f"http://127.0.0.1:{srv.port}/metrics", 3)
    finally:
        srv.close()
    assert rc == 1 and "Traceback" not in err, err
    assert took < 3 + 10  # the deadline plus interpreter start-up, generous under load
    assert rss_kib < 200 * 1024, f"{rss_kib} KiB"


def test_metrics_of_a_device_or_fifo_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for src in ("/dev/zero", str(fifo)):
        r = subprocess.run([sys.executable, "-m", "console.cli", "metrics", src, "--json"],
                           capture_output=True, text=True, timeout=30, cwd=REPO)
        assert r.returncode == 1 and "not a regular file" in r.stderr


# -- expositions -------------------------------------------------------------------------

def test_nan_and_inf_samples_are_undefined_not_a_crash(tmp_path: Path) -> None:
    text = FIX.read_text()
    bad = []
    for line in text.splitlines():
        if line.startswith(("vllm:generation_tokens_total{", "vllm:kv_cache_usage_perc{",
                            "vllm:num_preemptions_total{")):
            name, _, _ = line.rpartition(" ")
            line = name + (" NaN" if "kv_cache" in line else " +Inf")
        bad.append(line)
    f = tmp_path / "m.txt"
    f.write_text("\n".join(bad) + "\n")
    r = subprocess.run([sys.executable, "-m", "console.cli", "metrics", str(f), "--json"],
                       capture_output=True, text=True, timeout=30, cwd=REPO)
    assert r.returncode == 0, r.stderr
    out = next(iter(json.loads(r.stdout).values()))
    assert out["kv_cache_usage"] is None and out["generation_tokens"] is None
    assert out["preemptions"] is None


def _many_models(n_models: int, per_model: int = 4) -> str:
    lines = []
    for m in range(n_models):
        for i in range(per_model):
            lines.append(f'vllm:num_requests_running{{engine="{i}",model_name="m{m}"}} 1')
    lines.append('vllm:kv_cache_usage_perc{engine="0",model_name="mine"} 0.25')
    lines.append('vllm:num_requests_running{engine="0",model_name="mine"} 3')
    return "\n".join(lines) + "\n"


def test_one_models_figures_cost_linear_in_the_series(monkeypatch) -> None:
    # 100k foreign series froze the console: every figure rescanned every series per
    # model. Count the label look-ups instead of timing them.
    calls = 0
    real = exposition.label

    def counting(labels, key):
        nonlocal calls
        calls += 1
        return real(labels, key)

    exp = exposition.parse(_many_models(5000))
    series = sum(len(v) for v in exp.samples.values())
    monkeypatch.setattr(exposition, "label", counting)
    monkeypatch.setattr(figures, "label", counting)
    out = figures.compute(exp, None, None, only="mine")
    assert out["mine"].running == 3 and out["mine"].kv_cache_usage == 0.25
    assert calls <= 4 * series, (calls, series)


# -- YAML that attacks the loader ------------------------------------------------------------

HOSTILE_YAML = {
    "recursive-alias.yaml": "slots: &s {A: *s}\n",
    "deep.yaml": "slots: " + "[" * 1000 + "]" * 1000 + "\n",
    # libyaml's C composer recursed until the C stack ran out: a segfault, not a problem
    "deeper-than-the-c-stack.yaml": "slots: " + "[" * 120_000 + "]" * 120_000 + "\n",
    "long-int.yaml": "gpu_count: " + "9" * 5000 + "\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_YAML))
def test_hostile_profiles_are_problems_with_a_line(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text(HOSTILE_YAML[name])
    r = subprocess.run([sys.executable, "-m", "console.cli", "profile", "check",
                        str(tmp_path / name)], capture_output=True, text=True, timeout=60,
                       cwd=REPO)
    assert r.returncode == 1 and "Traceback" not in r.stderr + r.stdout
    assert f"{name}:1:" in r.stdout + r.stderr
    # the agent's own loader: exit 2 (bad input), never 1 ("a check failed")
    r = subprocess.run([sys.executable, "-m", "pod_agent", "check-host", "--json",
                        "--profile", str(tmp_path / name)], capture_output=True, text=True,
                       timeout=60, cwd=REPO)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_a_fifo_as_profile_or_config_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "10-fifo.yaml"
    os.mkfifo(fifo)
    r = subprocess.run([sys.executable, "-m", "console.cli", "profile", "check", str(fifo)],
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert r.returncode == 1 and "not a regular file" in r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "console.cli", "status", "--json", "--config",
                        str(fifo)], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert r.returncode != 0 and "not a regular file" in r.stderr
    assert "Traceback" not in r.stderr


# -- the audit log on a full disk ------------------------------------------------------------

def test_a_short_write_is_cut_back_and_said(tmp_path: Path, monkeypatch) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    log.append("first", {}, "ok")
    before = (tmp_path / "audit.jsonl").read_bytes()
    real_write = os.write
    state = {"n": 0}

    def short_write(fd: int, data: bytes) -> int:
        state["n"] += 1
        if state["n"] == 1:
            return real_write(fd, data[:124])  # the kernel wrote part of it
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(audit_mod.os, "write", short_write)
    with pytest.raises(AuditError, match="No space left"):
        log.append("second", {"x": 1}, "started")
    monkeypatch.undo()
    assert (tmp_path / "audit.jsonl").read_bytes() == before  # no half record
    log.append("third", {}, "ok")
    assert [r["action"] for r in log.records()] == ["first", "third"]


async def test_no_dangerous_action_runs_without_its_record(tmp_path: Path) -> None:
    (tmp_path / "audit.jsonl").symlink_to("/dev/full")
    reg = OperationRegistry(AuditLog(tmp_path / "audit.jsonl"))
    ran = []

    async def handler(args, progress) -> Outcome:
        ran.append(1)
        return Outcome(True, "done")

    reg.register(OperationSpec("stop", "s", "Stop", "stop it", dangerous=True), handler)
    out = await reg.invoke("stop")
    assert not out.ok and "audit log cannot be written" in out.message and ran == []


async def test_a_cancelled_action_still_gets_its_end_record(tmp_path: Path) -> None:
    reg = OperationRegistry(AuditLog(tmp_path / "audit.jsonl"))

    async def forever(args, progress) -> Outcome:
        await asyncio.sleep(3600)
        return Outcome(True, "never")

    reg.register(OperationSpec("fallback", "f", "Fallback", "new pod", dangerous=True), forever)
    task = asyncio.create_task(reg.invoke("fallback"))
    # cancelled once it runs (its start is on record), however long that takes
    await until_true(lambda: [r["result"] for r in reg.audit.records()] == ["started"],
                     "the operation started")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [r["result"] for r in reg.audit.records()] == ["started", "cancelled"]


async def test_a_cancel_while_the_start_is_written_still_gets_its_end_record(
        tmp_path: Path) -> None:
    # the race a loaded CI machine hit: the start record reached the disk, the cancel
    # landed before its write returned, and no end record followed
    import threading

    gate = threading.Event()
    writing = threading.Event()

    class SlowStart(AuditLog):
        def append(self, operation_id: str, args: dict, result: str, **kw: object) -> None:
            super().append(operation_id, args, result, **kw)
            if result == "started":
                writing.set()
                gate.wait(30)  # the write's fsync, held

    reg = OperationRegistry(SlowStart(tmp_path / "audit.jsonl"))
    ran = []

    async def handler(args, progress) -> Outcome:
        ran.append(1)
        return Outcome(True, "done")

    reg.register(OperationSpec("fallback", "f", "Fallback", "new pod", dangerous=True), handler)
    task = asyncio.create_task(reg.invoke("fallback"))
    await until_true(writing.is_set, "the start record written, its write not returned")
    task.cancel()
    await asyncio.sleep(0)  # the cancel is delivered while the write is held
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [r["result"] for r in reg.audit.records()] == ["started", "cancelled"]
    assert ran == []  # a cancelled operation never ran


# -- the agent's arguments -----------------------------------------------------------------

def _agent(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, POD_AGENT_HOME=str(tmp_path / "home"))
    return subprocess.run([sys.executable, "-m", "pod_agent", *args], capture_output=True,
                          text=True, timeout=60, env=env, cwd=REPO)


@pytest.mark.parametrize("value", ["1e308", "nan", "-1", "inf"])
def test_absurd_memory_floors_are_refused(tmp_path: Path, value: str) -> None:
    r = _agent(["watchdog", "mem-floor", value], tmp_path)
    # a JSON error event (the console reads those), before anything reaches the supervisor
    last = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 2 and last["kind"] == "error" and "from 0 to" in last["message"]


def test_action_ids_never_name_a_path(tmp_path: Path) -> None:
    for bad in ("../..", "../../etc/passwd", "a/b", "", ".hidden", "x" * 200):
        assert not valid_action_id(bad)
        assert read_recorded(bad) == []
    assert valid_action_id("rebalance-0a1b2c3d4e5f")
    r = _agent(["attach", "../.."], tmp_path)
    assert r.returncode == 2 and "names a file" in r.stderr
    r = _agent(["restart", "FLASH", "--action-id", "../../x"], tmp_path)
    assert r.returncode == 2


def test_agent_dir_is_quoted_into_the_remote_shell(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    crafted = f"{tmp_path}/a b; touch {marker}; echo"
    cmd = agent_command(crafted) + " --version"
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60,
                       cwd=REPO)
    assert r.returncode == 0 and "pod-agent" in r.stdout, r.stderr
    assert not marker.exists()


# -- a webhook that drips ------------------------------------------------------------------

async def test_a_dripping_webhook_is_cut_at_its_deadline() -> None:
    srv = Hostile("drip")
    try:
        t0 = time.monotonic()
        err = await notify(f"http://127.0.0.1:{srv.port}/hook",
                           [Alert("k", "crit", "t", "d", time.time())], [], "test",
                           timeout_s=1.0)
        took = time.monotonic() - t0
    finally:
        srv.close()
    assert err is not None and "no answer within 1 s" in err
    assert took < 5


def test_shipped_profiles_still_load() -> None:
    r = subprocess.run([sys.executable, "-m", "console.cli", "profile", "check",
                        *map(str, sorted(PROFILES.glob("*.yaml")))], capture_output=True,
                       text=True, timeout=60, cwd=REPO)
    assert r.returncode == 0, r.stdout + r.stderr


async def test_an_exposition_is_parsed_off_the_event_loop(monkeypatch) -> None:
    # 100k series took seconds to parse on the UI thread: keys and paints froze
    import threading

    from console.sources.collect import slot as vllm
    from console.sources.collect.http import HttpClient
    from console.sources.collect.targets import SlotTarget

    seen: list[str] = []
    real_parse = vllm.parse

    def recording(text: str, *args):
        seen.append(threading.current_thread().name)
        return real_parse(text, *args)

    monkeypatch.setattr(vllm, "parse", recording)

    # a large one (here the capture and 20k series of other models, ~1.4 MB) goes to a
    # thread; vLLM's own, as a slot asks for it (~22 KB), is parsed where it arrives
    big = FIX.read_bytes() + b"".join(
        b'vllm:num_requests_running{model_name="other-%d"} 1\n' % i for i in range(20000))
    small = FIX.read_bytes()[:vllm.INLINE_PARSE_CHARS // 2]
    body = big

    class Metrics(RawServer):
        def handle(self, conn) -> None:
            while conn.recv(65536):
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s"
                             % (len(body), body))

    srv = Metrics()
    client = HttpClient()
    try:
        target = SlotTarget("MAIN", "tiny-main", srv.port, f"http://127.0.0.1:{srv.port}")
        probe = await vllm.probe_slot(client, target, 5.0)
        assert len(big) > vllm.INLINE_PARSE_CHARS
        body = small
        probe_small = await vllm.probe_slot(client, target, 5.0)
    finally:
        await client.aclose()
        srv.close()
    assert probe.exposition is not None and probe_small.exposition is not None
    assert len(seen) == 2
    assert seen[0] != threading.main_thread().name
    assert seen[1] == threading.main_thread().name


async def test_a_wall_on_a_full_disk_still_refuses_without_crashing(tmp_path: Path) -> None:
    (tmp_path / "audit.jsonl").symlink_to("/dev/full")
    reg = OperationRegistry(AuditLog(tmp_path / "audit.jsonl"), read_only=True)

    async def handler(args, progress) -> Outcome:
        raise AssertionError("must not run")

    reg.register(OperationSpec("stop", "s", "Stop", "stop it", dangerous=True), handler)
    out = await reg.invoke("stop")
    assert out.state == "refused" and "AUDIT RECORD LOST" in out.message
