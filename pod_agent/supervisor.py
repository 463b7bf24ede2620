"""``pod-agent serve``: keeps every slot running, rebalances, and stops the pod in the evening.

It listens on a Unix socket in the agent's home directory (mode 0600), never on
a network port: the console reaches it by running ``pod-agent …`` over SSH,
and those short-lived commands talk to this process. Long actions run here,
so a dropped SSH connection never leaves a half-done rebalance.

Its parts, each in its own module: the slots (``slot_keeper``), the watchdog
(``stop_watch``, with ``memory_guard``), the socket's requests (``dispatch``, read
with the models of ``requests``); this module starts them and says their state.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Dict

from . import audit, hostcheck, paths
from .actions import ActionBook
from .dispatch import dispatch, handle
from .gpu_monitor import SAMPLE_EVERY_S, GpuMonitor, slot_pgids
from .heartbeat import DEFAULT_INTERVAL_S, Heartbeat, agent_labels, configured_url
from .patches import apply_patch, vllm_site_root
from .profile import Profile
from .profiles import load_profile, profile_name
from .slot_keeper import BACKOFF_S, SlotKeeper
from .stop_watch import StopWatch

EXPORTER_SAMPLE_S = 1.0
"""GPU sampling when the profile serves GPU metrics (``gpu_metrics_port``): dcgm-exporter's
default pace; one sample of 8 GPUs costs ~0.3 ms of CPU (bench/gpu_telemetry_bench.py)."""


class Supervisor:
    def __init__(self, profile_path: str, *, vllm: str = "vllm",
                 models_root: str | None = None, backoff_s: tuple = BACKOFF_S,
                 watchdog_interval_s: float = 30.0, grace_s: float = 20.0,
                 health_poll_s: float = 1.0, apply_patches: bool = True,
                 pod_clock: Any = None,
                 heartbeat_interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.profile_path = os.path.abspath(profile_path)
        self.profile: Profile = load_profile(profile_path)
        self.vllm = vllm
        self.apply_patches = apply_patches
        self._stop = asyncio.Event()
        self.keeper = SlotKeeper(self.profile, self._stop, vllm=vllm, models_root=models_root,
                                 backoff_s=backoff_s, grace_s=grace_s,
                                 health_poll_s=health_poll_s)
        self.watch = StopWatch(self.profile, self.keeper, self._stop, pod_clock=pod_clock,
                               interval_s=watchdog_interval_s)
        self.book = ActionBook()
        self.background: set[asyncio.Task[Any]] = set()
        """Actions running: held here, the client may leave before one ends."""
        self.patch_results: list[dict[str, str]] = []
        self.started_at = time.time()
        self._server: asyncio.AbstractServer | None = None
        # with an exporter, the supervisor's sample is what Prometheus scrapes: taken
        # as often as the exporter serves it (the exporter holds no NVML of its own)
        self.gpus = GpuMonitor(audit.record, sample_every_s=EXPORTER_SAMPLE_S
                               if self.profile.gpu_metrics_port else SAMPLE_EVERY_S,
                               kmsg_path=os.environ.get("POD_AGENT_KMSG", "/dev/kmsg"))
        # the agent's own Watchdog alert to Alertmanager, when POD_AGENT_ALERTMANAGER_URL
        # is set: a dead-man's switch then tells this pod's agent gone from no console
        self.heartbeat = Heartbeat(
            agent_labels(os.environ.get("RUNPOD_POD_ID") or socket.gethostname(),
                         profile_name(Path(self.profile_path), self.profile)),
            heartbeat_interval_s, lambda: configured_url(paths.env_file()),
            self._say_heartbeat)

    # the parts' state, as tests and status read it
    @property
    def procs(self) -> Dict[str, Any]:
        return self.keeper.procs

    @property
    def clock(self) -> Any:
        return self.watch.clock

    async def watchdog_tick(self, now: float | None = None) -> None:
        await self.watch.tick(now)

    async def dispatch(self, req: Any, send: Any) -> None:
        """Answer one request (a model, or a decoded object read with its model)."""
        await dispatch(self, req, send)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await handle(self, reader, writer)

    def _say_heartbeat(self, record: dict[str, Any]) -> None:
        """The heartbeat starting to fail, failing for another reason, going through
        (again): one line in the agent's log and one audit record (never the URL:
        ``to`` is its scheme, host and port)."""
        if record.get("ok"):
            line = (f"heartbeat reaches Alertmanager at {record.get('to')} every "
                    f"{self.heartbeat.interval_s:g} s")
        else:
            line = (f"heartbeat to {record.get('to') or 'Alertmanager'} failed: "
                    f"{record.get('error')} ({record.get('failures')} failed so far; "
                    "tried again at every beat)")
        with contextlib.suppress(Exception):
            print(f"pod-agent: {line}", file=sys.stderr, flush=True)
        with contextlib.suppress(OSError):
            audit.record(record)

    # -- status --------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return {
            "supervisor": "running", "pid": os.getpid(), "started_at": self.started_at,
            "profile": self.profile.name, "profile_path": self.profile_path,
            "p2p_disabled": self.keeper.p2p_disabled(), "patches": self.patch_results,
            "slots": {n: {**p.state.to_json(), **p.phases_json(), "port": p.port,
                          "engine": getattr(self.profile.slots.get(n), "engine", "vllm"),
                          "gpu_util": self.keeper.utils[n]}
                      for n, p in self.procs.items()},
            "watchdog": self.watch.to_json(self.clock.now()),
            "mem_available_gib": hostcheck.mem_available_gib(),
            "actions": self.book.recent(),
            "gpus": self.gpu_status(),
            "heartbeat": self.heartbeat.state.to_json(),
        }

    def gpu_status(self) -> dict[str, Any]:
        return self.gpus.status(slot_pgids(
            {n: p.proc.pid if p.running() and p.proc else None
             for n, p in self.procs.items()}))

    # -- main ----------------------------------------------------------------------
    async def run(self) -> None:
        sock = paths.socket_path()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sock)
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self.handle, path=sock)
        finally:
            os.umask(old_umask)
        audit.record({"op": "serve", "profile": self.profile_path, "pid": os.getpid()})
        if self.apply_patches and self.profile.patches:
            self._apply_patches()
        for name in self.procs:
            self.keeper.start_supervising(name)
        wd = asyncio.ensure_future(self.watch.loop())
        hb = asyncio.ensure_future(self.heartbeat.run(self._stop))
        self.gpus.start()
        exporter = await self._start_exporter()
        try:
            await self._stop.wait()
        finally:
            wd.cancel()
            hb.cancel()
            self.gpus.stop()
            if exporter is not None and exporter.returncode is None:
                exporter.terminate()
                try:
                    await asyncio.wait_for(exporter.wait(), 10)
                except asyncio.TimeoutError:
                    exporter.kill()
            await self.keeper.pause_all()
            self._server.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(sock)

    async def _start_exporter(self) -> asyncio.subprocess.Process | None:
        """``pod-agent exporter`` on the profile's ``gpu_metrics_port``: its own process
        (metrics only; this supervisor keeps no port), with the token in
        ``$POD_AGENT_HOME/exporter.token`` when that file exists."""
        port = self.profile.gpu_metrics_port
        if port is None:
            return None
        # all interfaces: Prometheus reaches it through the pod's exposed port
        host = os.environ.get("POD_AGENT_EXPORTER_HOST", "0.0.0.0")
        argv = [sys.executable, "-m", "pod_agent", "exporter", "--listen", f"{host}:{port}",
                "--from-agent", "--interval", str(EXPORTER_SAMPLE_S)]
        token = paths.path("exporter.token")
        if os.path.exists(token):
            argv += ["--token-file", token]
        log = open(paths.path("exporter.log"), "ab")  # noqa: SIM115 - the child's
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdout=log, stderr=asyncio.subprocess.STDOUT,
                stdin=asyncio.subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()
        audit.record({"op": "exporter", "port": port, "pid": proc.pid,
                      "token": os.path.exists(token)})
        return proc

    def _apply_patches(self) -> None:
        root = os.environ.get("POD_AGENT_PATCH_ROOT") or vllm_site_root(self.vllm)
        pdir = os.path.join(os.path.dirname(self.profile_path), "patches")
        for name in self.profile.patches:
            if root is None:
                res = {"name": name, "state": "failed", "detail": "vLLM package not found"}
            else:
                r = apply_patch(os.path.join(pdir, name), root)
                res = {"name": r.name, "state": r.state, "detail": r.detail}
            self.patch_results.append(res)
            audit.record({"op": "patch", **res})

    def request_stop(self) -> None:
        self._stop.set()
