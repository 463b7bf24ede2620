"""Issue 42: ``q`` and SIGTERM end ``pod-console demo`` within 3 s, and while it stops the
terminal says what it is stopping.

It took ~31 s: the teardown stopped the agent, then the emulator's own stop called the
host's late stop, which waited 30 s for the (stopped) agent's socket to come back, and
the second teardown joined that wait; all the while the terminal showed "starting the
demo deployment…". The real program in a real terminal (tmux), a real demo deployment
(the agent, its two simulated slots, the exporter, the gateway); the time is from the
key (or the signal) to the shell's ``echo $?`` after the process ended, on the monotonic
clock."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.procs import alive
from tests.tui.conftest import PATIENCE
from tests.tui.test_demo_teardown import _console_pid, _started, _tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None and not os.environ.get("CI"),
                                reason="tmux not installed")

QUIT_WITHIN_S = 3.0


@pytest.mark.parametrize("how", ["q", "SIGTERM"])
def test_the_demo_quits_within_3_s_saying_what_it_stops(how: str, tmp_path: Path) -> None:
    session = f"podconsole-quit-{os.getpid()}-{how}"
    rc_file = tmp_path / "rc"
    cmd = (f"cd {REPO} && TERM=xterm-256color PYTHONPATH={REPO} "
           f"POD_CONSOLE_STATE_DIR={tmp_path / 'state'} {sys.executable} -m console.cli "
           f"demo --refresh 1 --seed 5; echo $? > {rc_file}; sleep 600")
    procs: dict[int, str] = {}
    _tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", cmd)
    try:
        shell = int(_tmux("display-message", "-p", "-t", session, "#{pane_pid}").strip())
        console = _console_pid(shell)
        procs = _started(console)
        deadline = time.monotonic() + 120 * PATIENCE
        while time.monotonic() < deadline and " UP " not in _tmux("capture-pane", "-p", "-t",
                                                                   session):
            time.sleep(0.2)  # the console is up and reading its slots
        t0 = time.monotonic()
        if how == "q":
            _tmux("send-keys", "-t", session, "q")
        else:
            os.kill(console, signal.SIGTERM)
        deadline = t0 + 60 * PATIENCE
        while time.monotonic() < deadline and not (rc_file.exists()
                                                   and rc_file.read_text().strip()):
            time.sleep(0.02)
        took = time.monotonic() - t0
        screen = _tmux("capture-pane", "-p", "-t", session)
        assert rc_file.exists(), f"the demo did not end: {screen}"
        assert int(rc_file.read_text()) == {"q": 0, "SIGTERM": 143}[how], screen
        print(f"{how}: the demo ended {took:.2f} s after it was asked")
        assert took < QUIT_WITHIN_S, f"{how}: {took:.1f} s to end the demo\n{screen}"
        # what it stopped, said where the console was (not "starting the demo…" alone)
        assert "stopping the demo: agent of pod emu" in screen, screen
        assert "2 slots" in screen and "gateway" in screen, screen
        assert "demo stopped in" in screen, screen
        left = {p: c for p, c in procs.items() if alive(p)}
        assert not left, f"still running after the demo ended ({how}): {left}"
    finally:
        _tmux("kill-session", "-t", session, check=False)
        for pid in procs:  # a failed run leaves nothing behind either (by pid)
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
