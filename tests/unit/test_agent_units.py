"""Pod agent pieces without a pod: host checks on stand-ins, P2P verdicts, watchdog clock."""

from __future__ import annotations

import ast
import datetime as dt
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from pod_agent import gpuinfo, watchdog
from pod_agent.events import Emitter, parse_line
from pod_agent.patches import apply_patch
from pod_agent.profile import Schedule
from tests.conftest import PROFILES, REPO

BIN = REPO / "console" / "demo" / "bin"
TEST_BIN = REPO / "tests" / "support" / "bin"
FAKETORCH = REPO / "console" / "demo" / "faketorch"
H200 = REPO / "console" / "demo" / "captures" / "nvidia-smi-h200"


def agent(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ)
    e.update({"PATH": f"{BIN}:{TEST_BIN}:{e['PATH']}", "POD_AGENT_HOME": str(tmp_path / "home")})
    e.update(env)
    return subprocess.run([sys.executable, "-m", "pod_agent", *args], capture_output=True,
                          text=True, timeout=120, env=e, cwd=REPO)


def test_parses_real_h200_captures() -> None:
    gpus = gpuinfo.parse_query_csv((H200 / "nvidia-smi-query.csv").read_text())
    assert [(g.index, g.name, g.memory_mib, g.driver) for g in gpus] == [
        (0, "NVIDIA H200", 143771, "580.159.04")]
    assert gpuinfo.parse_cuda_version((H200 / "nvidia-smi.txt").read_text()) == "13.0"
    assert gpuinfo.parse_cuda_version((H200 / "nvidia-smi-q.txt").read_text()) == "13.0"


@pytest.mark.parametrize(("cuda", "ok"), [("12.8", False), ("13.0", True), ("13.2", True)])
def test_driver_cuda_against_min_cuda(tmp_path: Path, cuda: str, ok: bool) -> None:
    r = agent(["check-host", "--json", "--profile", str(PROFILES / "10-rtx6000-2x.yaml"),
               "--disk-path", str(tmp_path)], tmp_path, FAKE_NVIDIA_SMI_GPUS="2",
              FAKE_NVIDIA_SMI_CUDA=cuda, PYTHONPATH=str(FAKETORCH), FAKE_TORCH_MODE="good",
              HF_HOME=str(tmp_path))
    rep = json.loads(r.stdout)
    check = {c["name"]: c for c in rep["checks"]}["driver_cuda"]
    assert check["ok"] is ok and check["value"] == cuda
    assert set(rep) == {"ok", "checks"}
    for c in rep["checks"]:
        assert set(c) == {"name", "ok", "value", "detail", "duration_s"}


def test_p2p_hang_exits_3_and_disables_p2p(tmp_path: Path) -> None:
    r = agent(["check-host", "--json", "--p2p-timeout", "2"], tmp_path,
              FAKE_NVIDIA_SMI_GPUS="2", PYTHONPATH=str(FAKETORCH), FAKE_TORCH_MODE="hang")
    assert r.returncode == 3
    p2p = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["p2p"]
    assert p2p["ok"] is False and p2p["value"]["verdict"] == "hung"
    assert 2 <= p2p["duration_s"] < 10
    assert "NCCL_P2P_DISABLE=1" in (tmp_path / "home" / ".env").read_text()


def test_p2p_good_writes_0_and_broken_writes_1(tmp_path: Path) -> None:
    r = agent(["check-host", "--json"], tmp_path, FAKE_NVIDIA_SMI_GPUS="2",
              PYTHONPATH=str(FAKETORCH), FAKE_TORCH_MODE="good")
    p2p = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["p2p"]
    assert p2p["ok"] is True and p2p["value"]["verdict"] == "ok"
    assert "NCCL_P2P_DISABLE=0" in (tmp_path / "home" / ".env").read_text()
    r = agent(["check-host", "--json"], tmp_path, FAKE_NVIDIA_SMI_GPUS="2",
              PYTHONPATH=str(FAKETORCH), FAKE_TORCH_MODE="bad")
    p2p = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["p2p"]
    assert r.returncode == 1 and p2p["value"]["verdict"] == "broken"
    assert "NCCL error" in p2p["detail"]
    assert "NCCL_P2P_DISABLE=1" in (tmp_path / "home" / ".env").read_text()


def test_p2p_skipped_with_one_gpu_or_no_torch(tmp_path: Path) -> None:
    r = agent(["check-host", "--json"], tmp_path, PYTHONPATH=str(FAKETORCH),
              FAKE_TORCH_MODE="good")
    p2p = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["p2p"]
    assert p2p["ok"] is None and "1 GPU" in p2p["detail"]


def test_broken_driver_fails_cleanly(tmp_path: Path) -> None:
    r = agent(["check-host", "--json"], tmp_path, FAKE_NVIDIA_SMI_FAIL="1")
    assert r.returncode == 1
    gpus = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["gpus"]
    assert gpus["ok"] is False and "couldn't communicate" in gpus["detail"]


def test_real_capture_from_the_h200_host_is_well_formed() -> None:
    rep = json.loads((H200 / "check-host-noprofile.json").read_text())
    names = [c["name"] for c in rep["checks"]]
    # captured before the gpu_health check existed: the report's shape, as it was then
    assert names == ["gpus", "driver_cuda", "p2p", "pidfd", "disk", "memory"]
    world1 = json.loads((H200 / "p2p-world1.json").read_text())
    assert world1["verdict"] == "ok" and world1["world_size"] == 1


def test_watchdog_due_and_next_stop() -> None:
    s = Schedule(timezone="Asia/Seoul", stop="18:00", days=["mon", "tue", "wed", "thu", "fri"])
    kst = dt.timezone(dt.timedelta(hours=9))
    fri_1759 = dt.datetime(2026, 11, 27, 17, 59, tzinfo=kst)
    fri_1800 = dt.datetime(2026, 11, 27, 18, 0, tzinfo=kst)
    sat = dt.datetime(2026, 11, 28, 19, 0, tzinfo=kst)
    assert not watchdog.due(s, fri_1759, None)
    assert watchdog.due(s, fri_1800, None)
    assert not watchdog.due(s, fri_1800, "2026-11-27")  # once a day
    assert not watchdog.due(s, sat, None)  # not a working day
    assert watchdog.next_stop(s, sat) == dt.datetime(2026, 11, 30, 18, 0, tzinfo=kst)
    # the same instant in UTC is judged in the profile's zone
    assert watchdog.due(s, fri_1800.astimezone(dt.UTC), None)


def test_stop_pod_uses_runpodctl(tmp_path: Path, monkeypatch) -> None:
    log = tmp_path / "calls"
    monkeypatch.setenv("PATH", f"{TEST_BIN}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_RUNPODCTL_LOG", str(log))
    ok, what = watchdog.stop_pod("abc123")
    assert ok and "stopped" in what
    assert log.read_text() == "stop pod abc123\n"
    monkeypatch.setenv("FAKE_RUNPODCTL_EXIT", "1")
    ok, what = watchdog.stop_pod("abc123")
    assert not ok and "exit 1" in what
    assert watchdog.stop_pod(None) == (False, "RUNPOD_POD_ID is not set")


def test_stop_pod_falls_back_to_rest_v2(monkeypatch) -> None:
    seen: list[tuple[str, str, bytes]] = []

    class H(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            n = int(self.headers["Content-Length"])
            seen.append((self.path, self.headers["Authorization"], self.rfile.read(n)))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"id":"abc123","status":"EXITED"}')

        def log_message(self, *a) -> None:
            pass

    srv = HTTPServer(("127.0.0.1", 0), H)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        monkeypatch.setenv("PATH", "/nonexistent")
        monkeypatch.setenv("RUNPOD_API_KEY", "pod-scoped-key")
        monkeypatch.setenv("RUNPOD_API_BASE", f"http://127.0.0.1:{srv.server_port}/v2")
        ok, what = watchdog.stop_pod("abc123")
        assert ok and "HTTP 200" in what and "pod-scoped-key" not in what
        assert seen == [("/v2/pods/abc123/action", "Bearer pod-scoped-key",
                         b'{"action": "stop"}')]
    finally:
        srv.shutdown()


def test_patch_applies_once_then_skips(tmp_path: Path) -> None:
    root = tmp_path / "site"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    patch = tmp_path / "fix.patch"
    patch.write_text("--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1,2 +1,2 @@\n def f():\n"
                     "-    return 1\n+    return 2\n")
    assert apply_patch(str(patch), str(root)).state == "applied"
    assert "return 2" in (root / "pkg" / "mod.py").read_text()
    assert apply_patch(str(patch), str(root)).state == "already"
    assert apply_patch(str(tmp_path / "nope.patch"), str(root)).state == "missing"


def test_events_roundtrip_and_garbage_becomes_log() -> None:
    import io
    buf = io.StringIO()
    Emitter(buf).progress("loading weights", 0.5, "285 s")
    ev = parse_line(buf.getvalue())
    assert ev["kind"] == "progress" and ev["fraction"] == 0.5
    assert parse_line("Traceback (most recent call last):") == {
        "kind": "log", "line": "Traceback (most recent call last):"}
    assert parse_line('{"kind": "nope"}')["kind"] == "log"


def test_agent_source_is_python_310_syntax_and_never_imports_console() -> None:
    for p in sorted((REPO / "pod_agent").glob("*.py")):
        tree = ast.parse(p.read_text(), feature_version=(3, 10))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [
                    node.module or ""]
                assert not any(n == "console" or n.startswith("console.") for n in names), p
            # asyncio.TimeoutError is not the builtin TimeoutError before 3.11
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                assert "TimeoutError" not in ast.unparse(node.type).replace(
                    "asyncio.TimeoutError", ""), p
    code = ("import sys, pod_agent.cli, pod_agent.supervisor, pod_agent.hostcheck; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('console', 'textual', 'httpx', 'asyncssh')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    assert out.stdout.strip() == "[]"
