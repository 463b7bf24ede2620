"""Start and stop real server processes for tests, by process id only."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv: list[str], log: Path, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """Start in its own process group so the whole tree can be stopped by pgid."""
    fh = open(log, "ab")  # noqa: SIM115 - the child owns it until it exits
    return subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                            start_new_session=True)


def stop(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL what is left after ``grace_s``."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
    # children that outlived the leader (vLLM's EngineCore) share its group id
    deadline = time.time() + grace_s
    while time.time() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def wait_http(url: str, timeout_s: float, proc: subprocess.Popen[bytes] | None = None,
              log: Path | None = None) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log else ""
            raise RuntimeError(f"process exited with {proc.returncode} before {url}:\n{tail}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-3000:] if log else ""
    raise TimeoutError(f"{url} not up after {timeout_s}s:\n{tail}")


def pids_with_env(key: str, value: str) -> list[int]:
    """Processes whose environment has ``key=value`` — a test's own, found by the unique
    temporary path it gave them (a ``setsid``'d agent outlives its SSH session)."""
    want = f"{key}={value}".encode()
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            env = (d / "environ").read_bytes()
        except OSError:
            continue
        if want in env.split(b"\0"):
            out.append(int(d.name))
    return out


def stop_pids(pids: list[int], grace_s: float = 10.0) -> None:
    """SIGTERM each (an agent stops its slots on it), then SIGKILL what is left."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.time() + grace_s
    for pid in pids:
        while time.time() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, their children…), read from each
    process's parent in ``/proc/<pid>/stat``: a test's own server's processes, found by
    the tree of the process it started, never by a name shared with anyone else's."""
    parents: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        # the command sits in parentheses and may hold spaces: the fields follow the last ')'
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(d.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ") \
            .decode(errors="replace").strip()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs. A zombie has ended: an orphan whose parent went first
    (a tmux server that quit with its last session) may wait on a reaper that never
    comes, and it must not read as a process that kept running."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
