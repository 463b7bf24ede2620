"""Emulated RunPod pods whose hosts are real: one OpenSSH server per pod, the real agent.

Each created pod gets its own sshd on a loopback port with the pod's environment
set by ``SetEnv`` (its own agent home, its driver CUDA for the nvidia-smi
stand-in, the simulated vLLM on PATH). Stopping or terminating the pod shuts
its agent (and slots) down and stops its sshd.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from console.operations.provision import ProvisionConfig, Provisioner
from console.sources.provider.emulator import EmulatorServer, EmulatorState, HostInfo
from console.sources.provider.runpod import RunPodClient
from console.sources.remote import AgentEndpoint, AgentTransport
from pod_agent.profiles import load_profiles
from tests.conftest import REPO

from . import procs
from .sshd import SshServer

DEMO_BIN = REPO / "console" / "demo" / "bin"
FAKETORCH = REPO / "console" / "demo" / "faketorch"


def write_profiles(d: Path, ports: list[int], bad_start: bool = False,
                   startup_s: float = 0.3) -> Path:
    """Two ordered profiles (kind A: two GPU ids, kind B: one) with one simulated slot each."""
    d.mkdir(parents=True, exist_ok=True)
    for i, (name, gpus) in enumerate((("10-kind-a.yaml", ["GPU A1", "GPU A2"]),
                                      ("20-kind-b.yaml", ["GPU B1"]))):
        kv = "1000@0.5/1000" if bad_start else "300000@0.5/1000000"
        doc = {
            "gpu_type_ids": gpus, "gpu_count": 2, "image": "sim/vllm:latest",
            "min_cuda": "13.0",
            "slots": {"MAIN": {
                "served_model_name": f"model-{i}", "hf_repo_id": "sim/model",
                "port": ports[0], "gpus": [0, 1], "gpu_util": 0.5, "max_model_len": 4096,
                "startup_timeout_s": 30,
                "env": {"DEMO_KV": kv, "DEMO_STARTUP_S": str(startup_s), "DEMO_RATE": "1"}}},
            "aliases": {"default": "MAIN"},
        }
        (d / name).write_text(yaml.safe_dump(doc, sort_keys=False))
    return d


class PodHosts:
    """host_factory for the emulator: a real SSH host per pod."""

    def __init__(self, root: Path, client_key_dir: Path) -> None:
        self.root = root
        self.key_dir = client_key_dir
        self.servers: dict[str, SshServer] = {}
        self.started: list[str] = []

    def client_key(self) -> Path:
        key = self.key_dir / "client_ed25519"
        if not key.exists():
            self.key_dir.mkdir(parents=True, exist_ok=True)
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                           check=True)
        return key

    def __call__(self, pod: dict[str, Any]) -> HostInfo:
        pid = pod["id"]
        home = self.root / pid
        hf = home / "hf" / "hub" / "models--sim--model"
        hf.mkdir(parents=True, exist_ok=True)
        srv = SshServer(home / "sshd")
        srv.workdir.mkdir(parents=True, exist_ok=True)
        # share one client key across pods, as an operator would
        key = self.client_key()
        for suffix in ("", ".pub"):
            dst = Path(str(srv.client_key) + suffix)
            if not dst.exists():
                dst.write_bytes(Path(str(key) + suffix).read_bytes())
                os.chmod(dst, 0o600)
        env = {
            "PATH": f"{DEMO_BIN}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "POD_AGENT_HOME": str(home / "agent"), "RUNPOD_POD_ID": pid,
            "FAKE_NVIDIA_SMI_GPUS": str(pod["gpu"]["count"]),
            "FAKE_NVIDIA_SMI_CUDA": pod["cudaVersion"], "HF_HOME": str(home / "hf"),
            "POD_CONSOLE_DEMO_PYTHON": sys.executable, "POD_AGENT_P2P_TIMEOUT": "5",
            "PYTHONPATH": f"{REPO}:{FAKETORCH}", "FAKE_TORCH_MODE": "good",
            "POD_AGENT_MEM_FLOOR_GIB": "0.1",
        }
        srv.env = env
        srv.start()
        self.servers[pid] = srv
        self.started.append(pid)
        return HostInfo("127.0.0.1", srv.port, pod["cudaVersion"], {},
                        stop=lambda: self.stop(pid))

    def stop(self, pid: str) -> None:
        srv = self.servers.pop(pid, None)
        home = self.root / pid
        from pod_agent.paths import socket_path_for

        if Path(socket_path_for(str(home / "agent"))).exists():
            env = dict(os.environ, POD_AGENT_HOME=str(home / "agent"), PYTHONPATH=str(REPO))
            with contextlib.suppress(Exception):
                subprocess.run([sys.executable, "-m", "pod_agent", "shutdown"], env=env,
                               capture_output=True, timeout=30)
        if srv is not None:
            srv.stop()
        # an agent started just before the pod was stopped (not yet listening when the
        # shutdown was sent) would outlive the test: found by its pod's own home
        procs.stop_pids(procs.pids_with_env("POD_AGENT_HOME", str(home / "agent")))

    def stop_all(self) -> None:
        for pid in list(self.servers):
            self.stop(pid)
        for pid in self.started:  # stopped earlier, perhaps before its agent was up
            procs.stop_pids(procs.pids_with_env("POD_AGENT_HOME",
                                                str(self.root / pid / "agent")))


def free_ports(n: int) -> list[int]:
    return [procs.free_port() for _ in range(n)]


KEY = "rp-test-key"
POLL_PAUSE_S = 0.25


class World:
    def __init__(self, root: Path, bad_start: bool = False, startup_s: float = 0.3) -> None:
        self.root = root
        self.port = free_ports(1)[0]
        self.profiles_dir = write_profiles(root / "profiles", [self.port], bad_start,
                                           startup_s)
        self.hosts = PodHosts(root / "pods", root / "keys")
        self.state = EmulatorState(api_key=KEY, host_factory=self.hosts)
        self.state.stock = {"GPU A1": 0, "GPU A2": 0, "GPU B1": 0}
        self.server = EmulatorServer(self.state)
        self.sleeps: list[float] = []
        self.lines: list[str] = []

    async def sleep(self, s: float) -> None:
        """Recorded, not waited: a 10-minute wait between rounds costs nothing. A poll's
        pause is kept short but real (a quarter second at most): waiting 0 s turned every
        wait for a pod into back-to-back SSH commands, a core busy for nothing."""
        self.sleeps.append(s)
        await asyncio.sleep(min(s, POLL_PAUSE_S))

    def provisioner(self, key: str = KEY, client_timeout_s: float = 20.0,
                    **cfg) -> Provisioner:
        client = RunPodClient(key, self.server.base_url, sleep=self.sleep,
                              timeout_s=client_timeout_s)
        conf = ProvisionConfig(rounds=3, round_wait_s=600, ssh_wait_s=60, health_wait_s=60,
                               poll_s=0.5, agent_dir=str(self.root / "pods" / "{pod}" /
                                                         "agent-dir"),
                               python=sys.executable, render_dir=self.root / "rendered",
                               ledger=self.root / "state" / "pods.jsonl")
        for k, v in cfg.items():
            setattr(conf, k, v)

        def factory(pod, agent_cmd):
            host, port = pod.ssh_endpoint
            return AgentTransport(AgentEndpoint(host, port, "root", self.hosts.client_key(),
                                                pod.id, agent_cmd), self.root / "state")

        return Provisioner(client, load_profiles(self.profiles_dir), factory, conf,
                           sleep=self.sleep, log=self.lines.append)

    def running(self) -> list[str]:
        return sorted(p["id"] for p in self.state.running_pods())
