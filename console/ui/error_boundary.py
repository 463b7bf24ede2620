"""The app's error boundary: where every failure Textual catches lands. One in a
worker, a timer, a callback or a dialog is said (action log, a notification, its traceback
in ``errors.log``) and the console goes on; one that stopped a message loop of the app or
of a console screen, or failures in a loop, end it with a crash report. Held by the app
(``app.error_boundary``): the app's ``_handle_exception`` (Textual's hook, a guarded
private reach: ``console/ui/private_reach.py``) asks :meth:`ErrorBoundary.survived`.

Where a failure came from is read from Textual's private parts (the name of the function
that handed it over, the message pump that was running): only while they are the code
this was written against; otherwise such a failure ends the console, as Textual would."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from pathlib import Path
from types import CodeType
from typing import TYPE_CHECKING, Any, Protocol

from textual.app import App
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.worker import Worker, WorkerFailed, WorkerState

from console.ui.host import Host
from console.ui.private_reach import holds

if TYPE_CHECKING:
    from textual import Logger
    from textual.notifications import SeverityLevel

FAILURE_BURST = (20, 10.0)
"""More survived failures than this many within this many seconds is a loop, not a
passing fault: the console then ends with a crash report instead of going on."""
ERRORS_LOG_NAME = "details in errors.log"
CALLERS = {("_tick", "timer.py"): "timer", ("_flush_next_callbacks", "message_pump.py"):
           "callback"}
"""Textual's functions (name, file) that hand over a failure the console survives."""


class BoundaryHost(Host, Protocol):
    """What the boundary needs of the app besides :class:`~console.ui.host.Host`."""

    @property
    def log(self) -> Logger: ...

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...


class ErrorBoundary:
    def __init__(self, app: BoundaryHost) -> None:
        self.app = app
        self.failures: deque[tuple[float, str, str]] = deque(maxlen=200)
        """Failures the console survived: (time, where, reason)."""

    def worker_changed(self, event: Worker.StateChanged) -> None:
        """Where a console worker's unexpected exception lands: said, never swallowed.
        (A poll's own failure the session catches and shows on every screen; a worker
        that exits on error — Textual's own, the palette's — reaches the boundary.)"""
        if event.state is not WorkerState.ERROR or event.worker.exit_on_error:
            return
        err = event.worker.error
        self.failed(event.worker.group or event.worker.name or "worker",
                    err if err is not None else RuntimeError("unknown error"))

    def failed(self, where: str, err: BaseException) -> None:
        """A failure the console survives: a line in the action log, a notification on
        whatever screen is open, and its traceback in ``STATE_DIR/errors.log``."""
        reason = f"{type(err).__name__}: {err}"[:200]
        now = time.monotonic()
        self.failures.append((now, where, reason))
        self.app.note(f"{where} failed: {reason} (the console goes on; {ERRORS_LOG_NAME})",
                      "crit")
        with contextlib.suppress(Exception):
            self.app.notify(f"{where} failed: {reason}", title="error", severity="error",
                            timeout=12, markup=False)
        self.app.log.error(f"{where} failed", err)
        from console.ui.crash import append_error

        state_dir = self.state_dir()
        with contextlib.suppress(RuntimeError):  # no loop: the log line is enough
            asyncio.get_running_loop().run_in_executor(None, append_error, state_dir,
                                                       where, err)

    def state_dir(self) -> Path:
        """Where ``errors.log`` and crash reports go: the config's, a replay's, else the
        default (``POD_CONSOLE_STATE_DIR``)."""
        from console.config.config_file import default_state_dir

        ctx, replay = self.app.session.ctx, self.app.replay
        if ctx is not None:
            return ctx.settings.state_dir
        if replay is not None and replay.state_dir is not None:
            return replay.state_dir  # a replay's: POD_CONSOLE_STATE_DIR's too
        return default_state_dir()

    def survivable(self, error: Exception, caller: CodeType | None
                   ) -> tuple[str, ModalScreen[Any] | None] | None:
        """Where a failure Textual handed over (``caller``: the code that called the
        app's hook) came from, when the console can go on after it (and the dialog to
        close with it); None for one it cannot: a message loop of the app or of a console
        screen has stopped with it."""
        if self.app.exiting:
            return None
        recent = [f for f in self.failures if f[0] > time.monotonic() - FAILURE_BURST[1]]
        if len(recent) >= FAILURE_BURST[0]:
            return None  # failing in a loop: going on would only repeat it
        if isinstance(error, WorkerFailed):
            from textual.worker import active_worker

            worker = active_worker.get(None)
            name = (worker.group or worker.name) if worker is not None else "worker"
            return (f"worker {name}", None)
        if not holds("where a failure came from"):
            return None
        if caller is not None:
            for (name, file), where in CALLERS.items():
                if caller.co_name == name and caller.co_filename.endswith(file):
                    return (where, None)
        from textual._context import active_message_pump

        pump = active_message_pump.get(None)
        screen: Screen[Any] | None = None
        if isinstance(pump, Screen):
            screen = pump
        elif isinstance(pump, Widget | App):  # the screen it is on, the app's: the top
            with contextlib.suppress(Exception):
                screen = pump.screen
        if isinstance(screen, ModalScreen) and screen in self.app.screen_stack:
            return (f"dialog {type(screen).__name__}", screen)  # its loop is gone: close it
        return None

    def survived(self, error: Exception, caller: CodeType | None) -> bool:
        """Every failure Textual catches comes here (workers, timers, message handlers).
        One in a worker, a timer, a callback or a dialog is shown and logged: True, the
        console goes on. False: it ends (the app writes the crash report)."""
        try:
            survivable = self.survivable(error, caller)
        except Exception:  # the boundary itself must never be what crashes
            survivable = None
        if survivable is None:
            return False
        where, dialog = survivable
        self.failed(where, error.error if isinstance(error, WorkerFailed) else error)
        if dialog is not None:
            with contextlib.suppress(Exception):
                if self.app.screen is dialog:
                    dialog.dismiss(None)
        return True
