"""Issue 44: the demo's processes never outlive it, and never listen beyond loopback.

* ``bench/tui_bench.py`` stopped by ``timeout`` (SIGTERM, no handler: no ``finally``
  runs) and a ``pod-console demo`` killed outright (SIGKILL) left the demo's agent, both
  slots, the exporter and the gateway running, orphaned. Here a parent that starts a real
  demo deployment is killed both ways; every process it started (found by the tree of
  the parent's pid while it lived, recorded before the kill) must be gone, a watcher
  process included.
* The demo's slots, gateway and exporters must listen on loopback only: the agent's own
  exporter (a profile's ``gpu_metrics_port``) listened on 0.0.0.0, reachable from the
  LAN. The listening sockets of the demo's processes are read from ``/proc/net/tcp*``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from console.demo import reaper
from console.demo.deployment import DemoDeployment, shipped_profiles_dir
from tests.conftest import REPO
from tests.support.procs import alive, cmdline, descendants
from tests.tui.conftest import PATIENCE

PARENT = """
import sys, time
from pathlib import Path
from console.demo.deployment import DemoDeployment

demo = DemoDeployment(workdir=Path(sys.argv[1]), startup_s=1.0)
demo.start()
print("started", flush=True)
time.sleep(600)  # killed long before
"""


def _kinds(cmds: list[str]) -> dict[str, int]:
    return {"agent": sum(" serve " in c and "pod_agent" in c for c in cmds),
            "exporter": sum("pod_agent exporter" in c for c in cmds),
            "gateway": sum("fake_litellm" in c for c in cmds),
            "slots": sum("fake_vllm" in c for c in cmds)}


def _all_started(parent: int, limit_s: float) -> dict[int, str]:
    """The parent's processes once the agent, the exporter, the gateway and both slots
    are up (slots are the agent's children: grandchildren of the parent)."""
    deadline = time.monotonic() + limit_s
    procs: dict[int, str] = {}
    while time.monotonic() < deadline:
        procs = {p: cmdline(p) for p in descendants(parent)}
        k = _kinds(list(procs.values()))
        if k["agent"] and k["exporter"] and k["gateway"] and k["slots"] >= 2:
            return {p: c for p, c in procs.items() if alive(p)}
        time.sleep(0.2)
    raise AssertionError(f"the demo did not start all its processes: {procs}")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_demo_parent_leaves_no_process(sig: signal.Signals, tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path / "demo")], env=env,
                              cwd=str(REPO), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    procs: dict[int, str] = {}
    try:
        procs = _all_started(parent.pid, 60 * PATIENCE)
        assert any("console.demo.reaper" in c for c in procs.values()), procs
        os.kill(parent.pid, sig)  # SIGTERM without a handler: as abrupt as SIGKILL
        parent.wait(10)
        deadline = time.monotonic() + 15 * PATIENCE
        while time.monotonic() < deadline and any(alive(p) for p in procs):
            time.sleep(0.1)
        left = {p: c for p, c in procs.items() if alive(p)}
        assert not left, f"still running after the demo's parent was killed: {left}"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(5)
        for pid in procs:  # a failed run leaves nothing behind either (by pid)
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _listening() -> dict[str, str]:
    """Socket inode → the local address (``hex ip:hex port``) of every listening TCP
    socket of this machine (IPv4 and IPv6)."""
    out: dict[str, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                f = line.split()
                if f[3] == "0A":  # TCP_LISTEN
                    out[f[9]] = f[1]
    return out


def _sockets(pid: int) -> set[str]:
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:["):-1])
    return inodes


LOOPBACK = {"0100007F", "00000000000000000000000001000000"}
"""127.0.0.1 and ::1 as ``/proc/net/tcp*`` write them (each 32-bit word little-endian)."""


def test_the_demo_listens_on_loopback_only(tmp_path: Path) -> None:
    """Every listening socket of the demo's processes — both slots, the gateway, the
    demo's exporter and the agent's own (the profile asks for one) — is on loopback."""
    src = tmp_path / "profiles"
    src.mkdir()
    for i, f in enumerate(sorted(shipped_profiles_dir().glob("*.yaml"))):
        data = yaml.safe_load(f.read_text())
        if i == 0:
            data["gpu_metrics_port"] = 9400  # the agent starts its exporter there
        (src / f.name).write_text(yaml.safe_dump(data, sort_keys=False))
    demo = DemoDeployment(workdir=tmp_path / "demo", startup_s=1.0, profiles_src=src)
    try:
        demo.start()
        deadline = time.monotonic() + 60 * PATIENCE
        found: dict[int, list[str]] = {}
        while time.monotonic() < deadline:
            listening = _listening()
            procs = reaper.marked(demo.token)
            found = {p: [listening[i] for i in _sockets(p) if i in listening] for p in procs}
            cmds = [procs[p]["cmd"] for p, addrs in found.items() if addrs]
            k = _kinds(cmds)
            if k["exporter"] >= 2 and k["gateway"] and k["slots"] >= 2:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"not every listener of the demo came up: {found}")
        wide = {p: [a for a in addrs if a.split(":")[0] not in LOOPBACK]
                for p, addrs in found.items()}
        wide = {p: a for p, a in wide.items() if a}
        assert not wide, {p: (cmdline(p), a) for p, a in wide.items()}
    finally:
        demo._stop_all()
