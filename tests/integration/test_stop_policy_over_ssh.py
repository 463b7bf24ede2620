"""The stop policy end to end: the real agent over real SSH, supervising its slot and
reading the slot's counters as the requests the test sends move them, stopping the
(emulated) pod; the console's ``down`` against the emulated RunPod.

The slot's server is the demo's simulated vLLM (``console/demo/fake_vllm.py``, the agent's
``--vllm``, as the demo runs it): what the stop policy reads of it is vLLM's exposition
(requests running, requests finished), and those numbers are the test's own requests,
in flight for as long as the server takes to answer them (no background traffic). The
real engine would add a start-up of 30-50 s at each of the module's starts and nothing
the policy reads: the agent's supervision of a real vLLM is ``test_agent_over_ssh``'s.
Its start-up is simulated (``LOAD_S`` real seconds, longer than the idle limit: a
slot's loading is no idleness).

The agent runs on its accelerated clock (``POD_AGENT_CLOCK``, the one ``pod-console demo
--clock-speed`` uses), ``SPEED`` times as fast as real time and anchored to a Monday
afternoon whenever the test runs: the idle limit, the warning's lead and the busy grace
are minutes on the pod's clock and seconds of the test's. Everything else — requests,
SSH, the agent starting, supervising and restarting its slot — is real. What is asserted
about time is read from the agent's own records (its audit, its last stop, on its own
clock), not from when the test happened to look. The tests run in file order on one pod:

1. idle stop: not while the slot loads, not while requests run (longer than the idle
   limit on the pod's clock), then after the limit of silence, warned first (audit and
   webhook);
2. an extension survives killing the agent and the console; ``down`` honours it and
   ``--force`` overrides; the scheduled stop passes without stopping the extended pod,
   and neither does idleness; its end with requests running stops the pod after the
   bounded grace, not later.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from console.demo.deployment import FAKE_VLLM, engine_env
from console.sources.agent_client import AgentClient
from console.sources.collect.pod import PodCollector
from console.sources.provider.emulator import EmulatorServer, EmulatorState
from console.sources.remote import AgentEndpoint, AgentError, AgentTransport
from pod_agent import clock
from pod_agent.stop_watch import MIN_TICK_S, TRAFFIC_TIMEOUT_S
from tests.conftest import REPO
from tests.support import procs, sshd
from tests.support.procs import free_port
from tests.support.waits import polled_until, until_true

pytestmark = [pytest.mark.sshd, pytest.mark.realtime]

TEST_BIN = REPO / "tests" / "support" / "bin"
KEY = "rp-test-key"
SPEED = 10.0
"""The pod's clock runs this many times as fast as the test's."""
TICK_S = 1.0
"""``serve --watchdog-interval`` (pod seconds; the agent waits at least half a real second
between ticks)."""
LOOK_S = TRAFFIC_TIMEOUT_S + MIN_TICK_S
"""Real seconds one tick may take, however busy the machine: its read of the slot's
/metrics gives up after ``TRAFFIC_TIMEOUT_S`` (and counts as no traffic), then it waits
``MIN_TICK_S``. The agent stamps what it saw with the tick's start, before that read."""
IDLE_S, GRACE_S, WARN_S = 120, 60, 40
"""On the pod's clock: 12, 6 and 4 real seconds. Idleness reaches its warning only after
(IDLE_S - WARN_S) / SPEED = 8 real seconds unseen: more than one tick whose read timed out
(``LOOK_S``) and well into the next one, so a loaded slot answering late is never idleness
here, at any speed of the machine (at 60 s, one such read was 55 of the 60)."""
assert (IDLE_S - WARN_S) / SPEED > LOOK_S + 2 * MIN_TICK_S
LATE_S = 2 * LOOK_S * SPEED
"""How late (pod seconds) a stop may come after its instant: the tick that warns and the
one that stops, each at most ``LOOK_S`` late (a warning given late holds the stop back as
much: its lead is kept)."""
LOAD_S = 15.0
"""Real seconds the simulated slot takes to start (``DEMO_STARTUP_S``; more on a loaded
machine, never less). Loading counted as idleness would warn after
(IDLE_S - WARN_S) / SPEED = 8 real seconds, at most ``LOOK_S`` late: the slot must still
be loading then, or "not while the slot loads" would prove nothing."""
assert LOAD_S > (IDLE_S - WARN_S) / SPEED + LOOK_S + 1
UTC = dt.UTC


def pod_time(h: int, m: int, s: int = 0) -> float:
    return dt.datetime(2026, 11, 30, h, m, s, tzinfo=UTC).timestamp()  # a Monday


class Hook(http.server.BaseHTTPRequestHandler):
    got: list[str] = []

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length", "0"))
        Hook.got.append(json.loads(self.rfile.read(n))["text"])
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a) -> None:
        """Quiet: the test reads what arrived, not the server's log."""


@pytest.fixture(scope="module")
def pod(tmp_path_factory):
    if not sshd.available():
        if os.environ.get("CI"):
            pytest.fail("sshd missing")
        pytest.skip("sshd missing")
    root = tmp_path_factory.mktemp("stoppod")
    home = root / "agent-home"
    state = EmulatorState(api_key=KEY)
    pid = state.add_stopped_pod("pod-console-cpu", "NVIDIA H200", 1)
    state.set_status(state.pods[pid], "RUNNING")
    emulator = EmulatorServer(state)
    emulator.start()
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    rpc_log = root / "runpodctl.log"
    # the pod's environment, as RunPod gives it to every SSH session
    env = {"PATH": f"{Path(sys.executable).parent}:{TEST_BIN}:/usr/local/bin:/usr/bin:/bin",
           "PYTHONPATH": str(REPO), "POD_AGENT_HOME": str(home), "RUNPOD_POD_ID": pid,
           "FAKE_RUNPODCTL_LOG": str(rpc_log),
           # the Python that runs the simulated vLLM (console/demo/bin/vllm)
           "POD_CONSOLE_DEMO_PYTHON": sys.executable,
           "POD_AGENT_WEBHOOK_URL": f"http://127.0.0.1:{hook.server_address[1]}/hook",
           # the memory guard's floor for this test box: at its default (12 GiB, a GPU
           # pod's) the guard warned on a 24 GiB machine running the suite's other
           # vLLMs beside this one, a "stop-warning" the stop policy's tests do not expect
           "POD_AGENT_MEM_FLOOR_GIB": "0.1"}
    srv = sshd.SshServer(root / "sshd", env=env)
    srv.start()
    port = free_port()
    profiles = root / "profiles"
    profiles.mkdir()
    profile = profiles / "10-cpu.yaml"
    # the simulated engine as the demo sets it up, with no traffic but the test's own
    faults = root / "faults"
    faults.mkdir()
    slot_env = engine_env("tiny-stop", 0.12, seed=7, rate=0.0, startup_s=LOAD_S,
                          faults=faults)
    profile.write_text(f"""
name: cpu-stop
gpu_type_ids: [NVIDIA H200]
image: local
schedule:
  timezone: UTC
  start: "08:30"
  stop: "18:00"
  days: [mon, tue, wed, thu, fri, sat, sun]
  idle_stop_after: {IDLE_S}s
  busy_grace: {GRACE_S}s
  warn_before: {WARN_S}s
slots:
  TINY:
    served_model_name: tiny-stop
    hf_repo_id: local/tiny
    port: {port}
    gpus: [0]
    gpu_util: 0.12
    max_model_len: 2048
    startup_timeout_s: 240
    env: {json.dumps(slot_env)}
""")
    ep = AgentEndpoint("127.0.0.1", srv.port, "root", srv.client_key, pid,
                       f"{sys.executable} -m pod_agent")
    cfg = root / "config.yaml"
    cfg.write_text(f"profiles_dir: {profiles}\nstate_dir: {root / 'console-state'}\n"
                   f"pod:\n  runpod_id: {pid}\n  ssh_host: 127.0.0.1\n"
                   f"  ssh_port: {srv.port}\n  ssh_key: {srv.client_key}\n"
                   f"  agent_dir: {root / 'agent-dir'}\n")
    info = {"root": root, "home": home, "profile": profile, "port": port,
            "ep": ep, "state": root / "console-state", "rpc_log": rpc_log, "pid": pid,
            "emulator": emulator, "cfg": cfg}
    try:
        yield info
    finally:
        async def down() -> None:
            t = AgentTransport(ep, info["state"])
            with contextlib.suppress(Exception):
                await t.run(["shutdown"], timeout_s=60)
            t.close()
        asyncio.run(down())
        _stop_serves(home)
        hook.shutdown()
        srv.stop()
        emulator.stop()


def _stop_serves(home: Path) -> None:
    """Whatever ``serve`` of this pod is still alive (one started just before a failure,
    not yet listening when ``shutdown`` was sent): found by the pod's own agent home."""
    procs.stop_pids(procs.pids_with_env("POD_AGENT_HOME", str(home)))


async def _serve(pod, pod_epoch: float) -> None:
    """``serve`` in the background, its clock reading ``pod_epoch`` now."""
    t = AgentTransport(pod["ep"], pod["state"])
    real = time.time()
    pod["anchor"] = (real, pod_epoch)  # pod clock p ↔ real time real + (p - pod_epoch)/SPEED
    spec = clock.spec_for(pod_epoch, SPEED, real_epoch=real)
    cmd = (f"setsid nohup env POD_AGENT_CLOCK={spec} {pod['ep'].agent_cmd} serve "
           f"--profile {pod['profile']} --vllm {FAKE_VLLM} --no-patches "
           f"--backoff 1,2 --watchdog-interval {TICK_S:g} "
           f">> {pod['root'] / 'serve.log'} 2>&1 < /dev/null &")
    r = await t.run_raw(cmd, timeout_s=30)
    t.close()
    assert r.exit_status == 0, r.events


async def _status(pod) -> dict:
    """The agent's status, or {} when it does not answer (not running, or a host loaded
    by both test workers and the slot's traffic answering one call late: the callers'
    own deadlines decide how long that may last)."""
    t = AgentTransport(pod["ep"], pod["state"])
    try:
        r = await t.run(["status", "--json"], timeout_s=30)
    except AgentError:
        return {}
    finally:
        t.close()
    if not r.ok:
        return {}
    return r.final  # type: ignore[return-value]


async def _wait(pod, pred, what: str, timeout_s: float = 300) -> dict:
    return await polled_until(lambda: _status(pod), lambda st: bool(st) and pred(st), what,
                              timeout_s)


def _ready(st: dict) -> bool:
    return st.get("slots", {}).get("TINY", {}).get("state") == "ready"


def _stops(pod) -> list[str]:
    p = pod["rpc_log"]
    return p.read_text().splitlines() if p.exists() else []


def _audit(pod) -> list[dict]:
    p = pod["home"] / "audit.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []



def _real(pod, pod_instant: float) -> float:
    """The real instant at which the (last started) agent's clock reads ``pod_instant``."""
    real0, pod0 = pod["anchor"]
    return real0 + (pod_instant - pod0) / SPEED


class Traffic:
    """Completions through the slot, two at a time (so a tick never falls in the gap
    between two of them), until stopped; a slot not up yet is asked again. Counts what
    was answered and when each request ended."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/v1/chat/completions"
        self.stop = threading.Event()
        self.ok = 0
        self.last_end = 0.0
        self.ends: list[float] = []
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(2)]

    def _run(self) -> None:
        with httpx.Client(timeout=60) as c:
            while not self.stop.is_set():
                try:
                    # 64 tokens: about a second in flight on the simulated engine
                    # (Engine.answer's decoding speed), across more than one tick
                    r = c.post(self.url, json={
                        "model": "tiny-stop", "max_tokens": 64, "temperature": 0,
                        "messages": [{"role": "user", "content": "a b a b a b"}]})
                except httpx.HTTPError:  # still loading (or restarting): ask again
                    self.stop.wait(0.2)
                    continue
                if r.status_code == 200:
                    self.ok += 1
                    self.last_end = time.time()
                    self.ends.append(self.last_end)
                else:
                    self.stop.wait(0.2)

    def __enter__(self) -> Traffic:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(120)




async def _agent(pod, *args: str):
    t = AgentTransport(pod["ep"], pod["state"])
    try:
        # as an operator types it on the pod: `pod-agent watchdog extend 19:00 --by=alice`
        return await t.run(["watchdog", *args], timeout_s=300)
    finally:
        t.close()


async def test_idle_stop_waits_for_silence_and_warns_first(pod) -> None:
    with Traffic(pod["port"]) as tr:
        # requests are waiting before the slot is up: from its first answer on it is busy
        started = time.monotonic()
        await _serve(pod, pod_time(16, 0))
        await _wait(pod, _ready, "slot ready")
        # loading took longer than the idle limit on the pod's clock (and than the time
        # to its warning). Loading is no idleness
        assert time.monotonic() - started >= LOAD_S
        assert _stops(pod) == [], _stops(pod)
        assert not any(a["op"] == "stop-warning" for a in _audit(pod)), _audit(pod)
        await until_true(lambda: tr.ok >= 3, "the traffic reaching the slot", 120)
        busy_from = time.monotonic()
        while time.monotonic() - busy_from < (IDLE_S + 20) / SPEED:  # past the idle limit
            wd = (await _status(pod))["watchdog"]
            assert wd["idle_s"] < IDLE_S, wd
            assert not (wd["warning"] and wd["next_stop_reason"] == "idle"), wd
            assert _stops(pod) == []
            await asyncio.sleep(0.3)
    silent_from = tr.last_end
    assert _stops(pod) == [], "stopped while requests ran"
    # the console reads the plan the way the agent has it: idleness is what stops it next
    t = AgentTransport(pod["ep"], pod["state"])
    try:
        snap = await PodCollector(None, None, AgentClient(t), timeout_s=30).poll()
    finally:
        t.close()
    assert snap.stop_plan is not None and snap.stop_plan.next_reason == "idle"
    assert snap.stop_plan.idle_after_s == IDLE_S
    await until_true(lambda: _stops(pod), "the idle stop", 60 + IDLE_S / SPEED)
    stopped_at = time.time()
    assert _stops(pod)[0] == f"stop pod {pod['pid']}"
    # never before the limit of silence (the pod's clock runs SPEED times the test's),
    # counted from the look that saw the last request: the agent stamps a tick's sight
    # with the tick's start, and on a loaded machine its read of /metrics (what saw the
    # last request end) may come up to TRAFFIC_TIMEOUT_S later. Exactly: the agent's own
    # idle_s at the stop, below
    assert stopped_at - silent_from >= IDLE_S / SPEED - TRAFFIC_TIMEOUT_S - 0.5, \
        stopped_at - silent_from
    # the record follows runpodctl's answer
    await until_true(lambda: any(a["op"] == "watchdog-stop" for a in _audit(pod)),
                 "the stop's record", 30)
    after = [a for a in _audit(pod) if a["t"] >= silent_from - 1 and a["op"] in
             ("stop-warning", "watchdog-stop")]
    assert len(after) >= 2, after
    warned, stopped = after[0], after[1]
    assert (warned["op"], warned["reason"]) == ("stop-warning", "idle"), after
    assert (stopped["op"], stopped["reason"], stopped["ok"]) == ("watchdog-stop", "idle", True)
    # on the agent's own clock: after the idle limit (and not much later), a warning
    # WARN_S ahead
    assert IDLE_S <= stopped["idle_s"] <= IDLE_S + LATE_S, stopped
    assert (stopped["t"] - warned["t"]) * SPEED >= WARN_S - SPEED * 0.05, (warned, stopped)
    assert any("stops at" in m and "idle" in m and "press w" in m for m in Hook.got), Hook.got
    # disarmed, nothing stops it again until the next test arms it under its extension
    r = await _agent(pod, "disarm")
    assert r.ok, r.message


def _down(pod, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, RUNPOD_API_KEY=KEY, RUNPOD_API_BASE=pod["emulator"].base_url,
               PYTHONPATH=str(REPO))
    env.pop("POD_CONSOLE_STATE_DIR", None)
    return subprocess.run([sys.executable, "-m", "console.cli", "down", "--config",
                           str(pod["cfg"]), *extra], env=env, capture_output=True,
                          text=True, timeout=180)


async def test_an_extension_outlives_restarts_and_ends_in_a_bounded_grace(pod) -> None:
    r = await _agent(pod, "extend", "19:00", "--by=alice", "--reason=eval run")
    assert r.ok, r.message
    ext = r.final["extension"]  # type: ignore[index]
    assert ext["by"] == "alice" and ext["holds"] == pod_time(18, 0)  # it holds tonight's
    n_stops = len(_stops(pod))  # disarmed since the last test: nothing was stopping it
    r = await _agent(pod, "arm")
    assert r.ok, r.message
    # kill the agent outright (and its slot: nothing adopts an orphaned server)
    st = await _status(pod)
    slot_pgid = st["slots"]["TINY"]["pid"]
    os.kill(st["pid"], signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(slot_pgid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while await _status(pod) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    # back, with its clock a minute before the scheduled stop
    await _serve(pod, pod_time(17, 59))
    st = await _wait(pod, lambda s: bool(s.get("watchdog")), "agent back", 60)
    kept = st["watchdog"]["extension"]
    assert kept is not None and (kept["by"], kept["reason"], kept["until"]) == (
        "alice", "eval run", ext["until"])
    assert st["watchdog"]["armed"] is True
    # a new console (nothing of the old one's memory) reads it
    t = AgentTransport(pod["ep"], pod["state"])
    try:
        snap = await PodCollector(None, None, AgentClient(t), timeout_s=30).poll()
    finally:
        t.close()
    assert snap.stop_plan is not None and snap.stop_plan.extension_by == "alice"
    # the cron layer honours it; --force overrides
    r = _down(pod)
    assert r.returncode == 0, r.stdout + r.stderr
    until = dt.datetime.fromisoformat(ext["until_iso"]).strftime("%H:%M")
    assert f"kept: extended until {until} by alice: eval run" in r.stdout, r.stdout
    assert pod["emulator"].state.pods[pod["pid"]]["status"] == "RUNNING"
    # 18:00 passes on the pod's clock while the slot loads, then it idles past the limit:
    # neither the schedule nor idleness stops an extended pod
    st = await _wait(pod, _ready, "slot ready again")
    # (a stop ends the wait at once: after it, idleness counts afresh)
    await _wait(pod, lambda s: (s["watchdog"]["now"] >= pod_time(18, 0, 5)
                                and s["watchdog"]["idle_s"] >= IDLE_S + 5)
                or len(_stops(pod)) > n_stops, "18:00 and idle", 120)
    assert len(_stops(pod)) == n_stops, _stops(pod)
    # its end, with requests running: the grace holds the stop back, and is bounded
    with Traffic(pod["port"]) as tr:
        await until_true(lambda: tr.ok >= 2, "the traffic reaching the slot", 60)
        await _wait(pod, lambda s: s["watchdog"]["idle_s"] < IDLE_S / 2, "traffic seen", 60)
        # no shorter than warn_before: every stop is warned that long ahead
        r = await _agent(pod, "extend", f"+{WARN_S}s", "--by=alice", "--reason=wrap up")
        assert r.ok and r.final["extension"]["holds"] == pod_time(18, 0)  # type: ignore[index]
        ends = r.final["extension"]["until"]  # type: ignore[index]
        # the grace is GRACE_S / SPEED real seconds: a status round trip on a loaded
        # machine can miss it, so it is proven below from the stop's own record (busy,
        # never before the grace); here it is enough that the stop did not come early
        st = await _wait(pod, lambda s: s["watchdog"]["grace_until"] is not None
                         or len(_stops(pod)) > n_stops, "held by the grace", 60)
        await until_true(lambda: len(_stops(pod)) > n_stops, "the stop after the grace",
                     60 + GRACE_S / SPEED)
        running_after = [e for e in tr.ends if e > _real(pod, ends) + GRACE_S / SPEED / 2]
    assert len(_stops(pod)) == n_stops + 1
    assert running_after, "no request ran in the grace after the extension's end"
    # the decision, on the agent's own clock: never before the grace, and bounded — the
    # grace counts from the first tick that found the stop due
    st = await _wait(pod, lambda s: (s["watchdog"].get("last_stop") or {}).get("ok")
                     is not None, "the stop's outcome", 30)
    last = st["watchdog"]["last_stop"]
    assert last["reason"] == "extension ended" and last["ok"] is True, last
    assert GRACE_S <= last["at"] - ends <= GRACE_S + LATE_S, last["at"] - ends
    stop_rec = [a for a in _audit(pod) if a["op"] == "watchdog-stop"][-1]
    assert stop_rec["reason"] == "extension ended" and stop_rec["busy"] is True, stop_rec
    # and the laptop's --force stops the pod through the API whatever the agent says
    r = await _agent(pod, "extend", "+1h", "--by=bob")
    assert r.ok, r.message
    assert "kept" in _down(pod).stdout
    r = _down(pod, "--force")
    assert r.returncode == 0 and "stopped" in r.stdout, r.stdout + r.stderr
    assert pod["emulator"].state.pods[pod["pid"]]["status"] == "EXITED"
