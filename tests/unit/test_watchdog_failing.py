"""The watchdog never fails in silence (issue 42, finding 1 and item 7).

The real supervisor on the injected pod clock of ``test_watchdog_days`` (Seoul, ticks
every 30 s): a part of its tick made to raise — the traffic read (a module missing, a
parse error), the memory guard, the stop policy itself — is said within two ticks in
``status`` (``watchdog.failing``) and as the console's CRIT, logged with its traceback
once, and the evening's scheduled stop still comes on time, warned ahead. The traffic
read is run for real (an HTTP ``/metrics`` on loopback) with ``prometheus_client``
unimportable, as on a pod installed with a plain ``pip install .``."""

from __future__ import annotations

import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from console.config.settings import Settings
from console.model.alerts import evaluate
from console.model.snapshot import PodSnapshot, StopPlan
from pod_agent import stoppolicy as sp
from pod_agent import traffic
from tests.conftest import FIXTURES, PROFILES, REPO
from tests.unit.test_watchdog_days import TICK, Pod, local
from tests.unit.test_watchdog_days import pod as pod  # the fixture: one pod's volume

ERRORS = {
    "module missing": ModuleNotFoundError("No module named 'prometheus_client'"),
    "parse error": ValueError("could not convert string to float: '1.0e'"),
}


def _console_crits(pod: Pod) -> list[str]:
    """What the console makes of the agent's status now: its CRIT titles."""
    assert pod.sup is not None
    plan = StopPlan.parse(pod.status(), pod.wall)
    snap = PodSnapshot(pod_id="pod-days", status="RUNNING", started_at=pod.wall - 3600,
                       watchdog_armed=True, stop_plan=plan)
    conds = evaluate(None, snap, pod.sup.profile, Settings(profiles_dir=PROFILES), pod.wall)
    return [c.title for c in conds if c.severity == "crit"]


async def _ticks(pod: Pod, n: int) -> None:
    assert pod.sup is not None
    for _ in range(n):
        await pod.sup.watchdog_tick()
        pod.wall += TICK
        pod.mono += TICK


@pytest.mark.parametrize("what", sorted(ERRORS))
async def test_a_traffic_read_that_raises_is_said_and_the_stop_still_comes(
        pod, monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    p: Pod = pod("seoul")
    p.start(local("seoul", 0, 17, 40))
    await _ticks(p, 2)
    assert p.status()["failing"] is None and not _console_crits(p)
    exc = ERRORS[what]

    def broken(ports: dict[str, int], timeout_s: float) -> dict[str, Any]:
        raise exc

    monkeypatch.setattr("pod_agent.traffic.read_all", broken)
    failing_from = p.wall
    await _ticks(p, 2)  # within two ticks
    failing = p.status()["failing"]
    assert failing is not None and failing["ticks"] == 2
    assert failing["since"] == failing_from and type(exc).__name__ in failing["last_error"]
    crits = _console_crits(p)
    assert f"watchdog failing since 17:41: traffic: {type(exc).__name__}: {exc}" in crits
    # and `pod-console status --json` says it
    from console.commands.status_cmd import stop_json

    said = stop_json(PodSnapshot(pod_id="pod-days", stop_plan=StopPlan.parse(
        p.status(), p.wall)), p.wall)
    assert said is not None and said["watchdog_failing"] == {
        "since": "2026-11-30T17:41:00+09:00", "ticks": 2, "error": failing["last_error"]}
    stops = await p.until(local("seoul", 0, 18, 30))
    assert stops == [(local("seoul", 0, 18, 0), "schedule")]
    p.assert_warned(local("seoul", 0, 18, 0))
    # logged once with its traceback (not a traceback every tick), in the audit log
    failed = [a for a in p.audit() if a["op"] == "watchdog-tick-failed"]
    assert len(failed) == 1 and "Traceback" in failed[0]["traceback"]
    assert "broken" in failed[0]["traceback"]


async def test_a_tick_that_recovers_says_so_and_clears_the_crit(
        pod, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    p: Pod = pod("seoul")
    p.start(local("seoul", 0, 12, 0))

    def broken(ports: dict[str, int], timeout_s: float) -> dict[str, Any]:
        raise ERRORS["module missing"]

    monkeypatch.setattr("pod_agent.traffic.read_all", broken)
    await _ticks(p, 3)
    assert "Traceback" in capsys.readouterr().err  # the agent's log has it
    monkeypatch.setattr("pod_agent.traffic.read_all", p._traffic)  # the harness's slots again
    await _ticks(p, 1)
    assert p.status()["failing"] is None and not _console_crits(p)
    rec = [a for a in p.audit() if a["op"] == "watchdog-tick-recovered"]
    assert len(rec) == 1 and rec[0]["failed_ticks"] == 3


async def test_a_memory_guard_that_raises_does_not_skip_the_stop(
        pod, monkeypatch: pytest.MonkeyPatch) -> None:
    p: Pod = pod("seoul")
    p.start(local("seoul", 0, 17, 40))

    def unreadable() -> float:
        raise PermissionError(13, "Permission denied", "/proc/meminfo")

    monkeypatch.setattr("pod_agent.hostcheck.mem_available_gib", unreadable)
    await _ticks(p, 2)
    assert "memory guard: PermissionError" in p.status()["failing"]["last_error"]
    assert any(c.startswith("watchdog failing since 17:40: memory guard")
               for c in _console_crits(p))
    stops = await p.until(local("seoul", 0, 18, 30))
    assert stops == [(local("seoul", 0, 18, 0), "schedule")]
    p.assert_warned(local("seoul", 0, 18, 0))


@pytest.mark.parametrize("from_", [(17, 41), (17, 55)])
async def test_a_stop_policy_that_raises_still_stops_on_the_last_good_plan(
        pod, monkeypatch: pytest.MonkeyPatch, from_: tuple[int, int]) -> None:
    """Before the warning (the fallback warns, then stops) and after it (it stops)."""
    p: Pod = pod("seoul")
    p.start(local("seoul", 0, 17, 30))
    await p.until(local("seoul", 0, *from_) - TICK)

    def broken(*a: Any, **kw: Any) -> sp.Decision:
        raise KeyError("due_key")

    monkeypatch.setattr(sp, "decide", broken)
    await _ticks(p, 2)
    assert "stop policy: KeyError" in p.status()["failing"]["last_error"]
    stops = await p.until(local("seoul", 0, 18, 30))
    assert stops == [(local("seoul", 0, 18, 0), "schedule")]
    p.assert_warned(local("seoul", 0, 18, 0))
    await _ticks(p, 4)  # carried out once, not at every failing tick after it
    assert len(p.stops) == 1


class _Metrics(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def metrics_server():
    base = FIXTURES / "vllm-0.32.0-cpu" / "plain"
    srv = HTTPServer(("127.0.0.1", 0), _Metrics)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()

    def serve(name: str) -> int:
        _Metrics.body = (base / name).read_bytes()
        return srv.server_address[1]

    yield serve
    srv.shutdown()
    srv.server_close()
    th.join(10)


def test_the_traffic_read_needs_no_prometheus_client(
        metrics_server, monkeypatch: pytest.MonkeyPatch) -> None:
    # unimportable, as on a plain `pip install .` (None in sys.modules: ImportError)
    for name in [m for m in sys.modules if m.split(".")[0] == "prometheus_client"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.setitem(sys.modules, "prometheus_client.parser", None)
    with pytest.raises(ImportError):
        import prometheus_client  # noqa: F401
    port = metrics_server("metrics-idle.txt")
    idle = traffic.read(port, 5.0)
    port = metrics_server("metrics-after-load.txt")
    load = traffic.read(port, 5.0)
    assert idle == traffic.SlotTraffic(0.0, 0.0) and load == traffic.SlotTraffic(0.0, 18.0)
    assert traffic.active(idle, load)
    # the supervisor's own read of every slot, as a tick makes it
    assert traffic.read_all({"A": port}, 5.0) == {"A": load}


def test_the_parser_reads_what_prometheus_client_reads() -> None:
    """Every captured exposition of both engines: the same sums as the reference
    parser, where it is installed; odd lines (a quoted brace, a timestamp, NaN, a
    value that is no number) neither raise nor count."""
    parser = pytest.importorskip("prometheus_client.parser")
    files = sorted(f for f in (FIXTURES / "vllm-0.32.0-cpu").rglob("metrics-*.txt")
                   if "headers" not in f.name) + sorted(
        (FIXTURES / "sglang-0.5.23").glob("*.txt"))
    assert len(files) >= 6
    for f in files:
        text = f.read_text()
        want = [0.0, 0.0]
        for fam in parser.text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name in traffic.RUNNING:
                    want[0] += s.value
                elif s.name in traffic.FINISHED:
                    want[1] += s.value
        assert traffic.parse(text) == traffic.SlotTraffic(*want), f
    odd = ('vllm:num_requests_running{model_name="a}b\\"}"} 3 1700000000000\n'
           "vllm:request_success_total 5\n"
           'vllm:num_requests_waiting{x="1"} NaN\n'
           'vllm:num_requests_waiting{x="1"} 1.0e\n'
           'vllm:num_requests_waiting{x="1 2\n')
    assert traffic.parse(odd) == traffic.SlotTraffic(3.0, 5.0)


def _plain_install(tmp_path: Path) -> str:
    """A PYTHONPATH for a child process on which the agent's two optional modules
    (``pip install .`` without the ``agent`` extra) cannot be imported."""
    blocker = tmp_path / "blocker"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('pynvml', 'prometheus_client'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Block())\n")
    return f"{blocker}:{REPO}"


def test_check_host_names_a_missing_module_with_its_install_line(
        tmp_path: Path) -> None:
    import json

    from tests.unit.test_agent_units import agent

    profile = PROFILES / "10-rtx6000-2x.yaml"
    r = agent(["check-host", "--json", "--profile", str(profile), "--disk-path",
               str(tmp_path)], tmp_path, PYTHONPATH=_plain_install(tmp_path),
              HF_HOME=str(tmp_path))
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    mods = checks["modules"]
    assert "nvidia-ml-py" in mods["detail"]
    assert "pip install 'nvidia-ml-py>=12.535'" in mods["detail"]
    assert "prometheus-client" in mods["detail"]
    assert set(mods["value"]["missing"]) == {"nvidia-ml-py", "prometheus-client"}


@pytest.mark.realtime
def test_a_plain_install_of_the_agent_stops_an_idle_pod(tmp_path: Path) -> None:
    """``pod-agent serve`` with neither optional module importable, on a pod clock at
    ×60, its slot the demo's simulated vLLM: busy, then its traffic stops, and the idle
    stop comes, warned, with no tick failing (before: every tick raised ImportError,
    swallowed, and the pod never stopped)."""
    import json
    import subprocess
    import time

    from pod_agent import clock
    from tests.support import procs

    home, faults, log = tmp_path / "home", tmp_path / "faults", tmp_path / "runpodctl.log"
    faults.mkdir()
    port = procs.free_port()
    prof = tmp_path / "10-idle.yaml"
    prof.write_text("name: idle\ngpu_type_ids: [A]\nimage: i\nschedule:\n"
                    "  timezone: Asia/Seoul\n  start: '08:30'\n  stop: '23:00'\n"
                    "  days: [mon, tue, wed, thu, fri, sat, sun]\n"
                    "  idle_stop_after: 6m\n  warn_before: 2m\n"
                    "slots:\n  A:\n    served_model_name: a\n    hf_repo_id: o/a\n"
                    f"    port: {port}\n    gpus: [0]\n    gpu_util: 0.5\n"
                    "    max_model_len: 2048\n")
    env = dict(os.environ, POD_AGENT_HOME=str(home), RUNPOD_POD_ID="pod-plain",
               FAKE_RUNPODCTL_LOG=str(log), PYTHONPATH=_plain_install(tmp_path),
               POD_AGENT_RUN_ID="run-1", DEMO_FAULTS=str(faults), DEMO_STARTUP_S="1",
               DEMO_RATE="4", POD_CONSOLE_DEMO_PYTHON=sys.executable,
               POD_AGENT_CLOCK=clock.spec_for(local("seoul", 0, 14, 0), 60.0),
               PATH=f"{REPO / 'tests' / 'support' / 'bin'}:{os.environ.get('PATH', '')}")
    env.pop("POD_AGENT_WEBHOOK_URL", None)

    def status() -> dict[str, Any] | None:
        r = subprocess.run([sys.executable, "-m", "pod_agent", "status", "--json"], env=env,
                           capture_output=True, text=True, timeout=60, cwd=REPO)
        lines = r.stdout.strip().splitlines()
        got = json.loads(lines[-1]) if r.returncode == 0 and lines else None
        return got if got and got.get("supervisor") == "running" else None

    def wait(cond: Any, what: str, limit_s: float = 120.0) -> Any:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            got = cond()
            if got:
                return got
            time.sleep(0.3)
        raise AssertionError(f"{what}: not within {limit_s:g} s; agent log:\n"
                             + (tmp_path / "serve.log").read_text(errors="replace")[-3000:])

    proc = procs.start([sys.executable, "-m", "pod_agent", "serve", "--profile", str(prof),
                        "--vllm", str(REPO / "console" / "demo" / "bin" / "vllm"),
                        "--no-patches", "--watchdog-interval", "5", "--backoff", "2"],
                       tmp_path / "serve.log", env=env, cwd=REPO)
    try:
        wait(lambda: (st := status()) and st["watchdog"]["busy"], "traffic seen")
        (faults / "quiet").touch()  # nobody uses the pod from now on
        wait(lambda: log.exists() and "stop pod pod-plain" in log.read_text(), "idle stop")
        wd = wait(status, "status after the stop")["watchdog"]
        assert wd["last_stop"]["reason"] == "idle" and wd["last_stop"]["by"] == "watchdog"
        assert wd["failing"] is None
        audit = [json.loads(x) for x in (home / "audit.jsonl").read_text().splitlines()]
        ops = [a["op"] for a in audit]
        assert "watchdog-tick-failed" not in ops
        warned = [a for a in audit if a["op"] == "stop-warning" and a["reason"] == "idle"]
        assert warned and ops.index("stop-warning") < ops.index("watchdog-stop")
    finally:
        subprocess.run([sys.executable, "-m", "pod_agent", "shutdown"], env=env,
                       capture_output=True, timeout=60, cwd=REPO)
        procs.stop(proc, 30)


async def test_a_wall_reading_the_exporter_says_the_watchdog_fails_too(
        pod, monkeypatch: pytest.MonkeyPatch) -> None:
    """The wall has no SSH: the exporter's ``pod_agent_*`` gauges carry the failing
    watchdog, and the console's reading of them raises the same CRIT."""

    from console.sources.collect.gpu_metrics import stop_plan
    from tests.support.watchdog_gauges import exporter_samples

    p: Pod = pod("seoul")
    p.start(local("seoul", 0, 16, 0))

    def broken(ports: dict[str, int], timeout_s: float) -> dict[str, Any]:
        raise ERRORS["module missing"]

    monkeypatch.setattr("pod_agent.traffic.read_all", broken)
    await _ticks(p, 2)
    wd = p.status()

    samples = exporter_samples(wd)
    plan, armed = stop_plan(samples, p.wall)
    assert plan is not None and plan.failing_ticks == 2
    snap = PodSnapshot(pod_id="pod-days", status="RUNNING", started_at=p.wall - 3600,
                       watchdog_armed=armed, stop_plan=plan)
    assert p.sup is not None
    conds = evaluate(None, snap, p.sup.profile, Settings(profiles_dir=PROFILES), p.wall)
    assert ("watchdog failing since 16:00: traffic: ModuleNotFoundError: No module named "
            "'prometheus_client'") in [c.title for c in conds if c.severity == "crit"]
