"""A console process ends even when a thread of it never does (its terminal went away:
it must not stay behind, asleep on a futex, with no screen)."""

from __future__ import annotations

import subprocess
import sys
import time

from tests.conftest import REPO

STUCK = """
import sys, threading
from console.ui.exit_guard import bound_exit
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


def test_the_threads_left_and_where_they_wait_go_to_errors_log(tmp_path) -> None:
    """After a hang-up stderr is a terminal that is gone: errors.log keeps the names of
    the threads that kept the process alive and the line each one waits on."""
    import threading

    from console.ui.exit_guard import overdue

    release = threading.Event()

    def wait_for_a_reply_that_never_comes() -> None:
        release.wait()

    stuck = threading.Thread(target=wait_for_a_reply_that_never_comes, name="stuck-worker")
    stuck.start()
    ended: list[int] = []
    try:
        overdue(129, 60.0, tmp_path / "state", end=ended.append)
    finally:
        release.set()
        stuck.join()
    assert ended == [129]
    log = (tmp_path / "state" / "errors.log").read_text()
    assert "not ended 60 s after it finished (threads left: " in log
    assert "thread 'stuck-worker':" in log and "wait_for_a_reply_that_never_comes" in log
    assert "release.wait()" in log  # the line it waits on


def test_the_command_and_python_m_both_go_through_the_guard() -> None:
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["pod-console"] == "console.cli:run"
    assert "    run()" in (REPO / "console" / "cli.py").read_text().split(
        'if __name__ == "__main__":', 1)[1]


def test_a_signal_arms_the_guard_only_outside_the_tests() -> None:
    """The app arms it when a signal or a closed terminal ends a real console (where the
    wait can be inside Textual's own exit), never in a headless app: a test's process
    would be ended by it."""
    src = (REPO / "console" / "ui" / "quitting.py").read_text()
    hangup = src.split("def _on_hangup(self) -> None:", 1)[1].split("\n    def ", 1)[0]
    assert "if not self.app.is_headless:" in hangup and "bound_exit(" in hangup
