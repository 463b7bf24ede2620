"""Issue 42: the demo as a plain ``pip install .`` puts it (no extras) stops an idle pod.

Installed without ``prometheus_client`` (an extra), the pod agent's watchdog died on its
first scrape, in silence, and the idle stop never came. Here the console and the agent
come from a venv made by ``tests/support/plain_venv.sh`` (``.ci/run`` makes it): the
demo at ×120 in a real terminal (tmux), the palette stops the traffic, and the pod's own
watchdog stops it for idleness, told as one INFO by watchdog."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.tui.test_pty import _quit_with_q, _screen_until, _tmux

VENV = Path(os.environ.get("POD_CONSOLE_PLAIN_VENV", "/opt/plain-venv"))

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None and not os.environ.get("CI"),
                                reason="tmux not installed")


def test_the_plain_install_demo_stops_an_idle_pod(tmp_path: Path) -> None:
    exe = VENV / "bin" / "pod-console"
    if not exe.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{exe} missing: .ci/run must run tests/support/plain_venv.sh")
        pytest.skip(f"no plain install at {VENV} (tests/support/plain_venv.sh makes it)")
    py = str(VENV / "bin" / "python")
    # the premise: what the extras add is not there
    for absent in ("prometheus_client", "textual_serve", "pytest"):
        got = subprocess.run([py, "-c", f"import {absent}"], capture_output=True,
                             timeout=60)
        assert got.returncode != 0, f"{absent} is in the plain venv"
    session = f"podconsole-plain-{os.getpid()}"
    # run from a directory of its own: nothing of this checkout on its path. The venv's
    # ``pod-console`` script is ``console.cli.run``; it is run as that, with the demo's
    # warning lead for a reader (25 real s, which widens the profile's 30 idle minutes
    # to 80 at ×120) given none: nobody reads it here, and the idle stop comes 15 real
    # seconds after the traffic stops instead of 43
    run = ("import sys; import console.demo.deployment as d; d.WARN_REAL_S = 0.0; "
           "sys.argv[0] = 'pod-console'; from console.cli import run; run()")
    cmd = (f"cd {tmp_path} && TERM=xterm-256color POD_CONSOLE_STATE_DIR={tmp_path / 'state'} "
           f"exec {py} -c \"{run}\" demo --refresh 1 --seed 5 --clock-speed 120")
    _tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "48", cmd)
    try:
        screen, up = _screen_until(session, lambda s: s.count(" UP ") >= 2, 240)
        assert up is not None, screen
        _tmux("send-keys", "-t", session, "C-p")
        screen, opened = _screen_until(session, lambda s: "Search for commands" in s, 30)
        assert opened is not None, screen
        _tmux("send-keys", "-t", session, "-l", "traffic stops")
        _tmux("send-keys", "-t", session, "Enter")
        # the idle stop after 30 idle pod minutes (15 real s) and its warning
        screen, stopped = _screen_until(session, lambda s: "INFO pod stopped (idle)" in s
                                        and "by watchdog" in s, 240)
        assert stopped is not None, screen
        assert "watchdog failing" not in screen and "Traceback" not in screen, screen
        _quit_with_q(session)
    finally:
        _tmux("kill-session", "-t", session, check=False)
