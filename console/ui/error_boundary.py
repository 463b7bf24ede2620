"""The app's error boundary: where every failure Textual catches lands. One in a
worker, a timer, a callback or a dialog is said (action log, a notification, its traceback
in ``errors.log``) and the console goes on; one that stopped a message loop of the app or
of a console screen, or failures in a loop, end it with a crash report. A mixin of
:class:`~console.ui.app.PodConsoleApp`."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import TYPE_CHECKING, Any

from textual.screen import ModalScreen, Screen
from textual.worker import Worker, WorkerFailed, WorkerState

if TYPE_CHECKING:
    from console.ui.app import PodConsoleApp

FAILURE_BURST = (20, 10.0)
"""More survived failures than this many within this many seconds is a loop, not a
passing fault: the console then ends with a crash report instead of going on."""
ERRORS_LOG_NAME = "details in errors.log"


class ErrorBoundary:
    """Methods of the app (``self`` is a :class:`PodConsoleApp`)."""

    def on_worker_state_changed(self: PodConsoleApp, event: Worker.StateChanged) -> None:
        """Where a console worker's unexpected exception lands: said, never swallowed.
        (A poll's own failure the session catches and shows on every screen; a worker
        that exits on error — Textual's own, the palette's — reaches the boundary.)"""
        if event.state is not WorkerState.ERROR or event.worker.exit_on_error:
            return
        err = event.worker.error
        self.failed(event.worker.group or event.worker.name or "worker",
                    err if err is not None else RuntimeError("unknown error"))

    def failed(self: PodConsoleApp, where: str, err: BaseException) -> None:
        """A failure the console survives: a line in the action log, a notification on
        whatever screen is open, and its traceback in ``STATE_DIR/errors.log``."""
        reason = f"{type(err).__name__}: {err}"[:200]
        now = time.monotonic()
        self.failures.append((now, where, reason))
        self.note(f"{where} failed: {reason} (the console goes on; {ERRORS_LOG_NAME})",
                  "crit")
        with contextlib.suppress(Exception):
            self.notify(f"{where} failed: {reason}", title="error", severity="error",
                        timeout=12, markup=False)
        self.log.error(f"{where} failed", err)
        from console.ui.crash import append_error

        state_dir = self._state_dir()
        with contextlib.suppress(RuntimeError):  # no loop: the log line is enough
            asyncio.get_running_loop().run_in_executor(None, append_error, state_dir,
                                                       where, err)

    def _state_dir(self: PodConsoleApp) -> Any:
        from console.config.config_file import default_state_dir

        if self.ctx is not None:
            return self.ctx.settings.state_dir
        replay = getattr(self, "replay", None)  # a replay: POD_CONSOLE_STATE_DIR's too
        if replay is not None and getattr(replay, "state_dir", None) is not None:
            return replay.state_dir
        return default_state_dir()

    def _survivable(self: PodConsoleApp, error: Exception
                    ) -> tuple[str, ModalScreen[Any] | None] | None:
        """Where a failure Textual handed over came from, when the console can go on
        after it (and the dialog to close with it); None for one it cannot: a message
        loop of the app or of a console screen has stopped with it."""
        if self._exit:
            return None
        recent = [f for f in self.failures if f[0] > time.monotonic() - FAILURE_BURST[1]]
        if len(recent) >= FAILURE_BURST[0]:
            return None  # failing in a loop: going on would only repeat it
        if isinstance(error, WorkerFailed):
            from textual.worker import active_worker

            worker = active_worker.get(None)
            name = (worker.group or worker.name) if worker is not None else "worker"
            return (f"worker {name}", None)
        caller = sys._getframe(2).f_code  # who called Textual's _handle_exception
        if caller.co_name == "_tick" and caller.co_filename.endswith("timer.py"):
            return ("timer", None)
        if caller.co_name == "_flush_next_callbacks":
            return ("callback", None)
        from textual._context import active_message_pump

        pump = active_message_pump.get(None)
        screen = pump if isinstance(pump, Screen) else getattr(pump, "_parent_screen", None)
        if screen is None and pump is not None:
            with contextlib.suppress(Exception):
                screen = pump.screen  # type: ignore[attr-defined]
        if isinstance(screen, ModalScreen) and screen in self.screen_stack:
            return (f"dialog {type(screen).__name__}", screen)  # its loop is gone: close it
        return None

    def _handle_exception(self: PodConsoleApp, error: Exception) -> None:
        """Every failure Textual catches comes here (workers, timers, message handlers).
        One in a worker, a timer, a callback or a dialog is shown and logged, and the
        console goes on; anything else ends it with a crash report and a non-zero exit
        (``console/commands/tui_cmd.py`` writes the report from ``self.crash``)."""
        try:
            survivable = self._survivable(error)
        except Exception:  # the boundary itself must never be what crashes
            survivable = None
        if survivable is not None:
            where, dialog = survivable
            self.failed(where, error.error if isinstance(error, WorkerFailed) else error)
            if dialog is not None:
                with contextlib.suppress(Exception):
                    if self.screen is dialog:
                        dialog.dismiss(None)
            return
        from console.ui.crash import format_error

        if self.crash is None:
            self.crash = format_error(error)
        super()._handle_exception(error)
