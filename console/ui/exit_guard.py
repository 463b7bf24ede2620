"""The process ends, whatever is left running in it, a bounded time after the console has.

Imports nothing of Textual: ``console.cli.run`` arms it after ``main`` returns.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

EXIT_GRACE_S = 30.0
"""How long the process may take to end once ``main`` has returned (a console's demo
processes are stopped by then): past it, the threads still running are named and the
process ends anyway."""


QUIT_GRACE_S = 60.0
"""From a signal or a closed terminal to the end of the process, when no operation is in
flight: the app stops what it started (a demo's processes: ~3 s on a loaded machine) and
exits well inside it."""


_state_dir: Path | None = None
"""Where the running console keeps its ``errors.log`` (``remember_state_dir``): the guard
of ``console.cli.run`` is armed after the app is gone, and still writes there."""


def remember_state_dir(path: Path) -> None:
    """The app's state directory, said once it is known (its settings own it)."""
    global _state_dir
    _state_dir = path


def bound_exit(code: int, grace_s: float = EXIT_GRACE_S,
               state_dir: Path | None = None) -> None:
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
        overdue(code, grace_s, state_dir or _state_dir)

    threading.Thread(target=guard, name="exit-guard", daemon=True).start()


def overdue(code: int, grace_s: float, state_dir: Path | None,
            end: Callable[[int], object] = os._exit) -> None:
    """The grace is over: the threads still running, named on stderr and, with where each
    one waits, in ``errors.log`` (after a hang-up stderr is a terminal that is gone: the
    log is the one trace left of why the process had to be ended), then the end."""
    me = threading.current_thread()
    left = [t for t in threading.enumerate() if t is not me and t is not threading.main_thread()]
    line = (f"not ended {grace_s:g} s after it finished (threads left: "
            f"{', '.join(t.name for t in left) or 'none'}); ending now")
    with contextlib.suppress(Exception):  # the terminal may be gone
        print(f"pod-console: {line}", file=sys.stderr, flush=True)
    if state_dir is not None:
        with contextlib.suppress(Exception):  # nothing may stop the end
            from console.ui.crash import append_note

            frames = sys._current_frames()
            stacks = [f"thread {t.name!r}:\n" + "".join(traceback.format_stack(frames[t.ident]))
                      for t in (threading.main_thread(), *left)
                      if t.ident is not None and t.ident in frames]
            append_note(state_dir, line, "\n".join(stacks))
    end(code)
