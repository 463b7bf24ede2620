"""A console process ends even when a thread of it never does (its terminal went away:
it must not stay behind, asleep on a futex, with no screen)."""

from __future__ import annotations

import subprocess
import sys
import time

from tests.conftest import REPO

STUCK = """
import sys, threading
from console.cli import bound_exit
threading.Thread(target=threading.Event().wait, name="stuck-worker").start()  # never ends
bound_exit(7, 0.5)
sys.exit(7)
"""


def test_a_thread_that_never_ends_cannot_keep_the_process_alive() -> None:
    started = time.monotonic()
    p = subprocess.run([sys.executable, "-c", STUCK], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    took = time.monotonic() - started
    assert p.returncode == 7, p.stderr  # the console's own exit status
    assert "stuck-worker" in p.stderr and "ending now" in p.stderr, p.stderr
    assert took < 30, took


def test_the_command_and_python_m_both_go_through_the_guard() -> None:
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["pod-console"] == "console.cli:run"
    assert "    run()" in (REPO / "console" / "cli.py").read_text().split(
        'if __name__ == "__main__":', 1)[1]
