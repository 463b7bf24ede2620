"""A demo's wall is shown an incident from a second, operator console (issue 47, #7):
``pod-console demo --wall`` in one real terminal (tmux), ``pod-console demo --attach``
in another; a fault picked in the second's palette lands on the first's pod, and the
wall shows it. Quitting the operator's console stops nothing of the demo."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.procs import alive

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None and not os.environ.get("CI"),
                                reason="tmux not installed")


SOCKET = f"pc-attach-{os.getpid()}"
"""A tmux server of this test's own: another's settings (a window size) are not its."""


def _tmux(*args: str, check: bool = True) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True,
                          timeout=30, check=check).stdout


def _screen_until(session: str, cond, limit_s: float) -> str:
    deadline = time.time() + limit_s
    screen = ""
    while time.time() < deadline:
        screen = _tmux("capture-pane", "-p", "-t", session)
        if cond(screen):
            return screen
        time.sleep(0.5)
    raise AssertionError(f"{session} never showed what was waited for:\n{screen}")


def _console(state: Path, *args: str) -> str:
    # COLUMNS/LINES of the test's own process would pin Textual's size at 80x24
    return (f"cd {REPO} && exec env -u COLUMNS -u LINES TERM=xterm-256color "
            f"PYTHONPATH={REPO} POD_CONSOLE_STATE_DIR={state} "
            f"{sys.executable} -m console.cli demo {' '.join(args)}")


def test_attach_without_a_demo_says_so(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "console.cli", "demo", "--attach"],
                       capture_output=True, text=True, timeout=60, cwd=REPO,
                       env=dict(os.environ, PYTHONPATH=str(REPO),
                                POD_CONSOLE_STATE_DIR=str(tmp_path)))
    assert r.returncode == 2 and "no demo is running" in r.stderr, r.stderr


def test_a_fault_from_an_attached_console_shows_on_the_demo_wall(tmp_path: Path) -> None:
    state = tmp_path / "state"
    wall, op = f"pc-wall-{os.getpid()}", f"pc-op-{os.getpid()}"
    _tmux("new-session", "-d", "-s", wall, "-x", "160", "-y", "48",
          _console(state, "--wall", "--refresh", "1", "--rotate", "3600"))
    wall_pid = int(_tmux("display-message", "-p", "-t", wall, "#{pane_pid}").strip())
    try:
        # the wall says how it is driven
        first = _screen_until(wall, lambda s: s.count("UP") >= 2 and "GPU0" in s
                              and "faults: pod-console demo --attach" in s, 240)
        assert (state / "demo-attach.json").exists()
        assert "°C" in first and "91°C" not in first
        _tmux("new-session", "-d", "-s", op, "-x", "120", "-y", "40",
              _console(state, "--attach", "--refresh", "1"))
        op_pid = int(_tmux("display-message", "-p", "-t", op, "#{pane_pid}").strip())
        _screen_until(op, lambda s: s.count("UP") >= 2 and "READ-ONLY" not in s, 120)
        _tmux("send-keys", "-t", op, "C-p")
        _screen_until(op, lambda s: "Search for commands" in s or "Demo fault" in s, 30)
        _tmux("send-keys", "-t", op, "-l", "GPU 0 overheats")
        _screen_until(op, lambda s: "overheats" in s, 30)
        _tmux("send-keys", "-t", op, "Enter")
        _screen_until(op, lambda s: "fault injected: GPU 0 overheats" in s, 60)
        # the wall, another process, reads its pod's exporter: the hot GPU is there
        _screen_until(wall, lambda s: "91°C" in s, 90)
        # the operator leaves; the demo and its wall go on
        _tmux("send-keys", "-t", op, "q")
        deadline = time.time() + 60
        while time.time() < deadline and alive(op_pid):
            time.sleep(0.2)
        assert not alive(op_pid), "the attached console did not quit on q"
        assert alive(wall_pid)
        _screen_until(wall, lambda s: s.count("UP") >= 2, 30)
    finally:
        _tmux("kill-session", "-t", op, check=False)
        _tmux("kill-session", "-t", wall, check=False)
        _tmux("kill-server", check=False)  # this test's own server (its socket)
    deadline = time.time() + 120  # SIGHUP: the demo stops what it started
    while time.time() < deadline and alive(wall_pid):
        time.sleep(0.2)
    assert not alive(wall_pid)
    assert not (state / "demo-attach.json").exists(), "the attach file outlived its demo"
