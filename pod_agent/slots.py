"""One slot's ``vllm serve`` process: start, watch start-up progress, health, stop.

The process runs in its own session so SIGTERM/SIGKILL reach the whole group:
vLLM forks ``EngineCore`` and ``Worker`` processes that otherwise outlive the
API server and keep GPU memory. Start-up progress is read from vLLM's own log
lines, because loading weights alone can take five minutes of silence on
``/health``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from .engines import VLLM, PodEngine
from .engines.base import PhaseClock
from .launch import SECRET_ENV, SlotCommand
from .logrotate import RotatingLog

# (pattern, step, fraction): the last matching line tells where start-up is.
PROGRESS_PATTERNS: list[tuple[re.Pattern, str, float]] = [
    (re.compile(r"Initializing a V1 LLM engine|vLLM API server version", re.I), "init", 0.05),
    (re.compile(r"Starting to load model|Loading weights|Loading safetensors", re.I),
     "loading weights", 0.15),
    (re.compile(r"Loading weights took|Model loading took", re.I), "weights loaded", 0.55),
    (re.compile(r"(GPU|CPU) KV cache size|Maximum concurrency", re.I), "kv cache sized", 0.7),
    (re.compile(r"Capturing CUDA graph|torch\.compile|Compiling a graph|warming up", re.I),
     "graph capture / compile", 0.8),
    (re.compile(r"Graph capturing finished|init engine .* took|Warmup took", re.I),
     "engine ready", 0.9),
    (re.compile(r"Application startup complete|Uvicorn running", re.I), "server up", 0.97),
]
KV_TOKENS_RE = re.compile(r"KV cache size:\s*([\d,]+)\s*tokens", re.I)


def classify_line(line: str) -> tuple[str, float] | None:
    found = None
    for pat, step, frac in PROGRESS_PATTERNS:
        if pat.search(line):
            found = (step, frac)
    return found


@dataclass
class SlotState:
    name: str
    state: str = "stopped"
    """stopped | starting | ready | crashed | backoff | stopping | failed"""
    pid: int | None = None
    step: str = ""
    fraction: float = 0.0
    restarts: int = 0
    started_at: float | None = None
    ready_at: float | None = None
    last_startup_s: float | None = None
    last_exit: int | None = None
    kv_tokens: int | None = None
    detail: str = ""
    history: list[str] = field(default_factory=list)
    phase: str | None = None
    """The start-up phase now (downloading, loading weights, …, ready), from the log."""
    phases: list[tuple[str, float]] = field(default_factory=list)
    """(phase, seconds) of the start under way or the last one: the current phase's so far."""
    last_phases: list[tuple[str, float]] = field(default_factory=list)
    """(phase, seconds) of the last start that reached ready, kept beside the current."""

    def to_json(self) -> dict[str, object]:
        return {"state": self.state, "pid": self.pid, "step": self.step,
                "phase": self.phase, "phases": [list(p) for p in self.phases],
                "last_phases": [list(p) for p in self.last_phases],
                "fraction": round(self.fraction, 3), "restarts": self.restarts,
                "started_at": self.started_at, "ready_at": self.ready_at,
                "last_startup_s": self.last_startup_s, "last_exit": self.last_exit,
                "kv_tokens": self.kv_tokens, "detail": self.detail}


def health_ok(port: int, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def group_rss_kib(pgid: int) -> int:
    """Resident memory of every process in a process group (reads /proc)."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # field 5 (pgrp) after the comm
                continue
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total


class SlotProcess:
    """Runs one slot command; the supervisor owns restart policy."""

    def __init__(self, name: str, port: int, log_path: str, grace_s: float = 20.0,
                 engine: PodEngine = VLLM) -> None:
        self.name = name
        self.clock = PhaseClock(engine)
        """The start-up phases, read from the engine's own log lines."""
        self.port = port
        self.state = SlotState(name)
        self.log = RotatingLog(log_path)
        self.grace_s = grace_s
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task | None = None

    async def start(self, cmd: SlotCommand, env_extra: dict[str, str]) -> None:
        env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
        env.update(env_extra)
        env.update(cmd.env)
        for k in cmd.secret_env:  # secrets pass through by environment only
            if k in os.environ:
                env[k] = os.environ[k]
        self.log.write(f"--- pod-agent: starting {self.name}: {' '.join(cmd.argv)}\n")
        self.proc = await asyncio.create_subprocess_exec(
            *cmd.argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env=env, start_new_session=True)
        st = self.state
        st.state, st.pid, st.step, st.fraction = "starting", self.proc.pid, "spawned", 0.02
        st.started_at, st.ready_at, st.detail = time.time(), None, ""
        self.clock.start(time.time())
        self._phases_now()
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            raw = await self.proc.stdout.readline()
            if not raw:
                break
            line = raw.decode("utf-8", "replace")
            self.log.write(line)
            if self.state.state == "starting":
                self.clock.line(line, time.time())
                self._phases_now()
                hit = classify_line(line)
                if hit and hit[1] >= self.state.fraction:
                    self.state.step, self.state.fraction = hit
            m = KV_TOKENS_RE.search(line)
            if m:
                self.state.kv_tokens = int(m.group(1).replace(",", ""))

    def _phases_now(self) -> None:
        """The state's phase fields from the clock, as of now."""
        st, c = self.state, self.clock
        st.phase, st.phases, st.last_phases = c.current, c.times(time.time()), list(c.last)

    def phases_json(self) -> dict[str, object]:
        """The phase fields with the current phase's seconds up to now (status asks)."""
        self._phases_now()
        return {"phase": self.state.phase, "phases": [list(p) for p in self.state.phases],
                "last_phases": [list(p) for p in self.state.last_phases]}

    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def running_pid(self) -> int | None:
        """The engine's pid while it runs (its process group's id too), else None."""
        return self.proc.pid if self.proc is not None and self.proc.returncode is None \
            else None

    async def wait_healthy(self, timeout_s: float, poll_s: float = 1.0) -> bool:
        deadline = time.monotonic() + timeout_s
        loop = asyncio.get_running_loop()
        while time.monotonic() < deadline:
            if not self.running():
                return False
            if await loop.run_in_executor(None, health_ok, self.port):
                st = self.state
                st.state, st.step, st.fraction, st.ready_at = "ready", "ready", 1.0, time.time()
                st.last_startup_s = round(st.ready_at - (st.started_at or st.ready_at), 1)
                self.clock.ready(st.ready_at)
                self._phases_now()
                return True
            await asyncio.sleep(poll_s)
        return False

    async def stop(self) -> None:
        """SIGTERM the group, SIGKILL after the grace period; wait for every member."""
        proc = self.proc
        if proc is None:
            return
        self.state.state = "stopping"
        pgid = proc.pid
        self._signal(pgid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), self.grace_s)
        except asyncio.TimeoutError:
            self._signal(pgid, signal.SIGKILL)
            await proc.wait()
        # children (EngineCore, Worker) may outlive the leader for a moment
        deadline = time.monotonic() + self.grace_s
        while time.monotonic() < deadline and self._group_alive(pgid):
            await asyncio.sleep(0.1)
        if self._group_alive(pgid):
            self._signal(pgid, signal.SIGKILL)
        if self._reader is not None:
            try:
                await asyncio.wait_for(self._reader, 5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self._reader.cancel()
        self.state.last_exit = proc.returncode
        self.state.state, self.state.pid, self.state.step = "stopped", None, ""
        self.state.fraction = 0.0
        self.proc = None

    @staticmethod
    def _signal(pgid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)

    @staticmethod
    def _group_alive(pgid: int) -> bool:
        try:
            os.killpg(pgid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True

    def tail(self, n: int) -> list[str]:
        return self.log.tail(n)
