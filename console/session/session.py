"""The console's time, without Textual: one poll at a time, every source at its cadence,
and what the screens show built from one poll.

The console (``watch``), the wall and each browser session of the web wall (a ``wall``
process) drive a :class:`Session`: the app's timer calls :meth:`Session.tick` every refresh
and renders :meth:`Session.state` after each poll; ``tests/session`` drives the same
object on an injected clock, with no terminal.

The session holds the context and the books every job judges into (alerts, GPU faults,
its own failures); each job beside time has a room of its own, with its state (issue
46): the refresh and what follows from it (``pacing.py``), the poll's body and what only
it keeps (``poll_cycle.py``), what a poll brought and how old it is (``reading.py``), the
pod between its readings (``pod_reads.py``), the gateway's and the fleet's polling, the
pod's run, the operations' intents, the day's spend, the recording, the alerts' delivery
and the jobs beside the poll (``jobs.py``).

Every session judges its own polls; what the alerts tell the world is shared by all on the
state dir (``shared_alerts.py``): the webhook hears of an alert once however many consoles,
walls and browser tabs see it; an acknowledgement made in one is shown in all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from msgspec.structs import replace

from console.model import startup
from console.model.alerts import AlertBook
from console.model.conditions import Condition
from console.model.gpu_faults import FaultBook, gpu_marks
from console.model.history import History
from console.model.pod_run import PodRun
from console.model.printable import printable
from console.model.snapshot import DeploymentSnapshot, PodSnapshot
from console.session import reading
from console.session.clock import Clock, SessionClock
from console.session.delivery import AlertDelivery
from console.session.fleet_polling import FleetPolling
from console.session.intents import OperationIntents
from console.session.jobs import Jobs, Spawn
from console.session.pacing import Pacing
from console.session.pod_reads import POD_POLL_S as POD_POLL_S
from console.session.pod_reads import STARTING_POD_POLL_S as STARTING_POD_POLL_S
from console.session.poll_cycle import PollCycle
from console.session.recording import SessionRecording
from console.session.run_tracking import RunTracking
from console.session.session_like import SessionLike
from console.session.spend import SessionSpend
from console.session.view import (
    ConsoleContext,
    ConsoleState,
    ConsoleView,
    StagedStart,
    slot_columns,
    view_of,
)

if TYPE_CHECKING:
    from console.model.gateway import GatewaySnapshot
    from console.session.fleet import FleetSnapshot
    from console.session.record.store import Recorder
    from console.sources.collect.poller import DeploymentPoller

WALL_REFRESH_GAP_S = 1.0
"""On a wall, a poll asked for (ctrl+r) comes no sooner than this after the last one."""

RunBlocking = Callable[..., Awaitable[Any]]
"""How blocking work (a file read, an fsync) runs off the loop: ``asyncio.to_thread``."""
Note = Callable[[str, str], None]
"""A line for the action log: (text, style)."""


class Session:
    """One console's sources, clock and alert book (see the module docstring).

    ``start``: a full context, or a staged start whose context :meth:`adopt` brings.
    ``clock``: a :class:`~console.session.clock.Clock` (wall and monotonic: every
    duration on the monotonic one), or one callable read as both (default: the
    context's clock, the machine's before it). ``run_blocking``: file work off the
    loop. ``spawn``: how jobs beside the poll run (default: tasks of the running loop,
    which :meth:`settle` waits for). ``note``: the
    action log. ``on_change``: told after a poll (``"poll"``), a fleet cycle
    (``"fleet"``), a backfill (``"backfill"``) or an acknowledgement made in another
    session (``"alerts"``) — the screens' cue. ``fleet_wanted``:
    whether anyone looks at the fleet now (it is polled at each tick while so).
    ``waiting_operations``: what a console still loading lets be asked for (they wait).
    """

    def __init__(self, start: ConsoleContext | StagedStart, *, wall: bool = False,
                 clock: Clock | Callable[[], float] | None = None,
                 run_blocking: RunBlocking = asyncio.to_thread,
                 spawn: Spawn | None = None, note: Note | None = None,
                 on_change: Callable[[str], None] | None = None,
                 fleet_wanted: Callable[[], bool] | None = None,
                 waiting_operations: Iterable[str] = ()) -> None:
        self.ctx: ConsoleContext | None = start if isinstance(start, ConsoleContext) else None
        self.staged: StagedStart | None = start if isinstance(start, StagedStart) else None
        self.wall = wall
        self._clock = SessionClock(clock)
        self._run_blocking = run_blocking
        self._note = note or (lambda text, style: None)
        self._on_change = on_change or (lambda kind: None)
        self._fleet_wanted = fleet_wanted or (lambda: False)
        self._waiting = frozenset(waiting_operations)
        self.jobs = Jobs(spawn, self._note)
        """The jobs beside the poll (``jobs.py``)."""
        self.pacing = Pacing(self, self._note)
        """The refresh rate and what follows from it (``pacing.py``)."""
        self.alerts = AlertBook()
        self.faults = FaultBook()
        """GPU hardware faults per pod and GPU, until seen healthy or their pod is gone."""
        self.failures: dict[str, Condition] = {}  # its own findings (an unsettled ledger)
        self.intents = OperationIntents(self.mono)
        """Operations that take slots down on purpose hold their alerts (``intents.py``)."""
        self.runs = RunTracking(self.alerts, self.faults, self._note)
        """The pod's run, and the operations that explain it (``run_tracking.py``)."""
        self.spend = SessionSpend(run_blocking, self._note)
        self.delivery = AlertDelivery(self, run_blocking=run_blocking, spawn=self.jobs.spawn,
                                      note=self._note, on_change=self._on_change)
        """Where the judged alerts go (shared book, outbox, Alertmanager, audit)."""
        self.recording = SessionRecording(self, self._note)
        self.fleet_polling = FleetPolling(run_blocking=run_blocking, clock=self.now,
                                          note=self._note, on_change=self._on_change)
        self.cycle = PollCycle(self, run_blocking=run_blocking, note=self._note,
                               on_change=self._on_change)
        """The poll's body and what only it keeps (``poll_cycle.py``)."""
        if self.ctx is not None:
            self._watch_operations(self.ctx)

    # -- what it runs on -------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self.ctx is not None

    @property
    def clock(self) -> Clock:
        """What this session runs on (see the ``clock`` argument)."""
        return self._clock.of(self.ctx.clock if self.ctx is not None else None)

    def now(self) -> float:
        """The wall clock: for what is shown and for schedules, never a duration."""
        return self.clock.wall()

    def mono(self) -> float:
        """The monotonic clock: every duration this session measures."""
        return self.clock.monotonic()

    def _start(self) -> StagedStart:
        assert self.staged is not None, "a session runs on a context or a staged start"
        return self.staged

    @property
    def poller(self) -> DeploymentPoller:
        return self.ctx.poller if self.ctx is not None else self._start().poller

    @property
    def history(self) -> History:
        return self.ctx.history if self.ctx is not None else self._start().history

    @property
    def view(self) -> ConsoleView:
        base = view_of(self.ctx) if self.ctx is not None else self._start().view
        return base if base.refresh_s == self.refresh_s else replace(base, refresh_s=self.refresh_s)

    @property
    def refresh_s(self) -> float:
        """Seconds between polls: what +/- chose, else the settings' (``pacing.py``)."""
        return self.pacing.refresh_s

    def step_refresh(self, direction: int) -> float | None:
        """+ (``direction`` > 0) or -: the new refresh, or None when it stays."""
        return self.pacing.step(direction)

    def _watch_operations(self, ctx: ConsoleContext) -> None:
        self.intents.watch(ctx, lambda: [t.slot for t in self.view.targets])
        if ctx.deployment is not None:  # a benchmark's unanswered pod read falls back on it
            ctx.deployment.pod_seen = lambda: self.cycle.pod_reads.agent_seen

    # -- the tick and the poll -------------------------------------------------------
    @property
    def polling(self) -> bool:
        return self.cycle.busy

    @property
    def polls(self) -> int:
        return self.cycle.count

    @property
    def poll_failure(self) -> tuple[float, str] | None:
        """When the last poll failed and why; None once one succeeds (shown on screen)."""
        return self.cycle.failure

    def tick(self) -> None:
        """The timer's beat: the poll (none while one runs: polls never overlap) and,
        while someone looks at it, the fleet (its own guard: a slow fleet never holds the
        slots)."""
        if not self.cycle.busy:
            self.jobs.spawn(self.poll(), "poll")
        if self._fleet_wanted():
            self.want_fleet()

    def refresh_now(self) -> None:
        """Every source now, the pod's too (after an operation, once the context is in,
        an unsettled ledger found)."""
        self.cycle.pod_reads.wanted = True
        self.tick()

    def refresh_asked(self) -> None:
        """A viewer's ctrl+r (or the palette's "Refresh now"): a poll, never an operation.

        On a wall anyone whose browser shows it may press it, so it comes no sooner than
        ``WALL_REFRESH_GAP_S`` after the last poll, and the pod is read at its own
        cadence: a key held down must not become RunPod API requests, or a scrape of
        every slot, per keystroke."""
        if not self.wall:
            self.refresh_now()
            return
        last = self.cycle.started_m
        if last is None or not 0.0 <= self.mono() - last < WALL_REFRESH_GAP_S:
            self.tick()

    async def poll(self) -> bool:
        """One poll of every source due; False when one was already running (nothing
        done) or it failed (said in the log and on every screen, and the next tick
        polls again). ``poll_cycle.py`` holds its body."""
        return await self.cycle.run()

    @property
    def run(self) -> PodRun | None:
        """The pod's run after the last poll (``run_tracking.py``)."""
        return self.runs.run

    # -- what a screen shows ---------------------------------------------------------
    @property
    def snapshot(self) -> DeploymentSnapshot | None:
        return self.cycle.reading.snapshot

    @property
    def pod(self) -> PodSnapshot | None:
        return self.cycle.reading.pod

    @property
    def gateway(self) -> GatewaySnapshot | None:
        """The gateway's last reading (``gateway_url`` with ``gateway.watch``), else None."""
        return self.cycle.gateway

    def state(self) -> ConsoleState:
        """What every screen shows now: the last poll's reading, alerts and ages."""
        view = self.view
        r = self.cycle.reading
        now, mono = self.now(), self.mono()
        gpus, utils, states = slot_columns(view, r.pod)
        pod_id = r.pod.pod_id if r.pod is not None else None
        marks = gpu_marks(self.faults.of(pod_id), r.pod.gpus if r.pod is not None else None)
        ctx = self.ctx
        running = None
        thresholds: dict[str, Any] = {}
        if ctx is not None:
            reg = ctx.registry
            allowed = frozenset(i for i in reg.specs if reg.allowed(i))
            if reg.in_flight is not None:
                running = reg.specs[reg.in_flight].title
            thresholds = {t.slot: ctx.settings.thresholds_for(t.slot, ctx.profile)
                          for t in view.targets}
        else:  # before the registry exists operations wait for it, unless read-only
            allowed = frozenset() if view.read_only else self._waiting
        gw = ctx.settings.gateway if ctx is not None else None
        return ConsoleState(view=view, ready=ctx is not None, now=now, operation=running,
                            snapshot=r.snapshot, pod=r.pod, alerts=tuple(self.alerts.sorted()),
                            stale=self.stale_text(), history=self.history, allowed=allowed,
                            gpus=gpus, utils=utils, states=states, thresholds=thresholds,
                            alert_history=tuple(self.alerts.history), fleet=self.fleet,
                            polled_at=r.at, ages=r.ages(mono, self.refresh_s),
                            spend_month=r.spend_month, stop=r.stop, run=self.run,
                            gpu_marks=marks, stalled=dict(self.cycle.stalls.stalls),
                            phases=startup.phase_cells(
                                r.pod.agent_slots if r.pod is not None else None,
                                mono - r.pod_read_m if r.pod_read_m is not None else 0.0),
                            gateway=self.gateway,
                            idle_source=gw.idle_source if gw is not None else "slots",
                            active_window_s=gw.active_window_s if gw is not None else 3600.0,
                            stall_after_s=(ctx.settings.alerts.stall_after_s
                                           if ctx is not None else 30.0),
                            gateway_limits=gw)

    def stale_text(self) -> str | None:
        """Why the deployment's numbers are not fresh, said in the header
        (``reading.stale_text``)."""
        return reading.stale_text(self.cycle.failure, self.cycle.reading)

    # -- start, alerts, fleet ---------------------------------------------------------
    async def adopt(self, ctx: ConsoleContext) -> bool:
        """A staged start's full context takes over. True when it polls with a poller of
        its own (the validated settings differ): the staged one is closed."""
        staged, self.ctx, self.staged = self.staged, ctx, None
        self._watch_operations(ctx)
        if staged is None or ctx.poller is staged.poller:
            return False
        await staged.poller.aclose()
        return True

    def started(self) -> None:
        """The full context is here: the ledger's unsettled pods (not on a wall) and the
        plots' history from Prometheus (when there is one)."""
        if not self.wall:
            self.jobs.spawn(self.check_ledger(), "ledger")
        if self.poller.prometheus_url:
            self.jobs.spawn(self.backfill(), "backfill")

    async def check_ledger(self) -> None:
        """Pods an interrupted ``up`` (or console) may have left billing are an alert from
        the first screen on, until ``pod-console down`` or ``f`` settles them."""
        from console.config.config_file import ledger_path
        from console.operations.ledger import Ledger, in_progress

        assert self.ctx is not None
        state_dir = self.ctx.settings.state_dir
        entries = await self._run_blocking(Ledger(ledger_path(state_dir)).open_entries)
        busy = await self._run_blocking(in_progress, state_dir)
        if entries and busy is not None:
            # a cron up bringing its pod up: not a leftover, and f would be refused anyway
            self._note(f"pod request(s) in progress ({busy}): not leftovers", "dim")
        elif entries:
            names = ", ".join(e.pod_id or e.name or "?" for e in entries[:3])
            self.failures["ledger"] = Condition(
                "ledger", "crit", f"{len(entries)} pod request(s) never settled",
                f"{names} may be billing: pod-console down (or f) terminates them")
            self.refresh_now()

    async def backfill(self) -> int:
        """The plots' history from Prometheus, once: a console (a wall's browser tab)
        that just started shows the last hour, not the seconds it has polled."""
        poller = self.poller
        if not poller.prometheus_url:
            return 0
        n = await poller.backfill(step_s=self.pacing.backfill_step_s)
        if n:
            self._note(f"plots filled from Prometheus ({n} points)", "dim")
            self._on_change("backfill")
        return n

    def acknowledge(self, who: str, key: str | None = None) -> list[str]:
        """Every firing alert marked as seen by ``who`` (``key``: that one, with the
        alerts under it); their titles. Every other session on this state dir shows the
        acknowledgement from its next poll."""
        done = self.alerts.acknowledge(who, self.now(), key)
        self.delivery.acknowledged(done, who)
        return [a.title for a in done]

    async def slot_logs(self, slot: str, lines: int = 200) -> list[str]:
        """A slot's recent log lines through the agent, or one line that says why not."""
        agent = self.ctx.agent if self.ctx is not None else None
        if agent is None or not agent.configured:
            return [f"(no agent connection: {'wall mode' if self.wall else 'not configured'})"]
        from pod_agent.requests import LogsRequest

        try:
            r = await agent.request(LogsRequest(slot=slot, lines=lines))
        except Exception as exc:  # the panel shows why, it never crashes
            return [printable(f"(could not fetch logs: {exc})")]
        got = r.final.get("lines", []) if r.ok and r.final else [r.message]
        # a slot's own output: whatever it printed (colours, titles, clipboard writes)
        # is drawn as text only
        return [printable(line) for line in (got if isinstance(got, list) else [got])]

    def want_fleet(self) -> None:
        """Read every context's pod now (none while a cycle runs: polls never overlap)."""
        if not self.fleet_polling.busy and self.ctx is not None:
            self.jobs.spawn(self.poll_fleet(), "fleet")

    async def poll_fleet(self) -> FleetSnapshot | None:
        if self.ctx is None:
            return self.fleet
        return await self.fleet_polling.poll(self.ctx.config, self.pacing.fleet_timeout_s)

    @property
    def fleet(self) -> FleetSnapshot | None:
        return self.fleet_polling.fleet

    @property
    def recorder(self) -> Recorder | None:
        """The recording's file writer, once the first poll started it."""
        return self.recording.recorder

    # -- jobs beside the poll, and the end ------------------------------------------------
    async def settle(self) -> None:
        """Wait for the jobs started beside the poll (default spawner only)."""
        await self.jobs.settle()

    async def aclose(self) -> None:
        self.jobs.cancel()
        await self.delivery.aclose()
        await self._run_blocking(self.recording.close)
        await self.cycle.close_poller()
        await self.fleet_polling.aclose()
        for fn in self.ctx.on_exit if self.ctx is not None else ():
            r = fn()
            if asyncio.iscoroutine(r):
                await r


def _is_session_like(s: Session) -> SessionLike:
    return s  # mypy: the live session is what the app drives
