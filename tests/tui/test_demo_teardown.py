"""Issue 30 #1: SIGTERM, SIGHUP and a crash of ``pod-console demo`` stop every process
the demo started — the pod agent (``pod_agent serve``), its simulated slots and the
GPU exporter — checked by pid. Before, SIGTERM ended the console with 143 and left the
exporter, the agent and two slots running; a crash exited 0.

The real program in a real terminal (tmux); the crash is one the error boundary cannot
survive (an exception in the app's own message loop), injected by a wrapper script
when the test asks for it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.procs import alive
from tests.tui.conftest import PATIENCE

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None and not os.environ.get("CI"),
                                reason="tmux not installed")

CRASHING = """
import sys
from pathlib import Path

import console.ui.app as ui_app

TRIGGER = Path(sys.argv.pop(1))
made = ui_app.make_app


def make_app(start, wall=False):
    app = made(start, wall=wall)

    def boom():
        raise RuntimeError("injected crash in the app's message loop")

    def watch():
        if TRIGGER.exists():
            TRIGGER.unlink()
            app.call_later(boom)  # runs in the app's own loop: not survivable

    was = app._became_ready

    def ready():
        was()
        app.set_interval(0.2, watch)

    app._became_ready = ready
    return app


ui_app.make_app = make_app
from console.cli import main  # noqa: E402

sys.exit(main())
"""


def _tmux(*args: str, check: bool = True) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30,
                          check=check).stdout




def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def _descendants(pid: int) -> dict[int, str]:
    kids, out, todo = _children(), {}, [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            try:
                out[c] = Path(f"/proc/{c}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            todo.append(c)
    return out


def _console_pid(shell: int) -> int:
    deadline = time.time() + 30 * PATIENCE
    while time.time() < deadline:
        for pid, cmd in _descendants(shell).items():
            if "python" in cmd and " demo " in f"{cmd} ":
                return pid
        time.sleep(0.2)
    raise AssertionError("the demo's process did not start")


def _started(console: int) -> dict[int, str]:
    """The demo's processes once every kind is up: the agent, the exporter, two slots."""
    deadline = time.time() + 120 * PATIENCE
    procs: dict[int, str] = {}
    while time.time() < deadline:
        procs = _descendants(console)
        kinds = [c for c in procs.values() if " serve " in c or " exporter " in c
                 or "fake_vllm" in c or "bin/vllm" in c]
        if (any(" serve " in c for c in kinds) and any(" exporter " in c for c in kinds)
                and sum("fake_vllm" in c or "bin/vllm" in c for c in kinds) >= 2):
            return procs
        time.sleep(0.5)
    raise AssertionError(f"the demo did not start all its processes: {procs}")


@pytest.mark.parametrize("how", ["SIGTERM", "SIGHUP", "crash"])
def test_the_demo_stops_every_process_it_started(how: str, tmp_path: Path) -> None:
    session = f"podconsole-teardown-{os.getpid()}-{how}"
    state = tmp_path / "state"
    rc_file, trigger = tmp_path / "rc", tmp_path / "crash-now"
    script = tmp_path / "crashing.py"
    script.write_text(CRASHING)
    program = (f"{script} {trigger}" if how == "crash" else "-m console.cli")
    cmd = (f"cd {REPO} && TERM=xterm-256color PYTHONPATH={REPO} POD_CONSOLE_STATE_DIR={state} "
           f"{sys.executable} {program} demo --refresh 1 --seed 5; echo $? > {rc_file}; "
           "sleep 600")
    procs: dict[int, str] = {}
    _tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", cmd)
    try:
        shell = int(_tmux("display-message", "-p", "-t", session, "#{pane_pid}").strip())
        console = _console_pid(shell)
        procs = _started(console)
        deadline = time.time() + 120 * PATIENCE
        while time.time() < deadline and "DEMO" not in _tmux("capture-pane", "-p", "-t",
                                                              session):
            time.sleep(0.5)
        if how == "crash":
            trigger.write_text("now")
        else:
            os.kill(console, getattr(signal, how))
        deadline = time.time() + 120 * PATIENCE
        while time.time() < deadline and not rc_file.exists():
            time.sleep(0.2)
        assert rc_file.exists(), "the console did not exit"
        rc = int(rc_file.read_text().strip() or -1)
        expected = {"SIGTERM": 143, "SIGHUP": 129, "crash": 1}[how]
        assert rc == expected, (rc, _tmux("capture-pane", "-p", "-t", session))
        left = {p: c for p, c in procs.items() if alive(p)}
        assert not left, f"still running after the demo ended ({how}): {left}"
        if how == "crash":
            reports = list(state.glob("crash-*.txt"))
            assert len(reports) == 1, list(state.iterdir())
            text = reports[0].read_text()
            assert "injected crash" in text and "version: pod-console" in text
    finally:
        _tmux("kill-session", "-t", session, check=False)
        for pid in procs:  # a failed run leaves nothing behind either (by pid)
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
