"""Every process the demo started ends with the demo, however the demo ends.

Each of them — the pod agents (and what their bootstrap ``setsid``'d), their simulated
slots, the GPU exporter, the gateway — carries ``MARK=<token>`` in its environment, a
token of this demo alone; environments are inherited, so a grandchild started by an
agent carries it too, whatever session or process group it moved to. Two ways end them:

  * the demo's teardown (``q``, SIGTERM, SIGHUP, a crash): ``end_marked`` here, in the
    demo's own process — all of them signalled at once, not pod after pod;
  * the demo killed outright (SIGKILL, the OOM killer: no code of its runs): a watcher
    process (``python -m console.demo.reaper TOKEN``, its own session, so a terminal's
    hang-up does not reach it) reads a pipe whose only writer is the demo. The kernel
    closes that end when the demo dies, for any reason; the watcher reads EOF and ends
    what still carries the token. A parent-death signal would not do: it is sent when
    the *thread* that forked exits (the demo starts agents from worker threads), and it
    does not reach a grandchild.

Processes are found by the token in ``/proc/<pid>/environ`` (Linux), never by a name
shared with anyone else's: a process that is not the demo's cannot carry its token.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

MARK = "POD_CONSOLE_DEMO_RUN"
"""The environment variable that names the demo a process belongs to."""


def _environ(pid: int) -> list[bytes]:
    """A process's environment at its start (empty for a zombie: it has ended)."""
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return []


def marked(token: str) -> dict[int, dict[str, str]]:
    """The running processes that carry ``token``: pid → their command line and the
    simulated pod they belong to (``RUNPOD_POD_ID``, empty if none)."""
    want = f"{MARK}={token}".encode()
    me = os.getpid()
    out: dict[int, dict[str, str]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        env = _environ(int(d.name))
        if want not in env:
            continue
        pod = next((e.split(b"=", 1)[1].decode(errors="replace") for e in env
                    if e.startswith(b"RUNPOD_POD_ID=")), "")
        with contextlib.suppress(OSError):
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            out[int(d.name)] = {"cmd": cmd.strip(), "pod": pod}
    return out


def describe(procs: dict[int, dict[str, str]]) -> str:
    """What ``procs`` are, in a person's words: ``agent of pod X, 2 slots, gateway``."""
    agents = sorted({p["pod"] or "?" for p in procs.values() if " serve " in f"{p['cmd']} "
                     and "pod_agent" in p["cmd"]})
    slots = sum("fake_vllm" in p["cmd"] for p in procs.values())
    exporters = sum("pod_agent exporter" in p["cmd"] for p in procs.values())
    gateways = sum("fake_litellm" in p["cmd"] for p in procs.values())
    words = []
    if agents:
        words.append(("agent of pod " if len(agents) == 1 else "agents of pods ")
                     + ", ".join(agents))
    if slots:
        words.append(f"{slots} slot{'s' if slots != 1 else ''}")
    if exporters:
        words.append("GPU exporter" + (f" ×{exporters}" if exporters > 1 else ""))
    if gateways:
        words.append("gateway")
    others = len(procs) - len(agents) - slots - exporters - gateways
    if others > 0:
        words.append(f"{others} other process{'es' if others != 1 else ''}")
    return ", ".join(words)


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def end_marked(token: str, grace_s: float = 1.5, poll_s: float = 0.05) -> list[int]:
    """SIGTERM every process carrying ``token`` at once (an agent stops its slots on
    it, a slot ends), SIGKILL what is left after ``grace_s``; looked for again until none
    is left (an agent may start a slot in between). The pids that needed SIGKILL."""
    deadline = time.monotonic() + grace_s
    termed: set[int] = set()
    while True:
        left = list(marked(token))
        if not left:
            return []
        fresh = [p for p in left if p not in termed]
        _signal(fresh, signal.SIGTERM)
        termed.update(fresh)
        if time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    killed: list[int] = []
    kill_deadline = time.monotonic() + 5.0
    while left and time.monotonic() < kill_deadline:
        _signal(left, signal.SIGKILL)
        killed += [p for p in left if p not in killed]
        time.sleep(poll_s)
        left = list(marked(token))
    return killed


def start_watcher(token: str) -> tuple[subprocess.Popen[bytes], int]:
    """The watcher process for ``token`` and the pipe's write end, to be held by the demo
    alone and closed at its end. That end closed, by the demo or by the kernel at the
    demo's death, the watcher ends what carries the token and exits."""
    read_end, write_end = os.pipe()  # both not inheritable: only the watcher gets one
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "console.demo.reaper", token], stdin=read_end,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            cwd=str(Path(__file__).resolve().parent.parent.parent),
            env={k: v for k, v in os.environ.items() if k != MARK})
    finally:
        os.close(read_end)
    return proc, write_end


def main(argv: list[str]) -> int:
    token = argv[0]
    # the terminal's signals are the demo's business: this one waits for its end
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        while os.read(0, 4096):
            pass
    end_marked(token)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
