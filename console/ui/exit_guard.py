"""The process ends, whatever is left running in it, a bounded time after the console has.

Imports nothing of Textual: ``console.cli.run`` arms it after ``main`` returns.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

EXIT_GRACE_S = 30.0
"""How long the process may take to end once ``main`` has returned (a console's demo
processes are stopped by then): past it, the threads still running are named and the
process ends anyway."""


QUIT_GRACE_S = 60.0
"""From a signal or a closed terminal to the end of the process, when no operation is in
flight: the app stops what it started (a demo's processes: ~3 s on a loaded machine) and
exits well inside it."""


def bound_exit(code: int, grace_s: float = EXIT_GRACE_S) -> None:
    """The process ends at most ``grace_s`` after this call, whatever is left running.

    A console whose terminal went away (SSH dropped: SIGHUP) must end. Python ends only
    once its non-daemon threads have (a worker thread of ``asyncio.to_thread`` included):
    one blocked for good would keep the console alive, with no terminal, for ever. That
    was seen once in tests/tui/test_pty.py: the process asleep on a futex, its children
    gone. This guard, a daemon thread, names what is still running on stderr and ends the
    process with its own exit status. Armed by the process's entry point
    (``console.cli.run``, after ``main``) and by the app when a signal or a closed
    terminal ends it (the wait may then be inside Textual's own exit); never inside
    another process (the tests call ``main`` and run headless apps)."""
    def guard() -> None:
        threading.Event().wait(grace_s)
        me = threading.current_thread()
        left = [t.name for t in threading.enumerate()
                if t is not me and t is not threading.main_thread()]
        with contextlib.suppress(Exception):  # the terminal may be gone
            print(f"pod-console: not ended {grace_s:g} s after it finished (threads left: "
                  f"{', '.join(left) or 'none'}); ending now", file=sys.stderr, flush=True)
        os._exit(code)

    threading.Thread(target=guard, name="exit-guard", daemon=True).start()
