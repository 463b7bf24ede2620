"""The Textual app and the one factory (``make_app``) used by the CLI, tests and screenshots.

The app keeps the timers, the screens and the dialogs; time is the session's
(``console/session/session.py``): the timer beats it, it polls (never two at once) and
judges, and after each poll the app hands its immutable state to the open screens, which
only render. Keys go through the operation registry, whose sender enforces read-only mode.

An app starts from a full :class:`ConsoleContext` (tests, screenshots, the demo) or from
a :class:`StagedStart` (``watch``/``wall``): then the first poll and frame run on the boot
plan's poller while the context is built in a worker thread; until it is ready,
operations wait for it and alerts are not evaluated. This module imports nothing heavy
at the top for that reason (pydantic, httpx, the plots).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import time
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from textual.app import App, SystemCommand
from textual.command import CommandPalette
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker

from console.session.record.replay import LiveTape, Replay
from console.session.session import Session
from console.session.session_like import SessionLike
from console.session.view import (
    ConsoleContext,
    ConsoleState,
    ConsoleView,
    StagedStart,
    state_path,
    view_of,
)
from console.ui.error_boundary import ErrorBoundary
from console.ui.keys import PAUSE_BINDING, REPLAY_BINDINGS
from console.ui.navigation import Navigation
from console.ui.no_color import NoColorEmphasis
from console.ui.palette_commands import PaletteCommands
from console.ui.quitting import Quitting
from console.ui.replay_keys import ReplayKeys
from console.ui.screens.base import ConsoleScreen
from console.ui.screens.main import OPERATION_BINDINGS, MainScreen
from console.ui.themes import Themed, chosen

if TYPE_CHECKING:
    from console.ui.screens.fleet import FleetScreen

__all__ = ["ConsoleContext", "ConsoleView", "PodConsoleApp", "StagedStart", "make_app",
           "state_path", "view_of"]

FIRST_PAINT_WAIT_S = 0.15
"""How long the first paint waits for the first poll (see ``on_mount``)."""


def _session_reads(name: str) -> Any:
    """An app attribute that is the session's (read-only): one owner, read through."""
    return property(lambda app: getattr(app.session, name),
                    doc=f"The session's ``{name}`` (``console.session.session.Session``).")


class PodConsoleApp(NoColorEmphasis, Themed, App[Any]):
    """The timers, the screens and the dialogs. What keys and failures do is in the
    collaborators it holds, one module each: ``replay_keys`` (the live pause and a
    recording's keys), ``error_boundary``, ``navigation`` (the screens a key opens),
    ``palette_commands``, ``quitting``. Textual finds a key's action by name on the app: the
    ``action_*`` methods below hand each to its collaborator."""

    TITLE = "pod-console"
    CSS_PATH = "console.tcss"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [*REPLAY_BINDINGS, PAUSE_BINDING]

    def __init__(self, start: ConsoleContext | StagedStart | Replay, wall: bool = False,
                 theme: str | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.wall = wall
        self.exiting = False
        """Quitting (``exit`` was called): nothing new starts."""
        self.navigation = Navigation(self)
        self.replay_keys = ReplayKeys(self)
        self.palette_commands = PaletteCommands(self)
        self.error_boundary = ErrorBoundary(self)
        self.quitting = Quitting(self, self.error_boundary.state_dir)
        self.replay: Replay | None = None
        """The recording shown instead of the live state: a replay (``pod-console
        replay``), or the live pause (``p``) on what this console has polled."""
        self.live_tape: LiveTape | None = None
        """The live pause's tape: every poll's state as shown, bounded; None in a replay."""
        # the session's jobs run as workers: an unexpected exception lands in
        # on_worker_state_changed, and quitting cancels them
        spawn = lambda job, group: self.run_worker(  # noqa: E731
            job, group=group, exit_on_error=False)
        if isinstance(start, Replay):
            from console.config.config_file import default_state_dir
            from console.session.record.replay import ReplaySession, replay_registry

            self.replay = start
            self.session: SessionLike = ReplaySession(
                start, replay_registry(start.state_dir or default_state_dir()),
                on_change=self._session_changed)
        else:
            self.live_tape = LiveTape()
            self.session = Session(start, wall=wall, note=self.note, spawn=spawn,
                                   on_change=self._session_changed,
                                   fleet_wanted=self.navigation.fleet_shown,
                                   waiting_operations=(b.id for b in OPERATION_BINDINGS
                                                       if b.id))
        self.context_ready = asyncio.Event()
        """Set once the full context is built (a staged start builds it in a thread)."""
        self._polled = asyncio.Event()
        self.ready_after_s: float | None = None
        """Seconds from mount to a full context (None until then)."""
        self.fatal: str | None = None
        """Why the context could not be built (a config or profile problem)."""
        self.log_lines: deque[tuple[float, str, str]] = deque(maxlen=500)
        self._finishing = False
        self._mounted_at = time.monotonic()
        self._timer: Timer | None = None
        self._timer_every = 0.0  # the session's refresh when the poll timer was made
        self.crash: str | None = None
        """The traceback of what ended the console (a crash report is written from it)."""
        # the config's theme (mono under NO_COLOR); a recording's view says the recorder's,
        # not the viewer's: a replay gets the one its command read from the viewer's config
        self._config_theme = theme if theme is not None or isinstance(start, Replay) \
            else self.view.theme
        self.use_theme(chosen(self._config_theme).name)

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

    @property
    def replaying(self) -> bool:
        """A recording opened with ``pod-console replay`` (not the live pause)."""
        return self.live_tape is None

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
    def get_default_screen(self) -> Screen[Any]:
        """The console's screen is the app's first (no blank one under it to compose,
        style and draw first); its numbers come with the first poll, in ``on_mount``."""
        if self.wall:
            from console.ui.screens.wall import WallScreen

            return WallScreen(self.console_state(), self.view.rotate_s)
        return MainScreen(self.console_state(), tuple(self.log_lines))

    async def on_mount(self) -> None:
        self._mounted_at = time.monotonic()
        view = self.view
        if self.replaying:
            self.note("replay of a recording (read-only): space plays, t/T step, j/J jump,"
                      " [/] markers, 1/2/3 speed")
        else:
            self.note("console started" + (" (DEMO)" if view.demo else "")
                      + (" in READ-ONLY wall mode" if view.read_only else ""))
        self.quitting.catch_signals()  # SIGHUP (the terminal went away), SIGTERM
        if self.ctx is not None:
            self._became_ready()
        self.tick()
        # Paint the screen once, with numbers, when they come back quickly (a pod on
        # loopback or nearby answers in milliseconds); a slow source gets the skeleton at
        # once and fills in when it answers. Painting twice costs the first frame ~50 ms.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._polled.wait(), FIRST_PAINT_WAIT_S)
        # the cropping writer, once the first frame is out: its check would cost it ~8 ms
        from console.ui.widgets import partial_writes
        self.call_after_refresh(partial_writes.install)
        self._keep_pace()
        rotate = self.ctx.pod_rotate_s if self.ctx is not None else 0.0
        if self.wall and rotate > 0 and len(view.contexts) > 1:
            self.set_timer(rotate, self.navigation.next_pod)

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

    def _acknowledge(self, key: str | None = None) -> list[str]:
        """The ack operation's effect: every firing alert (``key``: that one and its
        group) marked as seen by this user."""
        from console.operations.audit import current_user

        titles = self.session.acknowledge(current_user(), key)
        self.call_later(self.refresh_screens)
        return titles

    async def action_quit(self) -> None:
        """q, ctrl+q (a signal too): an operation in flight is cancelled and its cleanup
        runs to its end first (``console/ui/quitting.py``)."""
        await self.quitting.quit()

    async def _finish(self) -> None:
        """Build the full context in a thread; on failure show why and stop there."""
        staged = self.session.staged
        assert staged is not None
        try:
            ctx = await asyncio.to_thread(staged.finish, staged.poller, staged.history)
        except Exception as exc:  # a config/profile problem: shown, never a traceback
            collect_garbage_again()
            self.fatal = str(exc) or type(exc).__name__
            self.note(f"cannot start: {self.fatal}", "crit")
            from console.ui.screens.modals import FatalScreen

            self.push_screen(FatalScreen(self.fatal), lambda _: self.exit(
                return_code=1, message=f"pod-console: {self.fatal}"))
            return
        if await self.session.adopt(ctx):
            self.note("validated settings poll differently from the first frame's reading;"
                      " using the validated ones", "warn")
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
        if self.replay is None:  # the validated config's (a staged start read it quickly)
            self._config_theme = self.view.theme
        wanted = chosen(self._config_theme)
        if wanted is not self.console_theme and not self.palette_commands.theme_picked:
            self.use_theme(wanted.name)
        self.context_ready.set()
        self.session.started()

    async def on_unmount(self) -> None:
        if not self.is_headless:  # the exit's guard, armed after the app, writes there
            from console.ui.exit_guard import remember_state_dir

            remember_state_dir(self.error_boundary.state_dir())
        try:
            await self.session.aclose()  # the demo's processes stop here
        finally:
            self.quitting.release_signals()

    # -- the session's beat -------------------------------------------------------------
    def tick(self) -> None:
        if not self.quitting.terminal_gone():
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
        # every console screen, mounted or only pushed: one pushed while the first poll
        # was landing keeps the state and draws it on mount (``ConsoleScreen.show``);
        # skipping it left "waiting for first data" up until the next poll
        screens = [s for s in self.screen_stack if isinstance(s, ConsoleScreen)]
        if screens:
            state = state or self.console_state()
            for screen in screens:
                screen.show(state)

    # -- what screens ask for (messages up) -----------------------------------------
    def on_console_screen_operation(self, message: ConsoleScreen.Operation) -> None:
        self.start_operation(message.operation_id, message.args)

    def on_console_screen_open_detail(self, message: ConsoleScreen.OpenDetail) -> None:
        self.navigation.open_detail(message.slot)

    def on_console_screen_want_logs(self, message: ConsoleScreen.WantLogs) -> None:
        self.navigation.load_slot_logs(message.slot, message.done)

    def on_fleet_screen_switch_context(self, message: FleetScreen.SwitchContext) -> None:
        self.navigation.switch_context(message.context)

    # -- keys: Textual finds an action by its name here; each is its collaborator's ------
    def action_full_log(self) -> None:
        self.navigation.full_log()
    def action_gpus(self) -> None:
        self.navigation.gpus()
    def action_gateway(self) -> None:
        self.navigation.gateway()
    def action_fleet(self) -> None:
        self.navigation.fleet()
    def action_alert_history(self) -> None:
        self.navigation.alert_history()
    def action_help(self) -> None:
        self.navigation.help()
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.replay_keys.allowed(action)
    def action_live_pause(self) -> None:
        self.replay_keys.live_pause()
    def action_replay_toggle(self) -> None:
        self.replay_keys.toggle()
    def action_replay_step(self, n: int) -> None:
        self.replay_keys.step(n)
    def action_replay_marker(self, direction: int) -> None:
        self.replay_keys.marker(direction)
    def action_replay_speed(self, which: int) -> None:
        self.replay_keys.speed(which)
    def action_replay_jump(self, direction: int) -> None:
        self.replay_keys.ask_jump(direction)

    def action_command_palette(self) -> None:
        if self.use_command_palette and not CommandPalette.is_open(self):
            self.push_screen(self.palette_commands.palette())

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        return self.palette_commands.commands(super().get_system_commands(screen))

    # -- failures: the error boundary's ------------------------------------------------
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.error_boundary.worker_changed(event)

    def _handle_exception(self, error: Exception) -> None:
        """Textual's hook for every failure it catches (a guarded private reach): the
        boundary says if the console goes on; if not, it ends with a crash report
        (``console/commands/tui_cmd.py`` writes it from ``self.crash``)."""
        frame = inspect.currentframe()
        caller = frame.f_back.f_code if frame is not None and frame.f_back else None
        del frame
        if self.error_boundary.survived(error, caller):
            return
        from console.ui.crash import format_error

        if self.crash is None:
            self.crash = format_error(error)
        super()._handle_exception(error)

    def exit(self, result: Any = None, return_code: int = 0, message: Any = None) -> None:
        self.exiting = True
        super().exit(result, return_code, message)

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
            # the main screen keeps lines noted before it was drawn (see its log_line)
            if isinstance(screen, ConsoleScreen) and (screen.is_mounted
                                                      or isinstance(screen, MainScreen)):
                screen.log_line(t, text, style, replace)

    # -- operations ----------------------------------------------------------------
    def start_operation(self, operation_id: str, args: dict[str, Any] | None = None) -> None:
        """Preflight, ask, confirm, progress: the one flow (``ui/operation_flow.py``)."""
        from console.ui.operation_flow import AppFlowHost, run_operation

        if self.exiting:
            return  # quitting: nothing new starts (its coroutine would never be awaited)
        if self.replay is not None:
            self.run_worker(self.replay_keys.refused(operation_id, args), group="operation",
                            exit_on_error=False)
            return
        host = AppFlowHost(self, self.context_ready)
        self.run_worker(run_operation(host, operation_id, dict(args or {})),
                        group="operation", exit_on_error=False)


def collect_garbage_again() -> None:
    """End of start-up (see ``console/cli.py``): what exists now lives for the whole run."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def make_app(start: ConsoleContext | StagedStart | Replay, wall: bool = False,
             theme: str | None = None) -> PodConsoleApp:
    """The one factory: the CLI, the tests and the screenshot script all call this. A
    :class:`~console.session.record.replay.Replay` opens it on a recording (read-only);
    ``wall``: the wall's screen; ``theme``: the config's (a replay's, read by its command),
    else the context's."""
    return PodConsoleApp(start, wall=wall, theme=theme)
