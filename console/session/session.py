"""The console's time, without Textual: one poll at a time, every source at its cadence,
and what the screens show built from one poll.

A :class:`Session` is what the console (``watch``), the wall and each browser session of
the web wall (a ``wall`` process of its own) drive: the app's timer calls
:meth:`Session.tick` every refresh and renders :meth:`Session.state` after each poll;
``tests/session`` drives the same object on an injected clock, with no terminal.

The refresh rate has one owner, here. ``+``/``-`` change it (:meth:`step_refresh`), and
what follows from it — the history's length, the request and pod timeouts, the backfill
step, the webhook's deadline, the fleet's cadence — is derived from it where it is used,
never copied at start.

How old a number may be (issue 27, item 3). The slots are polled every refresh. The pod
(the provider's status and cost, the agent's GPUs, P2P and stop plan) is read every
``POD_POLL_S``: RunPod allows about a request a second, and the agent answers through an
SSH command each time. Where the pod serves its GPUs over HTTP (``gpu_metrics_url``, the
agent's exporter sampling every second), that endpoint is read at every poll too
(``gpu_line``): the GPU line is as young as the slots. Where it is not (the agent alone,
or Prometheus, which holds a GPU sample only as often as it scrapes), the header and the
GPU line show their age beside them once it passes one refresh + 0.5 s
(``ConsoleState.ages``). No number on screen is older than that without saying how old it
is.

Every session judges its own polls, but what the alerts tell the world is shared by every
session on the state dir (``shared_alerts.py``): the webhook hears of an alert once
however many consoles, walls and browser tabs see it, and an acknowledgement made in one
is shown in all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from console.config import defaults
from console.model import fmt, startup
from console.model.alerts import Alert, AlertBook
from console.model.conditions import Condition
from console.model.gateway import GatewaySnapshot, on_the_pod
from console.model.gateway import conditions as gateway_conditions
from console.model.gpu_faults import FaultBook, gpu_marks
from console.model.history import History
from console.model.pod_run import PodRun
from console.model.pod_stop import (
    PROBE_WAITS_FOR_IDLE,
    PROBE_WAITS_FOR_POD,
    PROBE_WAITS_FOR_TRAFFIC,
    PlannedStop,
    probe_hold,
    probe_hold_unplanned,
)
from console.model.printable import printable
from console.model.snapshot import DeploymentSnapshot, PodSnapshot
from console.model.stall import StallWatch
from console.session import gateway_polling, gpu_line
from console.session.clock import Clock, WallSteps, clock_of
from console.session.delivery import AlertDelivery
from console.session.fleet_polling import FleetPolling
from console.session.gateway_polling import GatewayPolling
from console.session.gpu_history import record_gpus
from console.session.intents import OperationIntents
from console.session.judging import Judged, judge
from console.session.pod_reads import POD_POLL_S as POD_POLL_S
from console.session.pod_reads import STARTING_POD_POLL_S as STARTING_POD_POLL_S
from console.session.pod_reads import PodReads, shifted
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
    from console.session.fleet import FleetSnapshot
    from console.session.record.store import Recorder
    from console.sources.collect.poller import DeploymentPoller

REFRESH_STEPS = (1.0, 2.0, 5.0, 10.0, 30.0)
"""What + and - step through (the settings' refresh_s is where it starts)."""
FRESH_SLACK_S = 0.5
"""A number on screen may be one refresh + this old before its age is shown beside it."""
WALL_REFRESH_GAP_S = 1.0
"""On a wall, a poll asked for (ctrl+r) comes no sooner than this after the last one."""

RunBlocking = Callable[..., Awaitable[Any]]
"""How blocking work (a file read, an fsync) runs off the loop: ``asyncio.to_thread``."""
Spawn = Callable[[Coroutine[Any, Any, Any], str], object]
"""How a job runs beside the poll: (coroutine, group). The app passes its workers."""
Note = Callable[[str, str], None]
"""A line for the action log: (text, style)."""


def next_refresh(current: float, direction: int) -> float:
    """The step after ``current`` (``direction`` > 0: faster, a shorter interval)."""
    if direction > 0:
        return max([x for x in REFRESH_STEPS if x < current - 1e-9] or [REFRESH_STEPS[0]])
    return min([x for x in REFRESH_STEPS if x > current + 1e-9] or [REFRESH_STEPS[-1]])


def stale_header(snap: DeploymentSnapshot, stop: PlannedStop | None) -> str | None:
    """The header's STALE: only when no slot's numbers are fresh (the pod's data), never
    for a pod stopped on purpose (its header says "stopped at …")."""
    stale = [s.stale_since for s in snap.slots if s.stale_since is not None]
    if stop is not None or not stale or len(stale) < len(snap.slots):
        return None
    return f"STALE since {fmt.clock(min(stale))}"


def gpu_age(pod: PodSnapshot, read_age: float, read_at: float) -> float | None:
    """How old the GPU line's numbers are: since the agent sampled them (its clock, put
    on ours by the stop plan's skew), never younger than the pod reading that brought
    them; None when there is no GPU line. ``read_age``: the pod reading's age
    (monotonic); ``read_at``: when it was read (wall clock), against which the agent's
    sample time is told (a step of our wall clock since then ages nothing)."""
    report = pod.gpus
    if report is None or not report.gpus:
        return None
    if report.sampled_at is None:
        return read_age
    plan = pod.stop_plan
    skew = plan.skew_s if plan is not None and plan.skew_s is not None else 0.0
    return max(read_age, read_age + read_at - (report.sampled_at - skew))


@dataclass(frozen=True)
class _Reading:
    """What one poll brought, judged; replaced whole at the end of each poll."""

    snapshot: DeploymentSnapshot | None = None
    pod: PodSnapshot | None = None
    at: float | None = None
    pod_read_at: float | None = None
    spend_month: float | None = None
    stop: PlannedStop | None = None
    gpus_at: float | None = None
    """When the GPU line's numbers were read, when they came from the pod's GPU endpoint
    read at this poll or a recent one (``gpu_line``); None: they are the pod reading's."""
    pod_read_m: float | None = None
    """``pod_read_at`` on the monotonic clock (what its age is counted on)."""
    gpus_m: float | None = None
    """``gpus_at`` on the monotonic clock."""


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
        self._clock = clock_of(clock) if clock is not None else None
        self._ctx_clock: tuple[object, Clock] | None = None
        """The context's clock as read last (``clock``), and its two readings."""
        self.wall_steps = WallSteps()
        """Steps of the wall clock seen between polls (told once each, never judged)."""
        self._run_blocking = run_blocking
        self._spawn_job = spawn
        self._note = note or (lambda text, style: None)
        self._on_change = on_change or (lambda kind: None)
        self._fleet_wanted = fleet_wanted or (lambda: False)
        self._waiting = frozenset(waiting_operations)
        self._chosen_refresh: float | None = None
        """What +/- chose; None: the settings' (the boot plan's until they load)."""
        self.alerts = AlertBook()
        self.faults = FaultBook()
        """GPU hardware faults per pod and GPU, until seen healthy or their pod is gone."""
        self.failures: dict[str, Condition] = {}
        """Conditions the session itself found (an unsettled ledger), judged with the rest."""
        self.intents = OperationIntents(self.mono)
        """Operations that take slots down on purpose hold their alerts (``intents.py``)."""
        self.runs = RunTracking(self.alerts, self.faults, self._note)
        """The pod's run, and the operations that explain it (``run_tracking.py``)."""
        self.stalls = StallWatch()
        """Slots with requests running and no token for ``alerts.stall_after_s``: only
        polls a while apart tell it, so the session (which sees every poll) owns it."""
        self.polls = 0
        self.first_data_at: float | None = None
        self.poll_failure: tuple[float, str] | None = None
        """When the last poll failed and why; None once one succeeds (shown on screen)."""
        self._reading = _Reading()
        self.pod_reads = PodReads()
        """What is kept of the pod between its readings (``pod_reads.py``)."""
        self._probe_pause_said = False
        """Whether the log has said that the probes wait on an idle pod (said once)."""
        self._polling = False
        self._poll_started_at: float | None = None
        self.spend = SessionSpend(run_blocking, self._note)
        self._tasks: set[asyncio.Task[Any]] = set()
        self.delivery = AlertDelivery(self, run_blocking=run_blocking, spawn=self._spawn,
                                      note=self._note, on_change=self._on_change)
        """Where the judged alerts go (shared book, outbox, Alertmanager, audit)."""
        self.gateway: GatewaySnapshot | None = None
        """The gateway's last reading (``gateway_url`` with ``gateway.watch``), else None."""
        self.gateway_polling = GatewayPolling()
        self.recording = SessionRecording(self, self._note)
        self.fleet_polling = FleetPolling(run_blocking=run_blocking, clock=self.now,
                                          note=self._note, on_change=self._on_change)
        if self.ctx is not None:
            self._watch_operations(self.ctx)

    # -- what it runs on -------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self.ctx is not None

    @property
    def clock(self) -> Clock:
        """What this session runs on (see the ``clock`` argument)."""
        if self._clock is not None:
            return self._clock
        if self.ctx is None:
            return clock_of(None)
        src = self.ctx.clock
        if self._ctx_clock is None or self._ctx_clock[0] is not src:
            self._ctx_clock = (src, clock_of(src))
        return self._ctx_clock[1]

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
        r = self.refresh_s
        return base if base.refresh_s == r else replace(base, refresh_s=r)

    # -- the refresh rate and what follows from it -------------------------------------
    @property
    def refresh_s(self) -> float:
        """Seconds between polls: what +/- chose, else the settings'."""
        if self._chosen_refresh is not None:
            return self._chosen_refresh
        if self.ctx is not None:
            return self.ctx.settings.refresh_s
        return self._start().view.refresh_s

    @property
    def request_timeout_s(self) -> float:
        return defaults.request_timeout_s(self.refresh_s)

    @property
    def pod_timeout_s(self) -> float:
        return max(2.0, self.request_timeout_s * 2)

    @property
    def webhook_timeout_s(self) -> float:
        return min(5.0, self.refresh_s * 4)

    @property
    def backfill_step_s(self) -> float:
        """Prometheus range queries: a point a refresh, at most 240 over the window."""
        return max(self.refresh_s, self.history.window_s / 240)

    @property
    def fleet_timeout_s(self) -> float:
        return 2 * max(5.0, self.refresh_s * 2)

    def step_refresh(self, direction: int) -> float | None:
        """+ (``direction`` > 0) or -: the new refresh, or None when it stays."""
        current = self.refresh_s
        new = next_refresh(current, direction)
        if new == current:
            return None
        self._chosen_refresh = new
        self._pace()
        return new

    def _pace(self) -> None:
        """What follows from the refresh, applied to the sources in use now — again
        before every poll, since a fallback or a finished start may have replaced them."""
        self.history.fit_step(self.refresh_s)
        self.poller.timeout_s = self.request_timeout_s
        self.poller.probe_hold = self._probe_hold
        if self.ctx is not None and self.ctx.pod_collector is not None:
            self.ctx.pod_collector.timeout_s = self.pod_timeout_s

    def _probe_hold(self) -> str | None:
        """Why the completion probe waits (``pod_stop.probe_hold``), read by the poller
        when one is due. Where no stop plan is served (no pod source, an agent out of
        reach, no exporter) the slots' own request counters say whether anyone but this
        session uses the pod. The log says it the first time the probes wait for an idle
        pod — once: a pod with sparse traffic goes idle and busy between the agent's
        looks all day."""
        ctx = self.ctx
        if ctx is None:
            held: str | None = PROBE_WAITS_FOR_POD
        else:
            in_use = self._slots_in_use()
            held = (probe_hold(self.pod, in_use) if ctx.pod_collector is not None
                    else probe_hold_unplanned(in_use))
        if held in (PROBE_WAITS_FOR_IDLE, PROBE_WAITS_FOR_TRAFFIC) \
                and not self._probe_pause_said:
            self._probe_pause_said = True
            self._note("completion probes wait while the pod is idle: a probe is a request, "
                       "and would keep the pod running", "dim")
        return held

    def _slots_in_use(self) -> bool | None:
        """Whether others' requests run on the slots (``DeploymentPoller.in_use``), this
        session's own probes over the figures' window and two refreshes discounted."""
        return self.poller.in_use(2 * self.refresh_s)

    def _watch_operations(self, ctx: ConsoleContext) -> None:
        self.intents.watch(ctx, lambda: [t.slot for t in self.view.targets])

    # -- the tick and the poll -------------------------------------------------------
    @property
    def polling(self) -> bool:
        return self._polling

    def tick(self) -> None:
        """The timer's beat: the poll (none while one runs: polls never overlap) and,
        while someone looks at it, the fleet (its own guard: a slow fleet never holds the
        slots)."""
        if not self._polling:
            self._spawn(self.poll(), "poll")
        if self._fleet_wanted():
            self.want_fleet()

    def refresh_now(self) -> None:
        """Every source now, the pod's too (after an operation, once the context is in,
        an unsettled ledger found)."""
        self.pod_reads.wanted = True
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
        last = self._poll_started_at
        if last is None or not 0.0 <= self.mono() - last < WALL_REFRESH_GAP_S:
            self.tick()

    async def poll(self) -> bool:
        """One poll of every source due; False when one was already running (nothing
        done) or it failed (said in the log and on every screen, and the next tick
        polls again)."""
        if self._polling:
            return False
        self._polling = True
        self._poll_started_at = self.mono()
        ok = False
        try:
            await self._poll()
            ok = True
        except Exception as exc:  # whatever a source did: shown, never a silent stop
            reason = f"{type(exc).__name__}: {exc}"[:200]
            self.poll_failure = (self.now(), reason)
            self._note(f"poll failed: {reason}", "crit")
        finally:
            self._polling = False
        self._on_change("poll")
        return ok

    async def _poll(self) -> None:
        self._pace()
        ctx = self.ctx
        started, started_m = self.now(), self.mono()
        # told at the poll's start: whatever this poll reads is stamped after the step
        self._wall_step(started, started_m)
        pods = ctx.pod_collector if ctx is not None else None
        read_pod = pods is not None and self.pod_reads.due(started_m)
        raw = self.pod_reads.raw
        if pods is not None and raw is not None and raw.pod_id != pods.pod_id:
            read_pod = True  # a new pod (a fallback): nothing of the old one is shown
        gw_job = (self.gateway_polling.poll(ctx, self.poller.client, started, self.run)
                  if ctx is not None and gateway_polling.wanted(ctx) else None)
        gw_task = asyncio.ensure_future(gw_job) if gw_job is not None else None
        line_src = gpu_line.fast_source(pods.gpu_metrics) if pods is not None else None
        line_task = asyncio.ensure_future(gpu_line.read(
            line_src, pods.pod_id, started, self.request_timeout_s)) \
            if line_src is not None and pods is not None else None
        try:
            if pods is not None and read_pod:
                self.pod_reads.read(started_m)
                snapshot, raw = await asyncio.gather(self.poller.poll(), pods.poll())
            else:
                snapshot = await self.poller.poll()
            if gw_task is not None:
                self.gateway = await gw_task
            line = await line_task if line_task is not None else None
        finally:  # a failed poll leaves nothing running behind it
            for task in (gw_task, line_task):
                if task is not None and not task.done():
                    task.cancel()
        if line is not None:
            self.pod_reads.gpu_line, self.pod_reads.gpu_line_m = line, started_m
        now, mono = self.now(), self.mono()
        pod_read_at = started if read_pod else self._reading.pod_read_at
        pod_read_m = started_m if read_pod else self._reading.pod_read_m
        reads = self.pod_reads
        shown = gpu_line.in_use(reads.gpu_line, raw, pod_read_at) if raw is not None else None
        pod_now = gpu_line.merged(raw, shown) if raw is not None else None
        gpus_read = pod_now is not None and (read_pod or (line is not None and shown is line))
        if read_pod and raw is not None:
            self._say_phases(self.pod_reads.raw, raw)
            if ctx is not None:
                await self.spend.observe(ctx.settings.spend_path, self.wall, raw, now)
            if not raw.agent_error and raw.stop_plan is not None:
                self.pod_reads.agent_seen = raw
            if ctx is not None:
                await self.runs.read_operations(ctx, self._run_blocking, now)
        if gpus_read and pod_now is not None:
            record_gpus(self.history, pod_now.gpus, now)
        # from here to the end nothing awaits: the reading, the alerts and the counters
        # change together, so a state() built at any moment is of one poll
        raised: list[Alert] = []
        cleared: list[Alert] = []
        if ctx is None:  # a staged start: the slots only, no pod and no alerts yet
            judged = Judged(None, (), None)
        else:
            self.stalls.observe(snapshot.slots, now, ctx.settings.alerts.stall_after_s,
                                mono, slack=self.refresh_s / 2)
            ended_run = self.runs.advance(snapshot, pod_now, self.pod_reads.agent_seen, now)
            gw_conds = gateway_conditions(self.gateway, snapshot, ctx.settings.gateway,
                                          ctx.settings.alerts)
            stalls = self.stalls.conditions()
            run = self.run
            planned = run is not None and run.planned
            if planned or gateway_polling.counts_the_stop(self.run, self.gateway, now,
                                                           ctx.settings.window_s):
                # a stop somebody meant: the slots' requests and the gateway's routes to
                # them stop with the pod; its one event says so
                ours = {c.key for c in on_the_pod(gw_conds, self.gateway, snapshot)}
                gw_conds = [c for c in gw_conds if c.key not in ours]
            if planned:
                stalls = []
            judged = judge(snapshot, pod_now, self.spend.book, ctx.profile,
                           ctx.settings, now,
                           [*self.failures.values(), *stalls, *gw_conds],
                           self.faults, self.pod_reads.agent_seen, self.run)
            # what an operation takes down on purpose is not an outage (``inhibit``)
            judged = replace(judged, conditions=tuple(self.intents.inhibits.apply(
                judged.conditions, snapshot, self.gateway, mono)))
            if ended_run:
                judged = replace(judged, ended={**ended_run, **judged.ended})
            raised, cleared = self.alerts.update(judged.conditions, now, judged.ended,
                                                 mono=mono)
        if read_pod:
            self.pod_reads.raw = raw
        self._reading = _Reading(snapshot, judged.pod, now, pod_read_at,
                                 judged.spend_month, judged.stop,
                                 shown.read_at if shown is not None else None,
                                 pod_read_m, reads.gpu_line_m if shown is not None else None)
        self.polls += 1
        self.poll_failure = None
        if self.first_data_at is None and any(s.figures for s in snapshot.slots):
            self.first_data_at = now
        self._tell(raised, cleared)
        self.recording.poll(pod_now if gpus_read else None)

    def _wall_step(self, now: float, mono: float) -> None:
        """A step of the wall clock since the last poll (more than a refresh off the
        monotonic clock, either way): said once, in the log and the recording. Nothing
        is decided on it: every duration is monotonic."""
        step = self.wall_steps.observe(now, mono, self.refresh_s)
        if step is None:
            return
        # the wall times this session holds to count on from (the stop plan's countdown
        # and idle count, the reading's and the GPU line's times) move with the clock:
        # the seconds since them stay what they were
        by = step.by_s
        self.pod_reads.shift(by)
        r = self._reading
        self._reading = replace(
            r, pod=shifted(r.pod, by),
            pod_read_at=r.pod_read_at + by if r.pod_read_at is not None else None,
            gpus_at=r.gpus_at + by if r.gpus_at is not None else None)
        self.history.shift(by)  # the plots: their last hour is the monotonic one
        self.gateway_polling.shift(by)
        shift = getattr(self.poller, "shift", None)  # (a test's fake source has none)
        if shift is not None:
            shift(by)
        self._note(step.text(), "warn")
        from console.session.record.tape import Marker

        self.recording.mark(Marker(now, "clock", step.text(), f"clock:{step.by_s:+.0f}"))

    def _say_phases(self, before: PodSnapshot | None, after: PodSnapshot) -> None:
        """Each start-up phase the agent lists, in the action log as it ends: one shorter
        than a reading's interval never shows in the cell, and is still said."""
        was = before.agent_slots if before is not None and before.pod_id == after.pod_id \
            else None
        for slot, st in after.agent_slots.items():
            for line in startup.phase_lines(slot, was.get(slot) if was else None, st):
                self._note(line, "dim")

    @property
    def run(self) -> PodRun | None:
        """The pod's run after the last poll (``run_tracking.py``)."""
        return self.runs.run

    def _tell(self, raised: list[Alert], cleared: list[Alert]) -> None:
        """Alert changes: the log, the audit (hardware faults) and the webhook."""
        for a in raised:
            self._note(f"ALERT {a.title}" + (f" — {d}" if (d := a.description()) else ""),
                       "crit" if a.severity == "crit" else "warn")
        for a in cleared:
            if a.ended is not None:  # nothing was repaired: it ended with its pod
                self._note(f"{a.ended}: {a.title}", "warn")
            else:
                self._note(f"cleared: {a.title}", "ok")
        self.delivery.tell(raised, cleared)

    # -- what a screen shows ---------------------------------------------------------
    @property
    def snapshot(self) -> DeploymentSnapshot | None:
        return self._reading.snapshot

    @property
    def pod(self) -> PodSnapshot | None:
        return self._reading.pod

    def state(self) -> ConsoleState:
        """What every screen shows now: the last poll's reading, alerts and ages."""
        view = self.view
        r = self._reading
        now = self.now()
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
        return ConsoleState(view=view, ready=ctx is not None, now=now, operation=running,
                            snapshot=r.snapshot, pod=r.pod, alerts=tuple(self.alerts.sorted()),
                            stale=self.stale_text(), history=self.history, allowed=allowed,
                            gpus=gpus, utils=utils, states=states, thresholds=thresholds,
                            alert_history=tuple(self.alerts.history), fleet=self.fleet,
                            polled_at=r.at, ages=self.ages(now), spend_month=r.spend_month,
                            stop=r.stop, run=self.run, gpu_marks=marks,
                            stalled=dict(self.stalls.stalls),
                            phases=startup.phase_cells(
                                r.pod.agent_slots if r.pod is not None else None,
                                self.mono() - r.pod_read_m if r.pod_read_m is not None
                                else 0.0),
                            gateway=self.gateway, idle_source=(
                                ctx.settings.gateway.idle_source if ctx is not None
                                else "slots"),
                            active_window_s=(ctx.settings.gateway.active_window_s
                                             if ctx is not None else 3600.0),
                            stall_after_s=(ctx.settings.alerts.stall_after_s
                                           if ctx is not None else 30.0),
                            gateway_limits=ctx.settings.gateway if ctx is not None else None)

    def ages(self, now: float) -> dict[str, float]:
        """Ages of the pod fields (``pod``) and the GPU line (``gpus``) older than one
        refresh + 0.5 s: the screens print them beside those numbers. The GPU line is as
        old as its last read of the GPU endpoint, when it has one (``gpu_line``). Counted
        on the monotonic clock (``now``, the wall clock, is not read: kept for callers)."""
        r = self._reading
        pod, read, read_m = r.pod, r.pod_read_at, r.pod_read_m
        if pod is None or read is None or read_m is None:
            return {}
        mono = self.mono()
        bound = self.refresh_s + FRESH_SLACK_S
        age = max(0.0, mono - read_m)
        out = {"pod": age} if age > bound else {}
        line_m = r.gpus_m
        g = max(0.0, mono - line_m) if line_m is not None and pod.gpus is not None \
            and pod.gpus.gpus else gpu_age(pod, age, read)
        if g is not None and g > bound:
            out["gpus"] = g
        return out

    def stale_text(self) -> str | None:
        """Why the deployment's numbers are not fresh, said in the header: a failed poll,
        none yet, or every slot stale. One dead slot is its own row's STALE, not the
        header's; a pod stopped on purpose is "stopped at …", not STALE."""
        if self.poll_failure is not None:
            t, reason = self.poll_failure
            return f"POLL FAILED {fmt.clock(t)}: {reason}"
        snap = self._reading.snapshot
        if snap is None:
            return "waiting for first data…"
        return stale_header(snap, self._reading.stop)

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
            self._spawn(self.check_ledger(), "ledger")
        if self.poller.prometheus_url:
            self._spawn(self.backfill(), "backfill")

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
        n = await poller.backfill(step_s=self.backfill_step_s)
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
            self._spawn(self.poll_fleet(), "fleet")

    async def poll_fleet(self) -> FleetSnapshot | None:
        if self.ctx is None:
            return self.fleet
        return await self.fleet_polling.poll(self.ctx.config, self.fleet_timeout_s)

    @property
    def fleet(self) -> FleetSnapshot | None:
        return self.fleet_polling.fleet

    @property
    def recorder(self) -> Recorder | None:
        """The recording's file writer, once the first poll started it."""
        return self.recording.recorder

    # -- jobs beside the poll, and the end ------------------------------------------------
    def _spawn(self, job: Coroutine[Any, Any, Any], group: str) -> None:
        if self._spawn_job is not None:
            self._spawn_job(job, group)
            return
        task = asyncio.get_running_loop().create_task(job, name=group)
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self._note(f"{task.get_name()} failed: {type(exc).__name__}: {exc}"[:200],
                       "crit")

    async def settle(self) -> None:
        """Wait for the jobs started beside the poll (default spawner only)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.delivery.aclose()
        await self._run_blocking(self.recording.close)
        await self.poller.aclose()
        await self.fleet_polling.aclose()
        for fn in self.ctx.on_exit if self.ctx is not None else ():
            r = fn()
            if asyncio.iscoroutine(r):
                await r


def _is_session_like(s: Session) -> SessionLike:
    return s  # mypy: the live session is what the app drives
