"""The Textual app and the one factory (``make_app``) used by the CLI, tests and screenshots.

Data flows one way: a timer starts a poll worker (never two at once); the
worker awaits the collectors, evaluates alerts and hands immutable snapshots
to whatever screens are open, which only render. Keys go through the action
registry, whose sender enforces read-only mode.

An app starts either from a full :class:`ConsoleContext` (tests, screenshots, the
demo) or from a :class:`StagedStart` (``watch``/``wall``): then the first poll and
the first frame run on the boot plan's poller while the context — typed settings,
validated profiles, agent transport, registry — is built in a worker thread. Until
it is ready, operations wait for it and alerts are not evaluated. This module
imports nothing heavy at the top for that reason (pydantic, httpx, plotext).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from textual.app import App, SystemCommand
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from console.model import fmt
from console.model.alerts import AlertBook, AlertEvent, Condition
from console.model.history import History
from console.model.snapshot import DeploymentSnapshot, PodSnapshot
from console.session.view import (
    ConsoleContext,
    ConsoleState,
    ConsoleView,
    StagedStart,
    slot_columns,
    state_path,
    view_of,
)
from console.sources.collect.poller import DeploymentPoller
from console.ui.screens.base import ConsoleScreen
from console.ui.screens.main import COMMON_BINDINGS, OPERATION_BINDINGS, MainScreen

__all__ = ["ConsoleContext", "ConsoleView", "PodConsoleApp", "StagedStart", "make_app",
           "state_path", "view_of"]

if TYPE_CHECKING:

    from console.operations.registry import Outcome
    from console.ui.screens.modals import RebalanceScreen

FIRST_PAINT_WAIT_S = 0.15
"""How long the first paint waits for the first poll (see ``on_mount``)."""
POD_POLL_S = 10.0
"""RunPod's v2 API allows ~60 requests/minute: pod state every 10 s is plenty."""
REFRESH_STEPS = (1.0, 2.0, 5.0, 10.0, 30.0)
"""What + and - step through (the settings' refresh_s is where it starts)."""
QUIT_CLEANUP_S = 180.0
"""How long quitting waits for an interrupted operation to clean up (its DELETEs)."""


class PodConsoleApp(App):
    TITLE = "pod-console"
    CSS_PATH = "console.tcss"
    ENABLE_COMMAND_PALETTE = True

    def __init__(self, start: ConsoleContext | StagedStart, wall: bool = False,
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.ctx: ConsoleContext | None = None
        self._staged: StagedStart | None = None
        if isinstance(start, StagedStart):
            self._staged = start
        else:
            self.ctx = start
        self.wall = wall
        self._context_ready = asyncio.Event()
        self._polled = asyncio.Event()
        self.ready_after_s: float | None = None
        """Seconds from mount to a full context (None until then)."""
        self.fatal: str | None = None
        """Why the context could not be built (a config or profile problem)."""
        self.snapshot: DeploymentSnapshot | None = None
        self.pod: PodSnapshot | None = None
        self.alerts = AlertBook()
        self._quitting = False
        self._spend: Any = None
        """``console.session.spend.SpendBook`` once the settings are known (today's earlier
        runs)."""
        self.failures: dict[str, Condition] = {}
        self.log_lines: deque[tuple[float, str, str]] = deque(maxlen=500)
        self._polling = False
        self._finishing = False
        self._mounted_at = time.monotonic()
        self._last_pod_poll = -1e18
        self.polls = 0
        self.first_data_at: float | None = None
        self.poll_failure: tuple[float, str] | None = None
        self.fleet: Any = None
        """Every context's pod (``FleetSnapshot``), read while the fleet screen is open."""
        self._fleet_collector: Any = None
        self._fleet_busy = False
        self._fleet_timer: Any = None
        """When the last poll failed and why; None once one succeeds (shown on screen)."""

    # -- what the screens read -------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self.ctx is not None

    @property
    def view(self) -> ConsoleView:
        if self.ctx is not None:
            return view_of(self.ctx)
        assert self._staged is not None
        return self._staged.view

    @property
    def poller(self) -> DeploymentPoller:
        if self.ctx is not None:
            return self.ctx.poller
        assert self._staged is not None
        return self._staged.poller

    @property
    def history(self) -> History:
        if self.ctx is not None:
            return self.ctx.history
        assert self._staged is not None
        return self._staged.history

    def allowed(self, action_id: str) -> bool:
        """Before the registry exists, every operation but in read-only mode (it waits)."""
        if self.ctx is not None:
            return self.ctx.registry.allowed(action_id)
        return not self.view.read_only

    # -- lifecycle -----------------------------------------------------------------
    async def on_mount(self) -> None:
        self._mounted_at = time.monotonic()
        view = self.view
        self.note("console started" + (" (DEMO)" if view.demo else "")
                  + (" in READ-ONLY wall mode" if view.read_only else ""))
        # A terminal that goes away (SSH dropped) must end the app, not leave it spinning.
        try:
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGHUP, self._on_hangup)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
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
        self.refresh_s = view.refresh_s
        self._poll_timer = self.set_interval(view.refresh_s, self.tick)
        rotate = self.ctx.pod_rotate_s if self.ctx is not None else 0.0
        if self.wall and rotate > 0 and len(view.contexts) > 1:
            self.set_timer(rotate, self._next_pod)

    def action_refresh_rate(self, direction: int) -> None:
        """+ / -: poll more or less often, from the steps of REFRESH_STEPS (at least 1 s).
        Requests time out inside the new interval; polls still never overlap."""
        from console.config import defaults

        steps = REFRESH_STEPS
        now = getattr(self, "refresh_s", self.view.refresh_s)
        if direction > 0:  # "+" is faster: a shorter interval
            new = max([x for x in steps if x < now - 1e-9] or [steps[0]])
        else:
            new = min([x for x in steps if x > now + 1e-9] or [steps[-1]])
        if new == now:
            self.note(f"refresh stays every {now:g} s", "dim")
            return
        self.refresh_s = new
        self.poller.timeout_s = defaults.request_timeout_s(new)
        timer = getattr(self, "_poll_timer", None)
        if timer is not None:
            timer.stop()
        self._poll_timer = self.set_interval(new, self.tick)
        self.note(f"refresh every {new:g} s (requests time out after "
                  f"{self.poller.timeout_s:g} s)")

    async def _check_ledger(self) -> None:
        """Pods an interrupted ``up`` (or console) may have left billing are an alert from
        the first screen on, until ``pod-console down`` or ``f`` settles them."""
        from console.config.config_file import ledger_path
        from console.operations.ledger import Ledger

        assert self.ctx is not None
        entries = await asyncio.to_thread(
            Ledger(ledger_path(self.ctx.settings.state_dir)).open_entries)
        if entries:
            names = ", ".join(e.pod_id or e.name or "?" for e in entries[:3])
            self.failures["ledger"] = Condition(
                "ledger", "crit", f"{len(entries)} pod request(s) never settled",
                f"{names} may be billing: pod-console down (or f) terminates them")
            self.action_refresh_now()

    def _acknowledge(self) -> list[str]:
        """The ack operation's effect: every firing alert marked as seen by this user."""
        from console.operations.audit import current_user

        done = self.alerts.acknowledge(current_user(), self.now())
        self.call_later(self.refresh_screens)
        return [a.title for a in done]

    def _on_hangup(self) -> None:
        self.run_worker(self.action_quit(), group="quit", exclusive=True, exit_on_error=False)

    async def action_quit(self) -> None:
        """Quit (q, ctrl+q, SIGHUP): an operation in flight is cancelled first and its
        cleanup — terminating what it created, stopping what it resumed — runs to its
        end before the app exits. Exiting straight away would drop that cleanup."""
        running = [w for w in self.workers if w.group == "action" and w.is_running]
        if running:
            self.note("quitting: cancelling the operation in flight and waiting for its "
                      "cleanup", "bold yellow")
            for w in running:
                w.cancel()
            for w in running:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(QUIT_CLEANUP_S):
                        await w.wait()
        self.exit()

    async def _finish(self) -> None:
        """Build the full context in a thread; on failure show why and stop there."""
        staged = self._staged
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
        self.ctx = ctx
        if ctx.poller is not staged.poller:
            self.note("validated settings poll differently from the first frame's reading;"
                      " using the validated ones", "yellow")
            await staged.poller.aclose()
        self._staged = None
        self._became_ready()
        for screen in self.screen_stack:
            if isinstance(screen, ConsoleScreen) and screen.is_mounted:
                await screen.when_ready()
        self.action_refresh_now()  # pod state and alerts now, not at the next tick

    def _became_ready(self) -> None:
        assert self.ctx is not None
        if not self.wall:
            self.run_worker(self._check_ledger(), group="ledger", exit_on_error=False)
        collect_garbage_again()
        self.ctx.registry.refresh_target = self.action_refresh_now  # type: ignore[attr-defined]
        self.ctx.registry.ack_target = self._acknowledge  # type: ignore[attr-defined]
        self.ready_after_s = time.monotonic() - self._mounted_at
        self._context_ready.set()
        if self.ctx.poller.prometheus_url:
            self.run_worker(self._backfill(), group="backfill", exit_on_error=False)

    async def _backfill(self) -> None:
        """The plots' history from Prometheus, once: a console (a wall's browser tab)
        that just started shows the last half hour, not the seconds it has polled."""
        assert self.ctx is not None
        poller = self.ctx.poller
        step = max(self.ctx.settings.refresh_s, poller.history.window_s / 240)
        n = await poller.backfill(step_s=step)
        if n:
            self.note(f"plots filled from Prometheus ({n} points)", "dim")
            self.refresh_screens()

    async def on_unmount(self) -> None:
        await self.poller.aclose()
        if self._fleet_collector is not None:
            await self._fleet_collector.aclose()
        if self.ctx is None:
            return
        for fn in self.ctx.on_exit:
            r = fn()
            if asyncio.iscoroutine(r):
                await r

    def now(self) -> float:
        return self.ctx.clock() if self.ctx is not None else time.time()

    # -- polling -------------------------------------------------------------------
    def _terminal_gone(self) -> bool:
        """The terminal closed without a SIGHUP reaching us (a pty whose other end was
        closed by a process that never made it our controlling terminal): reads then
        return end-of-file at once, and Textual's input thread would spin on them."""
        if self.is_headless or self._quitting:
            return False
        import termios

        try:
            termios.tcgetattr(sys.__stdout__.fileno())  # type: ignore[union-attr]
        except termios.error as exc:
            return bool(exc.args) and exc.args[0] == errno.EIO
        except (OSError, ValueError, AttributeError):
            return False
        return False

    def tick(self) -> None:
        if self._terminal_gone():
            self._quitting = True
            self._on_hangup()
            return
        if self._polling:
            return  # the previous poll is still running: skip this tick, never overlap
        self._polling = True
        self.run_worker(self._poll(), group="poll", exit_on_error=False)

    def action_refresh_now(self) -> None:
        self._last_pod_poll = -1e18
        self.tick()

    async def _poll(self) -> None:
        try:
            ctx = self.ctx
            now_mono = time.monotonic()
            tasks: list[Any] = [self.poller.poll()]
            poll_pod = (ctx is not None and ctx.pod_collector is not None
                        and now_mono - self._last_pod_poll >= POD_POLL_S)
            if poll_pod:
                self._last_pod_poll = now_mono
                tasks.append(ctx.pod_collector.poll())  # type: ignore[union-attr]
            results = await asyncio.gather(*tasks)
            self.snapshot = results[0]
            if poll_pod:
                self.pod = await self._with_spend(results[1])
                if self.pod is not None and self.pod.gpus is not None:
                    from console.ui.screens.gpus import record_gpus

                    record_gpus(self.history, self.pod.gpus, self.now())
            self.polls += 1
            self.poll_failure = None
            if self.first_data_at is None and any(s.figures for s in self.snapshot.slots):
                self.first_data_at = time.monotonic()
            self._polled.set()
            if ctx is not None:
                await self._update_alerts(ctx)
            self.refresh_screens()
        finally:
            self._polling = False
        if self._staged is not None and not self._finishing:
            # the first frame with numbers is on its way: now build the rest
            self._finishing = True
            self.call_after_refresh(
                lambda: self.run_worker(self._finish(), group="finish", exit_on_error=False))

    async def _with_spend(self, pod: PodSnapshot | None) -> PodSnapshot | None:
        """The pod with today's earlier runs added up (a resume must not reset the day)."""
        if pod is None or self.ctx is None:
            return pod
        if self._spend is None:
            from console.session.spend import SpendBook

            # read in a worker: a file read never runs on the event loop
            self._spend = await asyncio.to_thread(
                SpendBook, self.ctx.settings.state_dir / "spend.json")
        now = self.now()
        self._spend.observe(pod, now)
        if self._spend.due(now):
            try:
                await asyncio.to_thread(self._spend.save, now)
            except OSError as exc:  # a full disk costs the morning's figure, not the poll
                self._spend.postpone(now)  # tried again in a minute, said once a minute
                self.note(f"today's spend could not be saved: {exc}", "yellow")
        return replace(pod, spent_earlier_today=self._spend.earlier_today(pod, now))

    async def _update_alerts(self, ctx: ConsoleContext) -> None:
        from console.model.alerts import evaluate, notify

        now = self.now()
        conds = evaluate(self.snapshot, self.pod, ctx.profile, ctx.settings, now,
                         self.failures.values())
        raised, cleared = self.alerts.update(conds, now)
        for a in raised:
            self.note(f"ALERT {a.title}" + (f" — {a.detail}" if a.detail else ""),
                      "bold red" if a.severity == "crit" else "yellow")
        for a in cleared:
            self.note(f"cleared: {a.title}", "green")
        gpu_faults = [a for a in raised if a.key.startswith(("xid:", "ecc:", "remapfail:"))]
        if gpu_faults and not self.wall:
            # hardware faults are facts about the pod that outlive the screen: audited
            # (the agent's own audit log on the pod has each Xid too)
            async def record() -> None:
                for a in gpu_faults:
                    try:
                        await asyncio.to_thread(ctx.registry.audit.append, "gpu_fault",
                                                {"alert": a.key, "title": a.title,
                                                 "advice": a.detail}, "observed")
                    except Exception as exc:  # a full disk: said, the alert still stands
                        self.note(f"AUDIT RECORD LOST for {a.title}: {exc}", "bold red")
            self.run_worker(record(), group="audit-gpu", exit_on_error=False)
        url = ctx.settings.webhook_url
        if url and (raised or cleared):
            # beside the poll, never inside it: a slow webhook must not hold the figures
            async def send() -> None:
                err = await notify(url.get_secret_value(), raised, cleared,
                                   f"pod-console {ctx.profile_name}",
                                   timeout_s=min(5.0, ctx.settings.refresh_s * 4))
                if err:
                    self.note(err, "red")
            self.run_worker(send(), group="webhook", exit_on_error=False)

    def console_state(self) -> ConsoleState:
        """What every screen shows now: built once per poll, handed down, never read back."""
        view = self.view
        gpus, utils, states = slot_columns(view, self.pod)
        if self.ctx is not None:
            reg = self.ctx.registry
            allowed = frozenset(i for i in reg.specs if reg.allowed(i))
        else:  # before the registry exists operations wait for it, unless read-only
            allowed = frozenset() if view.read_only else frozenset(
                b.id for b in OPERATION_BINDINGS if b.id)
        running = None
        thresholds = {}
        if self.ctx is not None:
            if self.ctx.registry.in_flight is not None:
                running = self.ctx.registry.specs[self.ctx.registry.in_flight].title
            thresholds = {t.slot: self.ctx.settings.thresholds_for(t.slot)
                          for t in view.targets}
        return ConsoleState(view=view, ready=self.ready, now=self.now(), operation=running,
                            snapshot=self.snapshot, pod=self.pod,
                            alerts=tuple(self.alerts.sorted()), stale=self.stale_text(),
                            history=self.history, allowed=allowed, gpus=gpus, utils=utils,
                            states=states, thresholds=thresholds,
                            alert_history=tuple(self.alerts.history), fleet=self.fleet)

    def refresh_screens(self) -> None:
        screens = [s for s in self.screen_stack
                   if isinstance(s, ConsoleScreen) and s.is_mounted]
        if screens:
            state = self.console_state()
            for screen in screens:
                screen.show(state)

    # -- what screens ask for (messages up) -----------------------------------------
    def on_console_screen_operation(self, message: ConsoleScreen.Operation) -> None:
        self.start_operation(message.action_id, message.args)

    def on_console_screen_open_detail(self, message: ConsoleScreen.OpenDetail) -> None:
        self.open_detail(message.slot)

    def on_console_screen_want_logs(self, message: ConsoleScreen.WantLogs) -> None:
        self.load_slot_logs(message.slot, message.done)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place a worker's unexpected exception lands: said, never swallowed.

        A poll that raised is shown on every screen (the wall too) with its time and
        reason, and the next tick polls again."""
        if event.state is not WorkerState.ERROR:
            return
        err = event.worker.error
        reason = f"{type(err).__name__}: {err}"[:200] if err else "unknown error"
        group = event.worker.group or "worker"
        if group == "poll":
            self.poll_failure = (self.now(), reason)
            self.refresh_screens()
        self.note(f"{group} failed: {reason}", "bold red")

    def stale_text(self) -> str | None:
        if self.poll_failure is not None:
            t, reason = self.poll_failure
            return f"POLL FAILED {fmt.clock(t)}: {reason}"
        snap = self.snapshot
        if snap is None:
            return "waiting for first data…"
        stale = [s for s in snap.slots if s.stale_since is not None]
        if not stale:
            return None
        oldest = min(s.stale_since for s in stale if s.stale_since is not None)
        return f"STALE since {fmt.clock(oldest)}"

    # -- action log ----------------------------------------------------------------
    def note(self, text: str, style: str = "") -> None:
        t = self.now()
        self.log_lines.append((t, text, style))
        for screen in self.screen_stack:
            if isinstance(screen, ConsoleScreen) and screen.is_mounted:
                screen.log_line(t, text, style)

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

    # -- the fleet: every context's pod ------------------------------------------------
    def action_fleet(self) -> None:
        from console.ui.screens.fleet import FleetScreen

        if len(self.view.contexts) < 1:
            self.note("the config names no contexts: this console's pod is the whole fleet "
                      "(README, \"Several pods\")", "yellow")
            return
        if not isinstance(self.screen, FleetScreen):
            self.push_screen(FleetScreen(self.console_state()))
        self._watch_fleet()

    def _watch_fleet(self) -> None:
        """Poll the fleet now and then every refresh while its screen is open (a cycle
        still running skips the tick: polls never overlap)."""
        if self._fleet_timer is None:
            every = getattr(self, "refresh_s", self.view.refresh_s)
            self._fleet_timer = self.set_interval(every, self._poll_fleet)
        self._poll_fleet()

    def _poll_fleet(self) -> None:
        from console.ui.screens.fleet import FleetScreen

        if not any(isinstance(s, FleetScreen) for s in self.screen_stack):
            return  # nobody looks at it: no polling of other pods
        if self._fleet_busy or self.ctx is None:
            return  # polls never overlap
        self._fleet_busy = True
        self.run_worker(self._fleet_cycle(), group="fleet", exit_on_error=False)

    async def _fleet_cycle(self) -> None:
        from console.session.fleet import FleetCollector

        assert self.ctx is not None
        try:
            if self._fleet_collector is None:
                # reads every context's settings and profiles: files, off the loop
                self._fleet_collector = await asyncio.to_thread(FleetCollector,
                                                                self.ctx.config)
            limit = max(5.0, self.view.refresh_s * 2)
            try:
                self.fleet = await asyncio.wait_for(self._fleet_collector.poll(), limit * 2)
            except TimeoutError:
                self.note(f"fleet: no answer within {limit * 2:g} s", "yellow")
            self.refresh_screens()
        finally:
            self._fleet_busy = False

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
        from console.ui.screens.modals import HelpScreen

        rows = []
        binds = [] if self.wall else OPERATION_BINDINGS
        specs = self.ctx.registry.specs if self.ctx is not None else {}
        for b in binds:
            op = b.id or ""
            spec = specs.get(op)
            rows.append((b.key, spec.title if spec else b.description,
                         bool(spec.dangerous) if spec else True, self.allowed(op)))
        if not self.wall:
            rows.append(("enter", "slot detail (figures, plots, log lines)", False, True))
        for b in COMMON_BINDINGS:
            rows.append((b.key, b.description, False, True))
        if self.wall:
            rows.append(("space", "next view", False, True))
        else:
            from console.ui.widgets.slots import SlotsTable

            rows.append(("up,down", "choose a slot (then enter)", False, True))
            rows.extend((b.key, b.description, False, True) for b in SlotsTable.BINDINGS
                        if b.action.startswith(("sort", "invert")))
            rows.append(("slash", "filter slots by name or model (escape clears)", False, True))
        from console.model import catalog

        legend = [(c.header, catalog.describe(f)) for f, c in catalog.columns()]
        self.push_screen(HelpScreen(rows, legend))

    def load_slot_logs(self, slot: str, done: Callable[[list[str]], None]) -> None:
        async def fetch() -> None:
            await self._context_ready.wait()
            agent = self.ctx.agent if self.ctx is not None else None
            if agent is None or not agent.configured:
                done([f"(no agent connection: {'wall mode' if self.wall else 'not configured'})"])
                return
            try:
                r = await agent.logs(slot, 200)
                done(list(r.final.get("lines", [])) if r.ok and r.final else [r.message])
            except Exception as exc:  # the panel shows why, it never crashes
                done([f"(could not fetch logs: {exc})"])
        self.run_worker(fetch(), group="logs", exclusive=True, exit_on_error=False)

    # -- command palette -----------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if self.ctx is None:
            return  # operations appear once the console has loaded
        reg = self.ctx.registry
        for spec in reg.specs.values():
            if reg.allowed(spec.id) and spec.id != "refresh":
                yield SystemCommand(spec.title, spec.description,
                                    lambda i=spec.id: self.start_operation(i))
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
            self.action_refresh_now()
        self.run_worker(run(), group="demo", exit_on_error=False)

    # -- operations ----------------------------------------------------------------
    def start_operation(self, action_id: str, args: dict[str, Any] | None = None) -> None:
        self.run_worker(self._operation(action_id, dict(args or {})), group="action",
                        exit_on_error=False)

    async def _operation(self, action_id: str, args: dict[str, Any]) -> None:
        from console.operations.registry import Outcome
        from console.ui.screens.modals import ConfirmScreen, ProgressScreen, WatchdogScreen

        if self.ctx is None:
            self.note("console still loading: the operation starts once it has", "dim")
            await self._context_ready.wait()
        assert self.ctx is not None
        reg = self.ctx.registry
        spec = reg.specs.get(action_id)
        if spec is None:
            return
        if not reg.allowed(action_id):
            out = await reg.invoke(action_id, args)  # recorded as refused, nothing runs
            self.note(out.message, "yellow")
            return
        if spec.dangerous and reg.in_flight is not None:
            # before asking anything: one dangerous operation at a time
            self.note(f"{spec.title}: not now — {reg.specs[reg.in_flight].title} is still "
                      "running", "yellow")
            return
        if (why := self._preflight(action_id)) is not None:
            # said before anything is asked: no "begin billing?" for a pod that already bills
            self.note(f"{spec.title}: not started — {why}", "yellow")
            return
        if action_id == "rebalance" and "set" not in args:
            chosen = await self.push_screen_wait(await self._rebalance_screen())
            if not chosen:
                self.note("rebalance cancelled")
                return
            args["set"] = chosen
        if action_id == "watchdog" and "cmd" not in args:
            pod = self.pod or PodSnapshot()
            plan = pod.stop_plan
            ext = None
            if plan is not None and plan.extension_until:
                ext = (f"extended until {fmt.wall_time(plan.extension_until)} by "
                       f"{plan.extension_by}" + (f": {plan.extension_reason}"
                                                 if plan.extension_reason else ""))
            chosen = await self.push_screen_wait(WatchdogScreen(
                pod.watchdog_armed, pod.next_stop, self.now(), ext))
            if not chosen:
                return
            args.update(chosen)
        if not spec.dangerous and not spec.shows_progress:  # quick, harmless: no dialog
            out = await reg.invoke(action_id, args)
            self.note(f"{spec.title}: {out.message}", "green" if out.ok else "yellow")
            self.refresh_screens()
            return
        if spec.dangerous:
            question = spec.confirm.format(**self._confirm_fields(args))
            if action_id == "watchdog":
                question = self._watchdog_question(args) or question
            if not await self.push_screen_wait(ConfirmScreen(spec.title, question)):
                self.note(f"{spec.title}: cancelled")
                return
        what = self._args_text(args)
        self.note(f"{spec.title}: started{f' ({what})' if what else ''}", "bold")
        self.call_later(self.refresh_screens)  # the header says it is running
        running: list[asyncio.Future[Outcome]] = []
        asked_to_cancel = False

        def cancel() -> None:
            nonlocal asked_to_cancel
            asked_to_cancel = True
            for fut in running:
                fut.cancel()

        progress = ProgressScreen(spec.title, on_cancel=cancel if spec.cancellable else None)
        self.push_screen(progress)

        def on_progress(step: str, fraction: float | None, message: str) -> None:
            # Escape hides the dialog and the operation goes on: a dialog that is gone
            # (or half gone) must never turn a progress line into an exception
            with contextlib.suppress(Exception):
                progress.step(step, fraction, message)
            if step:
                self.note(f"  {spec.title} · {step} {message}".rstrip(), "dim")

        run = asyncio.ensure_future(reg.invoke(action_id, args, on_progress))
        running.append(run)
        try:
            out: Outcome = await run
        except asyncio.CancelledError:
            if not asked_to_cancel:
                raise  # the console is quitting: the registry has recorded it
            out = Outcome(False, f"{spec.title} cancelled; nothing kept", state="cancelled")
        style = "green" if out.ok else ("yellow" if out.state in ("rolled_back", "cancelled")
                                        else "bold red")
        self.note(f"{spec.title}: {out.state or ('ok' if out.ok else 'failed')} — "
                  f"{out.message}", style)
        # recorded even when the dialog is not drawn yet: it draws the end when it is
        # (a hidden dialog is gone; the action log says how it ended)
        with contextlib.suppress(Exception):
            progress.finish(out.ok, out.message)
        if not out.ok and out.state not in ("refused", "cancelled"):
            # an event, not a standing alert: it happened once, the log and the alert
            # history keep it, and nothing on screen claims it is still going on
            regressed = out.state == "regressed"
            self.alerts.event(AlertEvent(self.now(), "failed", "warn" if regressed else "crit",
                                         f"{spec.title}: regression" if regressed else
                                         f"{spec.title} failed", out.message))
        self.action_refresh_now()

    def _preflight(self, action_id: str) -> str | None:
        """Why an operation cannot do anything now, from what the console already knows
        (the last poll), or None. The operation itself checks again when it runs."""
        assert self.ctx is not None
        pod = self.pod
        if action_id == "resume" and pod is not None and pod.status == "RUNNING":
            return f"pod {pod.pod_id or ''} is already RUNNING".replace("  ", " ")
        if action_id in ("host_checks", "rebalance", "watchdog") and not (
                self.ctx.agent is not None and self.ctx.agent.configured):
            return "no pod agent configured (pod.ssh_host in the config)"
        return None

    def _watchdog_question(self, args: dict[str, Any]) -> str | None:
        """What a watchdog change means in money, said before it is made."""
        f = self._confirm_fields({})
        cmd = args.get("cmd")
        if cmd == "extend" and args.get("clear"):
            return (f"End the extension on pod {f['pod']}? Its scheduled stop applies again "
                    "(at once, if its time has passed).")
        if cmd == "extend":
            why = f" ({args['reason']})" if args.get("reason") else ""
            return (f"Keep pod {f['pod']} running until {args.get('until')}{why}? Neither "
                    f"the pod's watchdog nor `pod-console down` stops it before then; it "
                    f"bills {f['cost']}/h meanwhile.")
        if cmd == "disarm":
            return (f"DISARM the watchdog on pod {f['pod']}? NOTHING will stop it — not "
                    f"the schedule, not idleness — and it bills {f['cost']}/h until someone "
                    "stops it. An extension (+1 h, +2 h, until a time) ends by itself.")
        return None

    def _confirm_fields(self, args: dict[str, Any]) -> dict[str, str]:
        pod = self.pod or PodSnapshot()
        assert self.ctx is not None
        pod_id = pod.pod_id or self.ctx.settings.pod.runpod_id or "?"
        context = self.ctx.settings.context
        return {"pod": f"{pod_id} (context {context})" if context else pod_id,
                "profile": self.ctx.profile_name,
                "cost": fmt.money(pod.cost_per_hr),
                "split": ", ".join(f"{k}={v:g}" for k, v in (args.get("set") or {}).items()),
                "cmd": str(args.get("cmd", "")), "slot": str(args.get("slot", "?")),
                **self._bench_fields(args)}

    def _bench_fields(self, args: dict[str, Any]) -> dict[str, str]:
        """How many requests a benchmark sends and by which path, for its question."""
        from console.operations.benchmark.runner import BenchError, plans_for

        assert self.ctx is not None
        if not args.get("slot"):
            return {"requests": "?", "via": "?"}
        try:
            plan = plans_for(self.ctx.profile_name, self.ctx.profile,
                             self.ctx.poller.targets, self.ctx.settings, [args["slot"]])[0]
        except BenchError:
            return {"requests": "?", "via": "?"}
        return {"requests": str(plan.requests), "via": plan.via}

    @staticmethod
    def _args_text(args: dict[str, Any]) -> str:
        """An operation's arguments as a person says them ("FLASH → 0.70, Q27 → 0.25"),
        never a Python dict."""
        parts = []
        for k, v in args.items():
            if k == "set" and isinstance(v, dict):
                parts.append(", ".join(f"{slot} → {float(u):.2f}" for slot, u in v.items()))
            elif k == "cmd":
                parts.append(str(v))
            else:
                parts.append(f"{k} {v}")
        return "; ".join(parts)

    async def _rebalance_screen(self) -> RebalanceScreen:
        from console.ui.screens.modals import RebalanceScreen

        assert self.ctx is not None
        prof = self.ctx.profile
        agent = self.pod.agent_slots if self.pod else {}
        current = {n: float(agent.get(n, {}).get("gpu_util", s.gpu_util))
                   for n, s in prof.slots.items()}
        proposal, lines, predict = current, [], (lambda slot, util: "")
        if self.ctx.planner is not None:
            # the planner reads and writes the remembered KV points: a thread, not the loop
            proposal, lines, predict = await asyncio.to_thread(
                self.ctx.planner.preview, self.snapshot, current, agent)
        rows = [{"slot": n, "current": current[n], "proposed": proposal.get(n, current[n]),
                 "gpus": list(s.gpus), "min": s.min_gpu_util} for n, s in prof.slots.items()]
        return RebalanceScreen(rows, lines, predict)


def collect_garbage_again() -> None:
    """End of start-up (see ``console/cli.py``): what exists now lives for the whole run."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def make_app(start: ConsoleContext | StagedStart, wall: bool = False) -> PodConsoleApp:
    """The one factory: the CLI, the tests and the screenshot script all call this."""
    from console.ui.widgets import partial_writes

    partial_writes.install()  # changed cells only reach the terminal (see the module)
    return PodConsoleApp(start, wall=wall)
