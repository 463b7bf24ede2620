"""``pod-console demo``: a living deployment on a machine with no GPU and no network.

What is simulated: the GPUs and vLLM itself (``fake_vllm`` serving genuine
exposition text on loopback), ``nvidia-smi`` (a real H200 capture, renamed to
the profile's GPU), PyTorch for the P2P probe, and RunPod (the REST v2
emulator). What is real: the pod agent (host checks, slot supervisor,
rebalance, watchdog — run as local processes instead of over SSH), the
collectors, the alert rules, the action registry, provisioning and the
console. Faults can be injected from the command palette.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from console.config.settings import (
    AlertTiming,
    GatewaySettings,
    PodSettings,
    Settings,
    SlotThresholds,
)
from console.demo import reaper
from console.operations.provision import ProvisionConfig
from console.sources.provider.emulator import EmulatorServer, EmulatorState, HostInfo
from console.sources.remote import LocalAgentTransport
from pod_agent.paths import socket_path_for
from pod_agent.profile import duration_s
from pod_agent.profiles import LoadedProfile, load_profiles

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FAKE_VLLM = HERE / "bin" / "vllm"
"""The demo's ``vllm`` (``fake_vllm`` behind vLLM's argv): the agent's ``serve --vllm``."""
DEMO_KEY = "demo-runpod-key"
# KV tokens at a gpu_util and per 1.0 util, from the field's table: Flash-Next 239k at 0.76
# and +57k per 0.01; the 27B 143k at 0.19 with MTP, and it failed to start at 0.15.
KV_MODEL = {"qwen3.8-flash-next": "239000@0.76/5700000", "qwen3.8-27b": "143000@0.19/3700000"}
GPU_MIB = {"RTX PRO 6000": "97887", "H100": "81559", "A100": "81920"}
FLEET_CONTEXTS = ("east", "west", "staging")
ATTACH_FILE = "demo-attach.json"
"""In the demo's state directory while it runs: how ``demo --attach`` reaches it."""


def demo_state_dir() -> Path:
    """A demo's state directory: ``POD_CONSOLE_STATE_DIR``, else the user's (``demo``)."""
    env = os.environ.get("POD_CONSOLE_STATE_DIR")
    if env:
        return Path(env)
    from console.config.config_file import default_state_dir

    return default_state_dir() / "demo"


class DemoNotRunning(Exception):
    """``demo --attach`` found no running demo (said as is)."""
"""``demo --fleet``: the contexts of its config, each a simulated pod of its own (the
first is the one the console opens on)."""
UPTIME_S = 2 * 3600 + 17 * 60
"""How long the demo's pods have been running when it starts."""


POD_ENV_ALLOWED = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR",
                   "TERM")
"""The only variables of the console's own environment the simulated pod gets (plus
``LC_*``): what a process needs to run, nothing that could be a credential. A list of
words to leave out (``SECRET``, ``TOKEN``…) let ``LITELLM_MASTER_KEY`` and
``LANGFUSE_PUBLIC_KEY`` through; an allow-list cannot miss a name it never heard of."""


def shipped_profiles_dir() -> Path:
    for cand in (REPO / "profiles", HERE / "shipped_profiles"):
        if cand.is_dir():
            return cand
    raise FileNotFoundError("the shipped profiles/ directory is missing")


def _port_free(port: int) -> bool:
    if os.environ.get("POD_CONSOLE_DEMO_PORTS"):
        # the tests (tests/conftest.py): two demos at once would both find a profile's
        # port free and then both bind it
        return False
    return _bindable(port)


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


_port_cursor: dict[range, int] = {}
"""Per range of ``POD_CONSOLE_DEMO_PORTS``: where this process's next pick starts."""


def _port_range() -> range | None:
    """``POD_CONSOLE_DEMO_PORTS=LOW-HIGH``: the demo's ports come from that range. The
    tests give each worker its own, below the kernel's ephemeral ports: a port found free
    is bound seconds later by the slot's server, and meanwhile any ``bind(0)`` elsewhere
    (another test's server) could be handed the same one."""
    low, sep, high = (os.environ.get("POD_CONSOLE_DEMO_PORTS") or "").partition("-")
    if not sep or not low.isdigit() or not high.isdigit() or not 0 < int(low) < int(high):
        return None  # unset, or "free": any free port
    return range(int(low), min(int(high), 65535) + 1)


def _free_port() -> int:
    span = _port_range()
    if span is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    # in turn from a random start (two processes on one range rarely meet), never a port
    # this process handed out lately (its server may not have bound it yet)
    at = _port_cursor.get(span)
    if at is None:
        at = random.randrange(len(span))
    for i in range(len(span)):
        port = span[(at + i) % len(span)]
        if _bindable(port):
            _port_cursor[span] = (at + i + 1) % len(span)
            return port
    raise RuntimeError(f"no free port in POD_CONSOLE_DEMO_PORTS={span.start}-{span.stop - 1}")


SCHEDULE_LEAD_S = 6 * 3600.0
"""The simulated pod's clock starts this long (pod time) before the profile's next
scheduled stop, whatever the hour and the speed. At ×60 that is six real minutes: the
idle story at a person's pace (up, traffic stops, the warning, ``w 1 y``, the extension
runs out, the idle stop) takes about three, so its stop is the idle one and not the
schedule's. A lead of 90 pod minutes once let a loaded run reach the scheduled stop first."""

AGENT_START_S = 30.0
"""How long a provisioned pod's agent may take to be up after its bootstrap (a loaded
machine): a pod stopped before then has its agent stopped once it is."""
STOP_GRACE_S = 1.5
"""At the demo's end, how long its processes have between SIGTERM (all at once) and
SIGKILL: ``q`` and SIGTERM end the demo within 3 s (an agent stops its two simulated
slots in a fraction of a second; the teardown once waited 30 s for an agent's socket)."""
WARN_REAL_S = 25.0
"""On an accelerated pod clock the warning is on the console's screen this many real
seconds before the stop, whatever the stop (schedule, idle, an extension's end): time
for a person to read it and press ``w 1 y`` (docs/demo.md's story)."""
WATCHDOG_INTERVAL_S = 5.0
"""``serve --watchdog-interval`` of the demo's agents (pod seconds; at ×60 the watchdog
still looks only every ``MIN_TICK_S``, half a real second)."""
READ_S = 2.0
"""How long one reading of the pod by the console may take (the agent's status through a
process of its own, on a loaded machine)."""
IDLE_BEFORE_WARN_S = 5 * 60.0
"""Pod seconds of silence before the idle stop's warning: the idle limit is kept this far
beyond ``warn_before`` (the profile refuses a limit within it: a warning after every
request), so "traffic stops" warns within a real minute at ×60."""


def warning_lag_s(clock_speed: float) -> float:
    """Real seconds by which the console may show a warning after the stop policy came
    within ``warn_before`` of the stop: the agent finds it at its next watchdog tick, the
    console reads the pod every ``POD_POLL_S`` (and the reading takes ``READ_S``)."""
    from console.session.session import POD_POLL_S
    from pod_agent.stop_watch import tick_wait_s

    return tick_wait_s(WATCHDOG_INTERVAL_S, clock_speed) + POD_POLL_S + READ_S


def demo_warn_before(clock_speed: float) -> str:
    """``warn_before`` (whole pod minutes, never below the agent's default 10) that
    leaves ``WARN_REAL_S`` real seconds between the warning on the console's screen and
    the stop at ``clock_speed``. The pod-time ``WARN_REAL_S`` alone (25 pod minutes at
    ×60) left 13 real seconds on screen: the console's reading of the pod lags the
    agent's warning by up to ``warning_lag_s``."""
    want = math.ceil((WARN_REAL_S + warning_lag_s(clock_speed)) * clock_speed / 60.0)
    return f"{max(want, 10)}m"


def demo_idle_stop_after(idle_stop_after: str, warn_before: str) -> str:
    """The idle limit, widened to ``warn_before`` + ``IDLE_BEFORE_WARN_S`` when shorter."""
    floor = duration_s(warn_before) + IDLE_BEFORE_WARN_S
    if duration_s(idle_stop_after) >= floor:
        return idle_stop_after
    return f"{math.ceil(floor / 60)}m"


def engine_env(served: str, gpu_util: float, *, seed: int, rate: float, startup_s: float,
               faults: Path) -> dict[str, str]:
    """A slot's environment for the simulated engine (``fake_vllm``'s ``DEMO_*``): its KV
    budget (the field's where the model is one of theirs, else room at its ``gpu_util``),
    seed, background requests per second, start-up time and faults directory."""
    return {"DEMO_KV": KV_MODEL.get(served, f"200000@{gpu_util}/4000000"),
            "DEMO_SEED": str(seed), "DEMO_RATE": str(rate), "DEMO_STARTUP_S": str(startup_s),
            "DEMO_FAULTS": str(faults)}


class DemoDeployment:
    def __init__(self, workdir: Path | None = None, seed: int = 7, startup_s: float = 4.0,
                 rate: float = 0.6, clock_speed: float = 1.0, fleet: bool = False,
                 profiles_src: Path | None = None) -> None:
        self.own_workdir = workdir is None
        self.profiles_src = profiles_src
        """Where the demo's profiles come from (default: the shipped ones)."""
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="pod-console-demo-"))
        self.seed = seed
        self.startup_s = startup_s
        self.rate = rate
        self.faults_dir = self.workdir / "faults"
        self.profiles_dir = self.workdir / "profiles"
        self.state = EmulatorState(api_key=DEMO_KEY)
        self.emulator = EmulatorServer(self.state)
        self.agents: dict[str, subprocess.Popen[bytes]] = {}
        self._late_stops: list[threading.Thread] = []
        """Stops waiting for a provisioned pod's agent to be up (``_stop_agent``)."""
        self._stopping: set[str] = set()
        """Pods whose agent is being (or was) stopped since their last start: a second
        stop of one (the emulator's own at the end) waits on nothing."""
        self._closing = threading.Event()
        """Set by the teardown: nothing waits for an agent to come up any more (the
        teardown ends every process of the demo by its token, up or not)."""
        self._teardown = threading.Lock()
        self.token = f"{os.getpid()}-{uuid.uuid4().hex}"
        """In the environment of every process the demo starts (``reaper.MARK``): how
        its teardown, and its watcher when it is killed, find them all."""
        self._watcher: subprocess.Popen[bytes] | None = None
        self._watch_fd: int | None = None
        self.run_ids: dict[str, str] = {}
        """Pod → the run id its agent gets (``POD_AGENT_RUN_ID``): new at each simulated
        start or resume, as a real pod's container is (its boot id and first process
        differ), so a stop and a resume are two runs to the agent."""
        self.pod_id: str | None = None
        self.ports: dict[int, int] = {}
        self.torch = "good"
        self._transports: list[LocalAgentTransport] = []
        self.exporter: subprocess.Popen[bytes] | None = None
        self.exporter_port: int | None = None
        self.gateway: subprocess.Popen[bytes] | None = None
        self.gateway_port: int | None = None
        """The simulated LiteLLM proxy in front of the first pod's slots
        (``fake_litellm``): the console watches it as ``gateway_url``."""
        self.clock_speed = clock_speed
        """The pod agent's clock runs this many times as fast (``--clock-speed``), from
        ``SCHEDULE_LEAD_S`` before the first profile's next scheduled stop: at ×60 the
        idle story (a warning, an extension, an idle stop) fits in its first minutes."""
        self.clock_spec: str | None = None
        self.fleet = fleet
        """Three pods, each a context of the demo's config (``demo --fleet``): F shows
        them, enter opens the console on another."""
        self.contexts: dict[str, str] = {}
        """Context name → its pod (``--fleet``)."""
        self.pod_ports: dict[str, dict[int, int]] = {}
        """An extra pod's slot ports (profile port → port here); the first pod's are
        ``ports``."""
        self.pod_faults: dict[str, Path] = {}
        """An extra pod's faults directory (its engines read it); the first pod's, and a
        fallback's after it, is ``faults_dir``."""
        self.pod_profiles: dict[str, tuple[Path, str]] = {}
        """An extra pod's profiles directory and the profile it runs."""
        self.attached: dict[str, Any] | None = None
        """Set on a second console's view of a demo another process runs
        (``demo --attach``): what that demo wrote in its attach file. Such a view starts
        and stops nothing; its faults land in the running demo's files."""

    # -- setup ---------------------------------------------------------------------
    def _profile_copy(self, src: Path, dest: Path | None = None,
                      ports: dict[int, int] | None = None, faults: Path | None = None) -> None:
        """``dest``, ``ports``, ``faults``: an extra pod's (its own slot ports, all free
        ones: the pods share this machine's loopback)."""
        dest = dest or self.profiles_dir
        faults = faults or self.faults_dir
        first = ports is None
        ports = self.ports if ports is None else ports
        data = yaml.safe_load(src.read_text())
        for i, (_name, slot) in enumerate(sorted(data["slots"].items())):
            port = int(slot["port"])
            if port not in ports:
                ports[port] = port if first and _port_free(port) else _free_port()
            slot["port"] = ports[port]
            slot["env"] = {**(slot.get("env") or {}), **engine_env(
                slot["served_model_name"], float(slot["gpu_util"]), seed=self.seed + i,
                rate=self.rate, startup_s=self.startup_s, faults=faults)}
            slot["startup_timeout_s"] = 60
        if data.get("gpu_metrics_port"):
            # the agent's own exporter, on a port of this machine's loopback (two demos,
            # or a real exporter on 9400, must not collide)
            data["gpu_metrics_port"] = _free_port()
        data.pop("patches", None)  # no vLLM package to patch in the demo
        # the idle stop, shown: the palette's "traffic stops" makes the pod idle
        sched = data.setdefault("schedule", {})
        sched.setdefault("idle_stop_after", "30m")
        if self.clock_speed > 1.0:
            sched["warn_before"] = demo_warn_before(self.clock_speed)
            sched["idle_stop_after"] = demo_idle_stop_after(sched["idle_stop_after"],
                                                            sched["warn_before"])
        header = f"# DEMO copy of {src.name}: ports and DEMO_* environment added\n"
        (dest / src.name).write_text(header + yaml.safe_dump(data, sort_keys=False))

    def profiles(self) -> list[LoadedProfile]:
        return load_profiles(self.profiles_dir)

    def agent_env(self, pod_id: str, home: Path, gpu_name: str, pythonpath: str) -> dict[str, str]:
        # the console's own settings (a webhook URL, API keys) are none of the pod's
        # business: what the pod needs is set below, the rest of ours is left out whole
        env = {k: v for k, v in os.environ.items()
               if k in POD_ENV_ALLOWED or k.startswith("LC_")}
        mib = next((v for k, v in GPU_MIB.items() if k in gpu_name), "97887")
        faults = self.pod_faults.get(pod_id, self.faults_dir)
        env.update({
            "PATH": f"{HERE / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}",
            # the simulated GPUs: torch and NVML stand-ins (NVML answers from a real
            # H200 capture; faults through the same directory as the slots')
            "PYTHONPATH": f"{pythonpath}:{HERE / 'faketorch'}:{HERE / 'fakenvml'}",
            "FAKE_TORCH_MODE": self.torch, "FAKE_NVML_FAULTS": str(faults),
            # a GPU fault is the pod's: a fallback's new pod does not inherit it
            "FAKE_NVML_GPU_FAULTS": str(self.gpu_faults_dir(pod_id)),
            "FAKE_NVML_ENGINES": "1",
            # this machine's kernel log is not the simulated pod's
            "POD_AGENT_KMSG": str(self.gpu_faults_dir(pod_id) / "kmsg"),
            **({"POD_AGENT_CLOCK": self.clock_spec} if self.clock_spec else {}),
            "POD_AGENT_HOME": str(home), "RUNPOD_POD_ID": pod_id,
            # the simulated pod is this machine: its agent's exporter listens on loopback
            # only (the agent's default, all interfaces, is a real pod's)
            "POD_AGENT_EXPORTER_HOST": "127.0.0.1",
            reaper.MARK: self.token,
            "POD_AGENT_RUN_ID": self.run_id(pod_id),
            "RUNPOD_API_BASE": self.emulator.base_url, "RUNPOD_API_KEY": DEMO_KEY,
            "FAKE_NVIDIA_SMI_GPUS": "2", "FAKE_NVIDIA_SMI_NAME": gpu_name,
            "FAKE_NVIDIA_SMI_MIB": mib, "FAKE_NVIDIA_SMI_CUDA": "13.0",
            "POD_CONSOLE_DEMO_PYTHON": sys.executable, "POD_AGENT_P2P_TIMEOUT": "8",
            "POD_AGENT_MEM_FLOOR_GIB": "0.5", "PYTHONUNBUFFERED": "1",
            "HF_HOME": str(self.hf_home()),
        })
        return env

    def run_id(self, pod_id: str) -> str:
        """The run id of ``pod_id``'s current start (``started`` makes a new one)."""
        return self.run_ids.setdefault(pod_id, f"demo-{pod_id}-{uuid.uuid4().hex[:12]}")

    def started(self, pod_id: str) -> None:
        """The pod was (re)started: a new run, whose agent is not being stopped."""
        self.run_ids[pod_id] = f"demo-{pod_id}-{uuid.uuid4().hex[:12]}"
        self._stopping.discard(pod_id)

    def gpu_faults_dir(self, pod_id: str | None) -> Path:
        """Where the NVML stand-in of one simulated pod reads its GPU faults."""
        d = self.faults_dir / "gpus" / (pod_id or "none")
        d.mkdir(parents=True, exist_ok=True)
        return d

    def current_pod(self) -> str | None:
        """The pod a fault is injected into: the newest running one (after a fallback,
        the new pod), else the first."""
        with self.state.lock:
            running = [pid for pid, p in self.state.pods.items() if p["status"] == "RUNNING"]
        return running[-1] if running else self.pod_id

    def pod_home(self, pod_id: str) -> Path:
        return self.workdir / "pods" / pod_id

    def hf_home(self) -> Path:
        """The simulated volume already holds the weights (an empty HF cache entry per repo),
        so the host check's free-disk rule passes as on a pod that ran yesterday."""
        hf = self.workdir / "hf"
        for lp in self.profiles():
            for slot in lp.profile.slots.values():
                (hf / "hub" / ("models--" + slot.hf_repo_id.replace("/", "--"))).mkdir(
                    parents=True, exist_ok=True)
        return hf

    def transport_for(self, pod: Any) -> LocalAgentTransport:
        pid = pod if isinstance(pod, str) else pod.id
        if self.attached is not None:  # the running demo's agent, as that demo runs it
            return LocalAgentTransport(list(self.attached["agent_argv"]),
                                       dict(self.attached["agent_env"]), pod_id=pid)
        info = self.state.pods.get(pid, {})
        gpu = (info.get("gpu") or {}).get("id", "")
        home = self.pod_home(pid)
        t = LocalAgentTransport([sys.executable, "-m", "pod_agent"],
                                self.agent_env(pid, home / "agent", gpu,
                                               str(home / "agent-dir" / "pkg")), pod_id=pid)
        self._transports.append(t)  # so a fault injected later reaches its environment
        return t

    def remote_profile(self, lp: LoadedProfile, pod_id: str | None = None) -> Path:
        """Where ``lp`` lies on a pod as its agent reads it: a ``--fleet`` extra pod's
        own, else the first pod's."""
        pid = pod_id if pod_id in self.pod_profiles else self.pod_id
        return self.pod_home(pid or "none") / "agent-dir" / "pkg" / "profiles" / lp.path.name

    def _host_factory(self, pod: dict[str, Any]) -> HostInfo:
        """An emulated pod's host is this machine; stopping it shuts its agent down.
        Called at each create and start (resume): each is a new run of the pod."""
        pid = pod["id"]
        self.started(pid)
        return self._host(pid)

    def _host(self, pid: str) -> HostInfo:
        return HostInfo("127.0.0.1", 22, "13.0", dict(self.pod_ports.get(pid, self.ports)),
                        stop=lambda: self._stop_agent(pid))

    def _stop_agent(self, pod_id: str, late: bool = True) -> None:
        """``late``: an agent not up yet is stopped once it is (a pod stopped mid-way).
        Once per run of the pod: a second stop (the emulator's own at the demo's end)
        neither waits on the agent being stopped nor for an agent to come up; at the
        teardown nothing waits at all (``_stop_all`` ends every process by its token)."""
        if self._closing.is_set():
            return
        with self.state.lock:
            if pod_id in self._stopping:
                return
            self._stopping.add(pod_id)
        proc = self.agents.pop(pod_id, None)
        home = self.pod_home(pod_id) / "agent"
        if proc is None and not Path(socket_path_for(str(home))).exists():
            if late and (self.pod_home(pod_id) / "agent-dir" / "pkg").exists():
                # provisioned, its agent perhaps still starting (``setsid nohup … &``, a
                # fallback cancelled mid-way): on a real pod it dies with the pod; here it
                # is stopped once its socket answers, or it would outlive the demo
                late_stop = threading.Thread(target=self._stop_when_up, args=(pod_id,),
                                             name=f"stop-agent-{pod_id}", daemon=True)
                self._late_stops.append(late_stop)
                late_stop.start()
            return
        t = self.transport_for(pod_id)
        with contextlib.suppress(Exception):
            subprocess.run([*t.argv_prefix, "shutdown"], env=t.env, timeout=30,
                           capture_output=True)
        if proc is not None:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)

    def _stop_when_up(self, pod_id: str, wait_s: float = AGENT_START_S) -> None:
        sock = Path(socket_path_for(str(self.pod_home(pod_id) / "agent")))
        deadline = time.monotonic() + wait_s
        while not sock.exists():
            if time.monotonic() > deadline:
                return  # never started
            if self._closing.wait(0.2):
                return  # the teardown ends it by its token, up or not
        if self._closing.is_set():
            return
        with self.state.lock:
            pod = self.state.pods.get(pod_id)
            running = pod is not None and pod["status"] == "RUNNING"
        if not running:  # not resumed meanwhile (then this agent is the new run's)
            with self.state.lock:
                self._stopping.discard(pod_id)  # this stop is the one left to make
            self._stop_agent(pod_id)

    def pod_clock_spec(self, first: LoadedProfile, real_now: float | None = None) -> str | None:
        """The simulated pod's ``POD_AGENT_CLOCK``: ``SCHEDULE_LEAD_S`` before the first
        profile's next scheduled stop, at ``clock_speed``; None (the wall clock) when it
        has no schedule."""
        from pod_agent import clock, stoppolicy

        real = time.time() if real_now is None else real_now
        at = stoppolicy.next_scheduled(first.profile.schedule, real)
        if at is None:
            return None
        return clock.spec_for(at - SCHEDULE_LEAD_S, self.clock_speed, real_epoch=real)

    def start(self) -> None:
        # first: whatever happens next, what it starts ends with this process
        self._watcher, self._watch_fd = reaper.start_watcher(self.token)
        self.faults_dir.mkdir(parents=True, exist_ok=True)
        self.profiles_dir.mkdir(parents=True, exist_ok=True)
        for src in sorted((self.profiles_src or shipped_profiles_dir()).glob("*.yaml")):
            self._profile_copy(src)
        first = self.profiles()[0]
        # the simulated pod keeps its own clock, so the demo does not depend on the hour
        # it is run at (after the profile's stop time its watchdog would stop the pod at
        # once): SCHEDULE_LEAD_S before the next scheduled stop, at any speed
        self.clock_spec = self.pod_clock_spec(first)
        self.state.host_factory = self._host_factory
        self.state.stock = {g: 4 for lp in self.profiles() for g in lp.profile.gpu_type_ids}
        self.emulator.start()
        self.pod_id = self._running_pod(first)
        self._start_exporter(self.pod_id)
        self._start_gateway(first)
        if self.fleet:
            self.contexts[FLEET_CONTEXTS[0]] = self.pod_id
            for k, name in enumerate(FLEET_CONTEXTS[1:], 1):
                self.contexts[name] = self._extra_pod(name, k)

    def _running_pod(self, lp: LoadedProfile, prepare: Callable[[str], None] | None = None
                     ) -> str:
        """A pod on the emulator, RUNNING for ``UPTIME_S`` already, its agent serving
        ``lp``'s slots (``prepare``: called with its id before the agent starts)."""
        gpu = lp.profile.gpu_type_ids[0]
        pid = self.state.add_stopped_pod(f"pod-console-{lp.name}", gpu,
                                         lp.profile.effective_gpu_count)
        pod = self.state.pods[pid]
        self.state.set_status(pod, "RUNNING")
        self.started(pid)
        pod["startedAt"] = time.strftime("%Y-%m-%dT%H:%M:%S+00:00",
                                         time.gmtime(time.time() - UPTIME_S))
        if prepare is not None:
            prepare(pid)
        self._install_and_serve(pid, lp)
        host = self._host(pid)  # the run started above: its agent has its run id
        self.state.hosts[pid] = host
        pod["ssh"] = {"direct": {"host": "127.0.0.1", "port": 22, "username": "root"}}
        pod["runtime"] = {"uptime": UPTIME_S, "ports": [
            {"private": k, "public": v, "type": "tcp", "ip": "127.0.0.1"}
            for k, v in host.ports.items()]}
        return pid

    def _extra_pod(self, name: str, k: int) -> str:
        """``--fleet``'s k-th pod: its own profile copies (its own ports and faults
        directory), the k-th shipped profile, its own agent."""
        d, faults = self.workdir / f"profiles-{name}", self.workdir / f"faults-{name}"
        d.mkdir(parents=True, exist_ok=True)
        faults.mkdir(parents=True, exist_ok=True)
        ports: dict[int, int] = {}
        for src in sorted((self.profiles_src or shipped_profiles_dir()).glob("*.yaml")):
            self._profile_copy(src, d, ports, faults)
        lps = load_profiles(d)
        lp = lps[k % len(lps)]

        def prepare(pid: str) -> None:
            self.pod_ports[pid], self.pod_faults[pid] = ports, faults
            self.pod_profiles[pid] = (d, lp.name)

        return self._running_pod(lp, prepare)

    def _install_and_serve(self, pid: str, lp: LoadedProfile) -> None:
        """What provisioning does on a real pod, done locally for the demo's first pod."""
        home = self.pod_home(pid)
        pkg = home / "agent-dir" / "pkg"
        (pkg / "profiles").mkdir(parents=True, exist_ok=True)
        shutil.copytree(REPO / "pod_agent", pkg / "pod_agent",
                        ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
        shutil.copy(lp.path, pkg / "profiles" / lp.path.name)
        t = self.transport_for(pid)
        subprocess.run([*t.argv_prefix, "check-host", "--json", "--profile",
                        str(pkg / "profiles" / lp.path.name)], env=t.env, timeout=60,
                       capture_output=True)
        log = open(home / "serve.log", "ab")  # noqa: SIM115 - owned by the child
        self.agents[pid] = subprocess.Popen(
            [*t.argv_prefix, "serve", "--profile", str(pkg / "profiles" / lp.path.name),
             "--vllm", str(FAKE_VLLM), "--backoff", "2,4,8",
             "--watchdog-interval", f"{WATCHDOG_INTERVAL_S:g}", "--no-patches"],
            # an SGLang slot's server: the same simulation, speaking SGLang
            env={**t.env, "POD_AGENT_SGLANG_PYTHON": str(HERE / "bin" / "sglang-python")},
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)

    def _start_exporter(self, pid: str) -> None:
        """The pod's GPU metrics endpoint (``pod-agent exporter``), as a wall reads it:
        serving the agent's own samples, as ``serve`` runs it on a pod."""
        t = self.transport_for(pid)
        self.exporter_port = _free_port()
        self.exporter = subprocess.Popen(
            [*t.argv_prefix, "exporter", "--listen", f"127.0.0.1:{self.exporter_port}",
             "--from-agent", "--interval", "2"],
            env=t.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL, start_new_session=True)

    def _start_gateway(self, lp: LoadedProfile) -> None:
        """LiteLLM in front of the first pod's slots: each slot a deployment (its name
        the ``model_id``) of the model group of its served name, the profile's aliases
        routed as the field's ``litellm.yaml`` does."""
        routes = [[name, s.served_model_name, s.port]
                  for name, s in sorted(lp.profile.slots.items())]
        self.gateway_port = _free_port()
        log = open(self.workdir / "gateway.log", "ab")  # noqa: SIM115 - owned by the child
        env = {k: v for k, v in os.environ.items()
               if k in POD_ENV_ALLOWED or k.startswith("LC_")}
        env["PYTHONPATH"] = str(REPO)
        env[reaper.MARK] = self.token
        self.gateway = subprocess.Popen(
            [sys.executable, "-m", "console.demo.fake_litellm", "--port",
             str(self.gateway_port), "--routes", json.dumps(routes),
             "--aliases", json.dumps(lp.profile.alias_targets()),
             "--faults", str(self.faults_dir), "--seed", str(self.seed),
             "--rate", str(self.rate)],
            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=str(REPO))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.gateway.poll() is None:
            with socket.socket() as s, contextlib.suppress(OSError):
                s.connect(("127.0.0.1", self.gateway_port))
                return
            time.sleep(0.05)

    def state_dir(self) -> Path:
        """A workdir given by the caller (tests) holds it; else ``POD_CONSOLE_STATE_DIR``;
        else the user's state directory: the demo's audit log outlives its temp files."""
        if not self.own_workdir:
            return self.workdir / "state"
        return demo_state_dir()

    def settings(self, refresh_s: float = 2.0, context: str | None = None) -> Settings:
        """The console's settings on the first pod, or (``--fleet``) on ``context``'s
        pod: what the demo's config file says for that context."""
        if self.fleet and context is None:
            context = FLEET_CONTEXTS[0]
        pid = self.contexts.get(context or "", self.pod_id)
        first = self.profiles()[0]
        thresholds = {n: SlotThresholds(acceptance_baseline=0.6)
                      for lp in self.profiles() for n in lp.profile.slots}
        profiles_dir, profile = self.pod_profiles.get(pid or "", (self.profiles_dir,
                                                                  first.name))
        state = self.state_dir()
        return Settings(
            profiles_dir=profiles_dir, profile=profile, refresh_s=refresh_s, window_s=60,
            history_s=1800, state_dir=state / "contexts" / context if context else state,
            thresholds=thresholds,
            # faults come and go within a minute here: alerts that fire and clear as fast
            alerts=AlertTiming(down_for_s=3, for_s=10, hold_s=10, stall_after_s=10),
            pod=PodSettings(machine_id=pid, host="127.0.0.1",
                            agent_dir=str(self.pod_home(pid or "x") / "agent-dir")),
            # the exporter serves the first pod's GPUs
            gpu_metrics_url=(f"http://127.0.0.1:{self.exporter_port}/metrics"
                             if self.exporter_port and pid == self.pod_id else None),
            # the simulated LiteLLM before the first pod's slots (no key asked for
            # /metrics: its require_auth_for_metrics_endpoint is false)
            gateway_url=(f"http://127.0.0.1:{self.gateway_port}"
                         if self.gateway_port and pid == self.pod_id else None),
            # its key variable the demo's own: a LITELLM_MASTER_KEY of this machine's
            # environment is never sent to the simulation
            gateway=GatewaySettings(cooldown_s=10.0, key_env="POD_CONSOLE_DEMO_GATEWAY_KEY"),
            context=context, context_names=list(self.contexts),
            # the simulation's spend is its own: kept in memory, never in the user's book
            demo=True, RUNPOD_API_KEY=DEMO_KEY)

    def write_config(self, refresh_s: float = 2.0) -> Path:
        """These settings as a ``config.yaml`` (``demo: true``, no secrets): what another
        process — a browser session of ``demo --web`` — opens the demo with. The RunPod
        key and API address go through its environment (``session_env``), never a file."""
        secret = {"runpod_api_key", "vllm_api_key", "webhook_url"}
        per_context = {"context", "context_names"}
        data = self.settings(refresh_s).model_dump(mode="json", exclude_defaults=True,
                                                   exclude=secret | per_context)
        data["demo"] = True
        if self.fleet:
            # each context's own keys over the top level's (the first pod's settings);
            # the state directory is split by context as for any config with contexts
            data["state_dir"] = str(self.state_dir())
            data["current_context"] = FLEET_CONTEXTS[0]
            data["contexts"] = {}
            for name in self.contexts:
                mine = self.settings(refresh_s, name).model_dump(
                    mode="json", include={"profiles_dir", "profile", "pod",
                                          "gpu_metrics_url", "gateway_url"})
                data["contexts"][name] = mine
        path = self.workdir / "config.yaml"
        path.write_text("# written by pod-console demo for its sessions and its fleet\n"
                        + yaml.safe_dump(data, sort_keys=False))
        return path

    def session_env(self) -> dict[str, str]:
        """What a console process in another process needs to reach this demo's RunPod."""
        return {"RUNPOD_API_KEY": DEMO_KEY, "RUNPOD_API_BASE": self.emulator.base_url}

    def provision_config(self) -> ProvisionConfig:
        return ProvisionConfig(rounds=3, round_wait_s=20, cuda_attempts=5, ssh_wait_s=30,
                               health_wait_s=120, poll_s=1, pod_name="pod-console",
                               agent_dir=str(self.workdir / "pods" / "{pod}" / "agent-dir"),
                               python=sys.executable,
                               render_dir=self.state_dir() / "rendered",
                               # the demo's pods die with the demo: so does their ledger
                               ledger=self.workdir / "pods.jsonl")

    def provision_transport(self, pod: Any, agent_cmd: str) -> LocalAgentTransport:
        return self.transport_for(pod)

    # -- faults (command palette) --------------------------------------------------
    def faults(self, pod_id: str | None = None) -> list[tuple[str, str, Callable[[], Any]]]:
        """The palette's faults on ``pod_id``'s pod: the pod of the console that offers
        them (``--fleet``: each context's own), else the current one. Its slots are that
        pod's profile's, and each fault lands where that pod's engines, agent and GPUs
        read theirs; the gateway's only on the first pod (LiteLLM routes to its slots)."""
        pid = pod_id or self.current_pod()
        faults = self.pod_faults.get(pid or "", self.faults_dir)
        out: list[tuple[str, str, Callable[[], Any]]] = []
        for name, slot in self._pod_profile(pid).profile.slots.items():
            out.append((f"slot {name} dies", "its engine exits; the agent restarts it",
                        (faults / f"kill-{slot.served_model_name}").touch))
            out.append((f"slot {name} hangs", "/health says 200, its requests stay "
                        "running, no token moves: STALLED; R restarts it",
                        (faults / f"stall-{slot.served_model_name}").touch))
        if self.attached is None:  # the demo process's own agent environment
            out.append(("P2P broken on this host", "the next host check's all_reduce hangs",
                        self.break_p2p))
        out.append(("GPU 0 Xid 79", "the GPU falls off the bus (NVML reports a critical Xid)",
                    lambda: self.gpu_fault(f"xid-0-79-{time.time_ns()}", pid)))
        out.append(("GPU 1 double-bit ECC error", "uncorrectable memory error; a row remap "
                    "waits for a reset", lambda: self.gpu_fault("dbe-1", pid)))
        out.append(("GPU 0 overheats", "91 °C, thermal slowdown, SM clock halved",
                    lambda: self.gpu_fault("hot-0", pid)))
        out.append(("GPUs healthy again", "undo the ECC error and the heat",
                    lambda: self.gpu_faults_cleared(pid)))
        out.append(("traffic stops", "nobody uses the pod: the idle stop counts down",
                    (faults / "quiet").touch))
        out.append(("traffic resumes", "undo 'traffic stops'",
                    lambda: (faults / "quiet").unlink(missing_ok=True)))
        if pid not in self.pod_faults:
            for name in self._pod_profile(pid).profile.slots:
                out.append((f"gateway puts {name} in cooldown", "LiteLLM's calls to it fail "
                            "with 500 for 30 s: cooldowns, fallbacks, the alert",
                            functools.partial(self.gateway_cooldown, name)))
            out.append(("gateway down", "the LiteLLM proxy answers nothing, liveliness "
                        "included", lambda: (self.faults_dir / "gw-down").touch()))
            out.append(("gateway back up", "undo 'gateway down'",
                        lambda: (self.faults_dir / "gw-down").unlink(missing_ok=True)))
        if self.attached is None:  # the RunPod emulator lives in the demo's process
            out.append(("GPUs sold out", "every create and resume is refused",
                        self.sell_out))
            out.append(("GPUs back in stock", "undo 'GPUs sold out'", self.restock))
        return out

    def _pod_profile(self, pod_id: str | None) -> LoadedProfile:
        """The profile ``pod_id``'s pod runs: a ``--fleet`` extra pod's own copy, else the
        first shipped one (the first pod's, and a fallback's after it)."""
        d, name = self.pod_profiles.get(pod_id or "", (self.profiles_dir, ""))
        lps = load_profiles(d)
        return next((lp for lp in lps if lp.name == name), lps[0])

    def kill_slot(self, served: str) -> None:
        (self.faults_dir / f"kill-{served}").touch()

    def gateway_cooldown(self, slot: str) -> None:
        """The simulated LiteLLM puts the deployment of ``slot`` in cooldown."""
        (self.faults_dir / f"gw-cooldown-{slot}").touch()

    def stall_slot(self, served: str) -> None:
        """The engine hangs (the field's silent hang): ended by restarting the slot."""
        (self.faults_dir / f"stall-{served}").touch()

    def gpu_fault(self, name: str, pod_id: str | None = None) -> None:
        """A file the NVML stand-in of one pod reads (``console/demo/fakenvml``): the
        current pod's, unless ``pod_id`` names another."""
        (self.gpu_faults_dir(pod_id or self.current_pod()) / name).touch()

    def gpu_faults_cleared(self, pod_id: str | None = None) -> None:
        d = self.gpu_faults_dir(pod_id or self.current_pod())
        for f in [*d.glob("dbe-*"), *d.glob("hot-*"),
                  *d.glob("xid-*")]:  # delivered already; Xids are events
            f.unlink(missing_ok=True)

    def break_p2p(self) -> None:
        self.torch = "hang"
        for t in self._transports:
            t.env["FAKE_TORCH_MODE"] = "hang"

    def sell_out(self) -> None:
        with self.state.lock:
            self.state.stock = dict.fromkeys(self.state.stock, 0)
            self.state.resume_capacity = False

    def restock(self) -> None:
        with self.state.lock:
            self.state.stock = dict.fromkeys(self.state.stock, 4)
            self.state.resume_capacity = True

    # -- teardown ------------------------------------------------------------------
    async def stop(self) -> None:
        if self.attached is not None:
            return  # the demo is the other process's: it stops it
        await asyncio.to_thread(self._stop_all)

    # -- a second console on this demo (``demo --attach``) -----------------------------
    def attach_path(self) -> Path:
        """Where a running demo says how to reach it: its state directory (the one
        ``POD_CONSOLE_STATE_DIR`` or the user's state directory names, so a second
        terminal finds it with no argument)."""
        return self.state_dir() / ATTACH_FILE

    def write_attach(self, refresh_s: float = 2.0) -> Path:
        """The attach file: the demo's config (``write_config``), its RunPod
        emulator's address and the environment its first pod's agent runs in (the demo's
        own fake key; no secret of this machine: ``agent_env`` keeps none), owner-only."""
        assert self.pod_id is not None, "write_attach after start"
        config = self.write_config(refresh_s)
        info = {"pid": os.getpid(), "token": self.token, "workdir": str(self.workdir),
                "config": str(config), "pod_id": self.pod_id,
                "gateway": self.gateway_port is not None,
                "session_env": self.session_env(),
                "agent_argv": [sys.executable, "-m", "pod_agent"],
                "agent_env": self.transport_for(self.pod_id).env}
        path = self.attach_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(info, fh)
        tmp.replace(path)
        return path

    def _drop_attach(self) -> None:
        """The attach file goes with the demo that wrote it (not another's)."""
        path = self.attach_path()
        with contextlib.suppress(OSError, ValueError):
            if json.loads(path.read_text()).get("token") == self.token:
                path.unlink()

    @classmethod
    def attached_to(cls, path: Path) -> DemoDeployment:
        """A view of the demo whose attach file is ``path``: its faults, its agent, its
        RunPod; raises ``DemoNotRunning`` when none runs there."""
        try:
            info = json.loads(path.read_text())
            pid = int(info["pid"])
            os.kill(pid, 0)
        except FileNotFoundError:
            raise DemoNotRunning(f"no demo is running ({path} is not there): start one "
                                 "with pod-console demo, demo --wall or demo --web") from None
        except ProcessLookupError:
            raise DemoNotRunning(f"the demo that wrote {path} has ended") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DemoNotRunning(f"{path}: not a demo's attach file ({exc})") from None
        demo = cls(workdir=Path(info["workdir"]))
        demo.attached = info
        demo.pod_id = info["pod_id"]
        demo.token = str(info["token"])
        return demo

    def _stop_all(self, say: Callable[[str], object] | None = None) -> None:
        """End the demo: every process it started, at once and by its token (agents,
        slots, exporter, gateway, an agent a bootstrap is still starting), SIGKILL for
        what is left after ``STOP_GRACE_S``; the RunPod emulator beside them. ``say``:
        told what is being stopped, then how long it took (``pod-console demo`` prints
        it where the console was). A second call waits for the first and does nothing."""
        with self._teardown:
            if self._closing.is_set():
                return
            self._closing.set()
            t0 = time.monotonic()
            procs = reaper.marked(self.token)
            if say is not None:
                what = reaper.describe(procs)
                say(f"stopping the demo: {what + ', ' if what else ''}RunPod emulator…")
            # the emulator's hosts stop nothing now (``_closing``): its server ends beside
            emulator = threading.Thread(target=self.emulator.stop, name="stop-emulator",
                                        daemon=True)
            emulator.start()
            killed = reaper.end_marked(self.token, STOP_GRACE_S)
            for proc in [*self.agents.values(), self.gateway, self.exporter]:
                if proc is not None:  # ended: reaped, not left a zombie
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(1)
            self.agents.clear()
            self._close_watcher()
            emulator.join(5)
            for t in self._late_stops:
                t.join(1)  # each ends on ``_closing``
            self._drop_attach()
            if self.own_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)
            if say is not None:
                late = f" ({len(killed)} killed after {STOP_GRACE_S:g} s)" if killed else ""
                say(f"demo stopped in {time.monotonic() - t0:.1f} s{late}")

    def _close_watcher(self) -> None:
        """The watcher's pipe closed: it looks once more (nothing is left) and exits."""
        if self._watch_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._watch_fd)
            self._watch_fd = None
        if self._watcher is not None:
            try:
                self._watcher.wait(3)
            except subprocess.TimeoutExpired:
                self._watcher.kill()
                self._watcher.wait(1)
            self._watcher = None
