"""The Textual app and the one factory (``make_app``) used by the CLI, tests and screenshots.

The app keeps the timers, the screens and the dialogs; time is the session's
(``console/session/session.py``): the timer beats it, it polls (never two at once) and
judges, and after each poll the app hands its immutable state to the open screens, which
only render. Keys go through the operation registry, whose sender enforces read-only mode.

An app starts from a full :class:`ConsoleContext` (tests, screenshots, the demo) or from
a :class:`StagedStart` (``watch``/``wall``): then the first poll and frame run on the boot
plan's poller while the context is built in a worker thread; until it is ready,
operations wait for it and alerts are not evaluated. This module imports nothing heavy
at the top for that reason (pydantic, httpx, plotext).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from textual.app import App, SystemCommand
from textual.screen import ModalScreen, Screen
from textual.timer import Timer
from textual.worker import Worker, WorkerFailed, WorkerState

from console.session.record.replay import LiveTape, Replay
from console.session.session import Session
from console.session.view import (
    ConsoleContext,
    ConsoleState,
    ConsoleView,
    StagedStart,
    state_path,
    view_of,
)
from console.ui.keys import PAUSE_BINDING, REPLAY_BINDINGS
from console.ui.no_color import NoColorEmphasis
from console.ui.screens.base import ConsoleScreen
from console.ui.screens.main import OPERATION_BINDINGS, MainScreen
from console.ui.terminal import terminal_closed

__all__ = ["ConsoleContext", "ConsoleView", "PodConsoleApp", "StagedStart", "make_app",
           "state_path", "view_of"]

FIRST_PAINT_WAIT_S = 0.15
"""How long the first paint waits for the first poll (see ``on_mount``)."""
QUIT_CLEANUP_S = 180.0
"""How long quitting waits for an interrupted operation to clean up (its DELETEs)."""
FAILURE_BURST = (20, 10.0)
"""More survived failures than this many within this many seconds is a loop, not a
passing fault: the console then ends with a crash report instead of going on."""
SIGNAL_CODES = {signal.SIGTERM: 128 + signal.SIGTERM, signal.SIGHUP: 128 + signal.SIGHUP}
"""The exit status after quitting on a signal (the shell's convention)."""


def _session_reads(name: str) -> Any:
    """An app attribute that is the session's (read-only): one owner, read through."""
    return property(lambda app: getattr(app.session, name),
                    doc=f"The session's ``{name}`` (``console.session.session.Session``).")


class PodConsoleApp(NoColorEmphasis, App[Any]):
    TITLE = "pod-console"
    CSS_PATH = "console.tcss"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [*REPLAY_BINDINGS, PAUSE_BINDING]

    def __init__(self, start: ConsoleContext | StagedStart | Replay, wall: bool = False,
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.wall = wall
        self.replay: Replay | None = None
        """The recording shown instead of the live state: a replay (``pod-console
        replay``), or the live pause (``p``) on what this console has polled."""
        self.live_tape: LiveTape | None = None
        """The live pause's tape: every poll's state as shown, bounded; None in a replay."""
        self._replay_timer: Timer | None = None
        # the session's jobs run as workers: an unexpected exception lands in
        # on_worker_state_changed, and quitting cancels them
        spawn = lambda job, group: self.run_worker(  # noqa: E731
            job, group=group, exit_on_error=False)
        if isinstance(start, Replay):
            from console.config.config_file import default_state_dir
            from console.session.record.replay import ReplaySession, replay_registry

            self.replay = start
            self.session: Session = ReplaySession(
                start, replay_registry(start.state_dir or default_state_dir()), note=self.note,
                spawn=spawn, on_change=self._session_changed)
        else:
            self.live_tape = LiveTape()
            self.session = Session(start, wall=wall, note=self.note, spawn=spawn,
                                   on_change=self._session_changed,
                                   fleet_wanted=self._fleet_shown,
                                   waiting_operations=(b.id for b in OPERATION_BINDINGS
                                                       if b.id))
        self._context_ready = asyncio.Event()
        self._polled = asyncio.Event()
        self.ready_after_s: float | None = None
        """Seconds from mount to a full context (None until then)."""
        self.fatal: str | None = None
        """Why the context could not be built (a config or profile problem)."""
        self._quitting = False
        self.log_lines: deque[tuple[float, str, str]] = deque(maxlen=500)
        self._finishing = False
        self._mounted_at = time.monotonic()
        self._timer: Timer | None = None
        self._timer_every = 0.0  # the session's refresh when the poll timer was made
        self.crash: str | None = None
        """The traceback of what ended the console (a crash report is written from it)."""
        self.failures: deque[tuple[float, str, str]] = deque(maxlen=200)
        """Failures the console survived: (time, where, reason)."""
        self._quit_code = 0
        self._signals_before: dict[int, Any] = {}

    # -- what the operation flow and the tests read: the session's ------------------------
    ctx = _session_reads("ctx")
    ready = _session_reads("ready")
    view = _session_reads("view")
    poller = _session_reads("poller")
    history = _session_reads("history")
    snapshot = _session_reads("snapshot")
    pod = _session_reads("pod")
    alerts = _session_reads("alerts")
    polls = _session_reads("polls")
    poll_failure = _session_reads("poll_failure")
    refresh_s = _session_reads("refresh_s")

    def now(self) -> float:
        return self.session.now()

    def stale_text(self) -> str | None:
        return self.session.stale_text()

    def allowed(self, operation_id: str) -> bool:
        """Before the registry exists, every operation but in read-only mode (it waits)."""
        if self.ctx is not None:
            return self.ctx.registry.allowed(operation_id)
        return not self.view.read_only

    # -- lifecycle -----------------------------------------------------------------
    async def on_mount(self) -> None:
        self._mounted_at = time.monotonic()
        view = self.view
        if self.replaying:
            self.note("replay of a recording (read-only): space plays, t/T step, j/J jump,"
                      " [/] markers, 1/2/3 speed")
        else:
            self.note("console started" + (" (DEMO)" if view.demo else "")
                      + (" in READ-ONLY wall mode" if view.read_only else ""))
        # A terminal that goes away (SSH dropped) must end the app, not leave it spinning.
        # SIGTERM too: quitting stops what the console started (the demo's processes).
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                before = signal.getsignal(sig)
                loop.add_signal_handler(sig, self._on_signal, sig)
                self._signals_before[sig] = before
        if self.ctx is not None:
            self._became_ready()
        self.tick()
        # Paint the screen once, with numbers, when they come back quickly (a pod on
        # loopback or nearby answers in milliseconds); a slow source gets the skeleton at
        # once and fills in when it answers. Painting twice costs the first frame ~50 ms.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._polled.wait(), FIRST_PAINT_WAIT_S)
        if self.wall:
            from console.ui.screens.wall import WallScreen

            self.push_screen(WallScreen(self.console_state(), view.rotate_s))
        else:
            self.push_screen(MainScreen(self.console_state(), tuple(self.log_lines)))
        self._keep_pace()
        rotate = self.ctx.pod_rotate_s if self.ctx is not None else 0.0
        if self.wall and rotate > 0 and len(view.contexts) > 1:
            self.set_timer(rotate, self._next_pod)

    def _keep_pace(self) -> None:
        """The poll timer at the session's refresh (a Textual timer keeps the interval it
        was made with: a new one when the refresh has changed)."""
        every = self.session.refresh_s
        if self._timer is not None and every == self._timer_every:
            return
        if self._timer is not None:
            self._timer.stop()
        self._timer, self._timer_every = self.set_interval(every, self.tick), every

    def action_refresh_rate(self, direction: int) -> None:
        """+ / -: poll more or less often (the session's steps, at least 1 s). Requests
        time out inside the new interval; polls still never overlap."""
        new = self.session.step_refresh(direction)
        if new is None:
            self.bell()  # at the fastest or slowest step already
            return
        self._keep_pace()
        # the header says the new rate at once: not a log line per press
        self.refresh_screens()

    def _acknowledge(self) -> list[str]:
        """The ack operation's effect: every firing alert marked as seen by this user."""
        from console.operations.audit import current_user

        titles = self.session.acknowledge(current_user())
        self.call_later(self.refresh_screens)
        return titles

    def _on_signal(self, sig: int) -> None:
        self._quit_code = SIGNAL_CODES.get(signal.Signals(sig), 128 + sig)
        self._on_hangup()

    def _on_hangup(self) -> None:
        if self._quit_code == 0:
            self._quit_code = SIGNAL_CODES[signal.SIGHUP]
        if not self.is_headless:
            # nobody is left to press a key: the process ends, even if a thread (or
            # Textual's own exit) never returns, once an operation's cleanup has had its time
            from console.ui.exit_guard import QUIT_GRACE_S, bound_exit

            busy = any(w.group == "operation" and w.is_running for w in self.workers)
            bound_exit(self._quit_code, QUIT_GRACE_S + (QUIT_CLEANUP_S if busy else 0.0))
        self.run_worker(self.action_quit(), group="quit", exclusive=True, exit_on_error=False)

    async def action_quit(self) -> None:
        """Quit (q, ctrl+q, SIGHUP): an operation in flight is cancelled first and its
        cleanup — terminating what it created, stopping what it resumed — runs to its
        end before the app exits. Exiting straight away would drop that cleanup."""
        running = [w for w in self.workers if w.group == "operation" and w.is_running]
        if running:
            self.note("quitting: cancelling the operation in flight and waiting for its "
                      "cleanup", "bold yellow")
            for w in running:
                w.cancel()
            for w in running:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(QUIT_CLEANUP_S):
                        await w.wait()
        self.exit(return_code=self._quit_code)

    async def _finish(self) -> None:
        """Build the full context in a thread; on failure show why and stop there."""
        staged = self.session.staged
        assert staged is not None
        try:
            ctx = await asyncio.to_thread(staged.finish, staged.poller, staged.history)
        except Exception as exc:  # a config/profile problem: shown, never a traceback
            collect_garbage_again()
            self.fatal = str(exc) or type(exc).__name__
            self.note(f"cannot start: {self.fatal}", "bold red")
            from console.ui.screens.modals import FatalScreen

            self.push_screen(FatalScreen(self.fatal), lambda _: self.exit(
                return_code=1, message=f"pod-console: {self.fatal}"))
            return
        if await self.session.adopt(ctx):
            self.note("validated settings poll differently from the first frame's reading;"
                      " using the validated ones", "yellow")
        self._became_ready()
        for screen in self.screen_stack:
            if isinstance(screen, ConsoleScreen) and screen.is_mounted:
                await screen.when_ready()
        self._keep_pace()  # the validated settings may set another refresh
        self.session.refresh_now()  # pod state and alerts now, not at the next tick

    def _became_ready(self) -> None:
        assert self.ctx is not None
        collect_garbage_again()
        self.ctx.registry.attach_console(refresh=self.session.refresh_now,
                                         acknowledge=self._acknowledge)
        self.ready_after_s = time.monotonic() - self._mounted_at
        self._context_ready.set()
        self.session.started()

    async def on_unmount(self) -> None:
        try:
            await self.session.aclose()  # the demo's processes stop here
        finally:
            # what handled them before (the demo's: stop its processes) handles them again
            loop = asyncio.get_running_loop()
            for sig, before in self._signals_before.items():
                with contextlib.suppress(Exception):
                    loop.remove_signal_handler(sig)
                    signal.signal(sig, before)

    # -- the session's beat -------------------------------------------------------------
    def tick(self) -> None:
        if not self.is_headless and not self._quitting and terminal_closed():
            self._quitting = True
            self._on_hangup()
            return
        self.session.tick()

    def action_refresh_now(self) -> None:
        """ctrl+r, f5, the palette's "Refresh now": a viewer asks for a poll."""
        self.session.refresh_asked()

    def _session_changed(self, kind: str) -> None:
        """After a poll, a fleet cycle, a backfill or an acknowledgement made in another
        session: the screens show the new state."""
        if kind == "poll":
            self._polled.set()
        live = None
        if kind == "poll" and self.live_tape is not None and self.session.polls:
            # every poll onto the live pause's tape (as shown: its state, built once)
            live = self.session.state()
            dropped = self.live_tape.record(live)
            if self.replay is not None:
                self.replay.cursor.dropped(dropped)
        self.refresh_screens(live if self.replay is None else None)
        if kind == "poll" and self.session.staged is not None and not self._finishing:
            # the first frame with numbers is on its way: now build the rest
            self._finishing = True
            self.call_after_refresh(
                lambda: self.run_worker(self._finish(), group="finish", exit_on_error=False))

    def console_state(self) -> ConsoleState:
        """What every screen shows now: built once per poll, handed down, never read back.
        A recording's state while one is shown (a replay, the live pause)."""
        if self.replay is not None:
            return self.replay.state()
        return self.session.state()

    def refresh_screens(self, state: ConsoleState | None = None) -> None:
        screens = [s for s in self.screen_stack
                   if isinstance(s, ConsoleScreen) and s.is_mounted]
        if screens:
            state = state or self.console_state()
            for screen in screens:
                screen.show(state)

    # -- replay and the live pause ----------------------------------------------------------
    @property
    def replaying(self) -> bool:
        """A recording opened with ``pod-console replay`` (not the live pause)."""
        return self.live_tape is None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The replay keys only while a recording is shown, ``p`` only live; neither
        while a dialog or a text box has the keys (the jump dialog's own typing)."""
        if action.startswith("replay_") or action == "live_pause":
            from textual.widgets import Input

            if isinstance(self.screen, ModalScreen) or isinstance(self.focused, Input):
                return False
            if action == "live_pause":
                return not self.replaying
            return self.replay is not None
        return True

    def action_live_pause(self) -> None:
        """``p``: hold the screen on the poll shown now (polling and recording go on; the
        replay keys move over what was polled); ``p`` again: live."""
        if self.replaying or self.live_tape is None:
            return
        if self.replay is not None:
            self.replay = None
            self._stop_replay_timer()
            self.note("live again")
        elif not self.live_tape.times():
            self.note("nothing polled yet to pause on", "yellow")
            return
        else:
            self.replay = Replay(self.live_tape, at=self.live_tape.times()[-1], live=True)
            self.note("paused: polling goes on; t/T step, j/J jump, [/] alerts, space "
                      "plays, p returns to live", "bold")
        self.refresh_screens()

    def _stop_replay_timer(self) -> None:
        if self._replay_timer is not None:
            self._replay_timer.stop()
            self._replay_timer = None

    def _replay_moved(self, said: str | None, bell: bool = True) -> None:
        if said is None:
            if bell:
                self.bell()  # at an end: nothing that way
        else:
            self.note(said, "dim", replace=self._replay_noted)
        self._replay_noted = said is not None
        self.refresh_screens()

    _replay_noted = False

    def action_replay_toggle(self) -> None:
        if self.replay is None:
            return
        said = self.replay.toggle()
        if self.replay.live:  # the live session's timer polls: the pause has its own
            self._stop_replay_timer()
            if self.replay.cursor.playing:
                from console.session.record.replay import REPLAY_TICK_S

                self._replay_timer = self.set_interval(REPLAY_TICK_S, self._replay_tick)
        self._replay_moved(said)

    def _replay_tick(self) -> None:
        if self.replay is not None and self.replay.tick():
            self.refresh_screens()
        if self.replay is None or not self.replay.cursor.playing:
            self._stop_replay_timer()

    def action_replay_step(self, n: int) -> None:
        if self.replay is not None:
            self._replay_moved(self.replay.step(n))

    def action_replay_marker(self, direction: int) -> None:
        if self.replay is not None:
            said = self.replay.marker(direction)
            if said is None:
                self.bell()
                self.note("no marker " + ("after" if direction > 0 else "before") + " this",
                          "dim")
            self._replay_moved(said, bell=False)

    def action_replay_speed(self, which: int) -> None:
        if self.replay is not None:
            self._replay_moved(self.replay.speed(which))

    def action_replay_jump(self, direction: int) -> None:
        from console.ui.screens.jump import JumpScreen

        if self.replay is not None:
            self.push_screen(JumpScreen(direction > 0, lambda text: self.replay_jump(
                text, direction > 0)))

    def replay_jump(self, text: str, forward: bool = True) -> str | None:
        """Move the replay to what was typed; None when it moved, else why not."""
        from console.session.record.cursor import WhenError

        if self.replay is None:
            return "no recording is shown"
        try:
            said = self.replay.jump(text, forward)
        except WhenError as exc:
            return str(exc)
        self._replay_moved(said)
        return None

    # -- what screens ask for (messages up) -----------------------------------------
    def on_console_screen_operation(self, message: ConsoleScreen.Operation) -> None:
        self.start_operation(message.operation_id, message.args)

    def on_console_screen_open_detail(self, message: ConsoleScreen.OpenDetail) -> None:
        self.open_detail(message.slot)

    def on_console_screen_want_logs(self, message: ConsoleScreen.WantLogs) -> None:
        self.load_slot_logs(message.slot, message.done)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Where a console worker's unexpected exception lands: said, never swallowed.
        (A poll's own failure the session catches and shows on every screen; a worker
        that exits on error — Textual's own, the palette's — reaches the boundary.)"""
        if event.state is not WorkerState.ERROR or event.worker.exit_on_error:
            return
        err = event.worker.error
        self.failed(event.worker.group or event.worker.name or "worker",
                    err if err is not None else RuntimeError("unknown error"))

    # -- the error boundary --------------------------------------------------------------
    def failed(self, where: str, err: BaseException) -> None:
        """A failure the console survives: a line in the action log, a notification on
        whatever screen is open, and its traceback in ``STATE_DIR/errors.log``."""
        reason = f"{type(err).__name__}: {err}"[:200]
        now = time.monotonic()
        self.failures.append((now, where, reason))
        self.note(f"{where} failed: {reason} (the console goes on; {ERRORS_LOG_NAME})",
                  "bold red")
        with contextlib.suppress(Exception):
            self.notify(f"{where} failed: {reason}", title="error", severity="error",
                        timeout=12, markup=False)
        self.log.error(f"{where} failed", err)
        from console.ui.crash import append_error

        state_dir = self._state_dir()
        with contextlib.suppress(RuntimeError):  # no loop: the log line is enough
            asyncio.get_running_loop().run_in_executor(None, append_error, state_dir,
                                                       where, err)

    def _state_dir(self) -> Any:
        from console.config.config_file import default_state_dir

        if self.ctx is not None:
            return self.ctx.settings.state_dir
        return default_state_dir()

    def _survivable(self, error: Exception) -> tuple[str, ModalScreen[Any] | None] | None:
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

    def _handle_exception(self, error: Exception) -> None:
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

    # -- action log ----------------------------------------------------------------
    def note(self, text: str, style: str = "", replace: bool = False) -> None:
        """A line in the action log; ``replace``: in place of the last line (a countdown,
        a progress line whose numbers moved)."""
        t = self.now()
        replace = replace and bool(self.log_lines)
        if replace:
            self.log_lines[-1] = (t, text, style)
        else:
            self.log_lines.append((t, text, style))
        for screen in self.screen_stack:
            if isinstance(screen, ConsoleScreen) and screen.is_mounted:
                screen.log_line(t, text, style, replace)

    # -- navigation ----------------------------------------------------------------
    def open_detail(self, slot: str) -> None:
        from console.ui.screens.detail import SlotDetailScreen

        self.push_screen(SlotDetailScreen(self.console_state(), slot))

    def action_full_log(self) -> None:
        from console.ui.screens.log import LogScreen

        if not isinstance(self.screen, LogScreen):
            self.push_screen(LogScreen(self.console_state(), tuple(self.log_lines)))

    def action_gpus(self) -> None:
        from console.ui.screens.gpus import GpuScreen

        if not isinstance(self.screen, GpuScreen):
            self.push_screen(GpuScreen(self.console_state()))

    def action_gateway(self) -> None:
        from console.ui.screens.gateway import GatewayScreen

        if not isinstance(self.screen, GatewayScreen):
            self.push_screen(GatewayScreen(self.console_state()))

    # -- the fleet: every context's pod ------------------------------------------------
    def action_fleet(self) -> None:
        from console.ui.screens.fleet import FleetScreen

        if len(self.view.contexts) < 1:
            self.note("the config names no contexts: this console's pod is the whole fleet "
                      "(README, \"Several pods\")", "yellow")
            return
        if not isinstance(self.screen, FleetScreen):
            self.push_screen(FleetScreen(self.console_state()))
        self.session.want_fleet()  # now, then at every tick while its screen is open

    def _fleet_shown(self) -> bool:
        """Whether anyone looks at the fleet (else other pods are not polled)."""
        from console.ui.screens.fleet import FleetScreen

        return any(isinstance(s, FleetScreen) for s in self.screen_stack)

    def on_fleet_screen_switch_context(self, message: Any) -> None:
        self.switch_context(message.context)

    def switch_context(self, name: str) -> None:
        """Reopen the console on another context's pod (a new process on the same
        terminal: nothing of this pod's state carries over to that one)."""
        from console.session.view import SwitchRequest

        if name == self.view.context:
            self.pop_screen()
            return
        self.note(f"switching to context {name}", "bold")
        self.exit(SwitchRequest(name))

    def _next_pod(self) -> None:
        """The wall's rotation through the config's pods."""
        names = list(self.view.contexts)
        if len(names) < 2:
            return
        at = names.index(self.view.context) if self.view.context in names else -1
        self.switch_context(names[(at + 1) % len(names)])

    def action_alert_history(self) -> None:
        from console.ui.screens.alerts import AlertHistoryScreen

        if not isinstance(self.screen, AlertHistoryScreen):
            self.push_screen(AlertHistoryScreen(self.console_state()))

    def action_help(self) -> None:
        from console.ui.keys import column_legend, help_rows
        from console.ui.screens.modals import HelpScreen

        specs = self.ctx.registry.specs if self.ctx is not None else {}
        self.push_screen(HelpScreen(help_rows(self.wall, specs, self.allowed,
                                              replay=self.replay is not None,
                                              live=not self.replaying),
                                    column_legend()))

    def load_slot_logs(self, slot: str, done: Callable[[list[str]], None]) -> None:
        async def fetch() -> None:
            await self._context_ready.wait()
            done(await self.session.slot_logs(slot))
        self.run_worker(fetch(), group="logs", exclusive=True, exit_on_error=False)

    # -- command palette -----------------------------------------------------------
    def action_command_palette(self) -> None:
        """The palette that closes once and never fails for being closed
        (``console/ui/palette.py``)."""
        from textual.command import CommandPalette

        from console.ui.palette import ConsolePalette

        if self.use_command_palette and not CommandPalette.is_open(self):
            self.push_screen(ConsolePalette(id="--command-palette"))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Every command through the error boundary: it runs in the app's own message
        loop, where an exception would end the console."""
        for cmd in self._system_commands(screen):
            yield SystemCommand(cmd.title, cmd.help, self._guarded(cmd.title, cmd.callback),
                                cmd.discover)

    def _guarded(self, title: str, fn: Callable[[], Any]) -> Callable[[], Any]:
        async def run() -> None:
            if self._exit:
                return
            try:
                result = fn()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                self.failed(f"palette command {title!r}", exc)
        return run

    def _system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if self.ctx is None:
            return  # operations appear once the console has loaded
        reg = self.ctx.registry
        for spec in reg.specs.values() if not self.wall else ():  # a wall offers none
            if reg.allowed(spec.id) and spec.id != "refresh":
                yield SystemCommand(spec.title, spec.description,
                                    lambda i=spec.id: self.start_operation(i))
        # a poll, not an operation (on a wall: at most one a second, see the session)
        yield SystemCommand("Refresh now", "poll every source now", self.action_refresh_now)
        if self.view.contexts:
            yield SystemCommand("Fleet: every pod", "one line per context's pod (F)",
                                self.action_fleet)
        for name in self.view.contexts:
            if name != self.view.context:
                yield SystemCommand(f"Context: {name}", f"reopen the console on {name}'s pod",
                                    lambda n=name: self.switch_context(n))
        yield SystemCommand("Help: keys", "show every key", self.action_help)
        if self.ctx.demo is not None and not self.wall:
            # faults change the deployment: never from a read-only screen
            for title, help_, fn in self.ctx.demo.faults():
                yield SystemCommand(f"Demo fault: {title}", help_,
                                    lambda f=fn, t=title: self._demo_fault(f, t))

    def _demo_fault(self, fn: Callable[[], Any], title: str) -> None:
        assert self.ctx is not None
        if self._exit:
            return  # quitting: nothing new starts
        if self.wall or self.ctx.registry.read_only:
            self.note(f"DEMO fault {title} refused: read-only mode", "yellow")
            return
        audit = self.ctx.registry.audit

        async def run() -> None:
            from console.operations.audit import AuditError

            try:
                await asyncio.to_thread(audit.append, "demo_fault", {"fault": title}, "started")
            except AuditError as exc:
                self.note(f"DEMO fault {title} not injected: {exc}", "red")
                return
            r = fn()
            if asyncio.iscoroutine(r):
                await r
            self.note(f"DEMO fault injected: {title}", "magenta")
            self.session.refresh_now()
        self.run_worker(run(), group="demo", exit_on_error=False)

    # -- operations ----------------------------------------------------------------
    def start_operation(self, operation_id: str, args: dict[str, Any] | None = None) -> None:
        """Preflight, ask, confirm, progress: the one flow (``ui/operation_flow.py``)."""
        from console.ui.operation_flow import AppFlowHost, run_operation

        if self._exit:
            return  # quitting: nothing new starts (its coroutine would never be awaited)
        if self.replay is not None:
            self.run_worker(self._refused(operation_id, args), group="operation",
                            exit_on_error=False)
            return
        host = AppFlowHost(self, self._context_ready)
        self.run_worker(run_operation(host, operation_id, dict(args or {})),
                        group="operation", exit_on_error=False)

    async def _refused(self, operation_id: str, args: dict[str, Any] | None) -> None:
        """A recording is shown: no operation runs. A replay's registry (a wall's) refuses
        it at the sender and records the refusal; the live pause says how to return."""
        from console.session.record.replay import ReplaySession

        if isinstance(self.session, ReplaySession):
            reg = self.session.registry
            if operation_id in reg.specs:
                out = await reg.invoke(operation_id, args)
                self.note(f"{out.message} (a replay)", "yellow")
            return
        self.note(f"{operation_id}: not while paused (p returns to live)", "yellow")


ERRORS_LOG_NAME = "details in errors.log"


def collect_garbage_again() -> None:
    """End of start-up (see ``console/cli.py``): what exists now lives for the whole run."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def make_app(start: ConsoleContext | StagedStart | Replay, wall: bool = False
             ) -> PodConsoleApp:
    """The one factory: the CLI, the tests and the screenshot script all call this. A
    :class:`~console.session.record.replay.Replay` opens it on a recording (read-only);
    ``wall``: the wall's screen."""
    from console.ui.widgets import partial_writes

    partial_writes.install()  # changed cells only reach the terminal (see the module)
    return PodConsoleApp(start, wall=wall)
