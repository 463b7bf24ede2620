"""Quitting: ``q`` and ctrl+q, SIGHUP and SIGTERM, a terminal that went away. Held by the
app (``app.quitting``): an operation in flight is cancelled first and its cleanup —
terminating what it created, stopping what it resumed — runs to its end before the app
exits; exiting straight away would drop that cleanup."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from textual.worker import Worker

from console.ui.host import Host
from console.ui.terminal import terminal_closed

QUIT_CLEANUP_S = 180.0
"""How long quitting waits for an interrupted operation to clean up (its DELETEs)."""
SIGNAL_CODES = {signal.SIGTERM: 128 + signal.SIGTERM, signal.SIGHUP: 128 + signal.SIGHUP}
"""The exit status after quitting on a signal (the shell's convention)."""


class QuitHost(Host, Protocol):
    """What quitting needs of the app besides :class:`~console.ui.host.Host`."""

    @property
    def is_headless(self) -> bool: ...

    @property
    def workers(self) -> Iterable[Worker[Any]]: ...

    def exit(self, result: Any = None, return_code: int = 0, message: Any = None) -> None: ...


class Quitting:
    def __init__(self, app: QuitHost, state_dir: Callable[[], Path]) -> None:
        """``state_dir``: where the exit guard writes (asked when it arms: the config may
        not be read before)."""
        self.app = app
        self.state_dir = state_dir
        self.code = 0
        """The exit status: a signal's, else 0."""
        self._hung_up = False
        self._signals_before: dict[int, Any] = {}

    def catch_signals(self) -> None:
        """A terminal that goes away (SSH dropped) must end the app, not leave it
        spinning. SIGTERM too: quitting stops what the console started (the demo's)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                before = signal.getsignal(sig)
                loop.add_signal_handler(sig, self._on_signal, sig)
                self._signals_before[sig] = before

    def release_signals(self) -> None:
        """What handled them before (the demo's: stop its processes) handles them again."""
        loop = asyncio.get_running_loop()
        for sig, before in self._signals_before.items():
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
                signal.signal(sig, before)

    def terminal_gone(self) -> bool:
        """At each tick: the terminal has closed (then the console quits)."""
        if self.app.is_headless or self._hung_up or not terminal_closed():
            return False
        self._hung_up = True
        self._on_hangup()
        return True

    def _on_signal(self, sig: int) -> None:
        self.code = SIGNAL_CODES.get(signal.Signals(sig), 128 + sig)
        self._on_hangup()

    def _on_hangup(self) -> None:
        if self.code == 0:
            self.code = SIGNAL_CODES[signal.SIGHUP]
        if not self.app.is_headless:
            # nobody is left to press a key: the process ends, even if a thread (or
            # Textual's own exit) never returns, once an operation's cleanup has had its time
            from console.ui.exit_guard import QUIT_GRACE_S, bound_exit

            busy = any(w.group == "operation" and w.is_running for w in self.app.workers)
            bound_exit(self.code, QUIT_GRACE_S + (QUIT_CLEANUP_S if busy else 0.0),
                       self.state_dir())
        self.app.run_worker(self.quit(), group="quit", exclusive=True, exit_on_error=False)

    async def quit(self) -> None:
        """Quit (q, ctrl+q, a signal): see the module."""
        running = [w for w in self.app.workers if w.group == "operation" and w.is_running]
        if running:
            self.app.note("quitting: cancelling the operation in flight and waiting for "
                          "its cleanup", "warn.strong")
            for w in running:
                w.cancel()
            for w in running:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(QUIT_CLEANUP_S):
                        await w.wait()
        self.app.exit(return_code=self.code)
