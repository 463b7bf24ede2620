"""A pod stopped while its agent was still starting (a fallback cancelled mid-way: the
bootstrap's ``setsid nohup … serve &`` already sent) left that agent and its slots
running after the demo ended: a run found one 49 minutes later. On a real pod it dies
with the pod; the demo now stops it once it is up, unless the pod was resumed meanwhile.

The agent here is its socket alone: a thread answering on the path the agent would
listen on, as the real client (``pod_agent shutdown``) finds it."""

from __future__ import annotations

import json
import shutil
import socket
import threading
from pathlib import Path

from console.demo.deployment import REPO, DemoDeployment, shipped_profiles_dir
from pod_agent.paths import socket_path_for
from tests.support.waits import holds_within


class FakeAgent:
    """Listens on ``path``; keeps each request it reads, answers it done."""

    def __init__(self, path: str) -> None:
        self.requests: list[dict[str, object]] = []
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        self.sock.listen()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                line = conn.makefile().readline()
                if line:
                    self.requests.append(json.loads(line))
                conn.sendall(b'{"final": {"ok": true}}\n')


def _demo(tmp: Path) -> DemoDeployment:
    """The demo's profiles in place, nothing started."""
    demo = DemoDeployment(workdir=tmp / "demo")
    demo.profiles_dir.mkdir(parents=True)
    for src in sorted(shipped_profiles_dir().glob("*.yaml")):
        demo._profile_copy(src)
    return demo


def _provisioned(demo: DemoDeployment, pid: str) -> str:
    """A pod its bootstrap has reached: the agent's code on it, no agent up yet."""
    pkg = demo.pod_home(pid) / "agent-dir" / "pkg"
    shutil.copytree(REPO / "pod_agent", pkg / "pod_agent",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return socket_path_for(str(demo.pod_home(pid) / "agent"))


def test_an_agent_up_after_its_pod_stopped_is_stopped(tmp_path: Path) -> None:
    demo = _demo(tmp_path)
    path = _provisioned(demo, "emu9")
    demo._stop_agent("emu9")  # the pod is gone; its agent is not up yet
    agent = FakeAgent(path)  # … and now it is
    try:
        assert holds_within(lambda: agent.requests, 30), "the late agent was never stopped"
        assert agent.requests == [{"op": "shutdown"}]
    finally:
        agent.sock.close()
        demo._stop_all()


def test_a_pod_resumed_meanwhile_keeps_its_new_agent(tmp_path: Path) -> None:
    demo = _demo(tmp_path)
    path = _provisioned(demo, "emu9")
    demo._stop_agent("emu9")
    with demo.state.lock:
        demo.state.pods["emu9"] = {"id": "emu9", "status": "RUNNING"}  # resumed
    agent = FakeAgent(path)
    try:
        for t in demo._late_stops:
            t.join(30)
        assert not any(t.is_alive() for t in demo._late_stops)
        assert agent.requests == []
    finally:
        agent.sock.close()
        with demo.state.lock:
            demo.state.pods.clear()


def test_a_pod_never_provisioned_waits_for_no_agent(tmp_path: Path) -> None:
    demo = _demo(tmp_path)
    demo._stop_agent("emu9")
    assert demo._late_stops == []
