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
import contextlib
import math
import time
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
from console.model.inhibit import InhibitBook, Intent
from console.model.pod_run import Operation, PodRun, RunReading, advance
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
from console.session import gpu_line
from console.session.audit_tail import AuditTail
from console.session.clock import Clock, WallSteps, clock_of
from console.session.gpu_history import record_gpus
from console.session.gpu_line import GpuLine
from console.session.judging import Judged, day_zone, judge
from console.session.spend import SpendBook
from console.session.view import (
    ConsoleContext,
    ConsoleState,
    ConsoleView,
    StagedStart,
    slot_columns,
    view_of,
)

if TYPE_CHECKING:
    from console.session.alertmanager import Alertmanager, Where
    from console.session.fleet import FleetCollector, FleetSnapshot
    from console.session.outbox import Outbox
    from console.session.record.store import Recorder, SharedTurn
    from console.session.shared_alerts import SharedAlerts
    from console.sources.collect.gateway import GatewayCollector
    from console.sources.collect.poller import DeploymentPoller

REFRESH_STEPS = (1.0, 2.0, 5.0, 10.0, 30.0)
"""What + and - step through (the settings' refresh_s is where it starts)."""
POD_POLL_S = 10.0
"""RunPod's v2 API allows ~60 requests/minute: pod state every 10 s is plenty."""
STARTING_POD_POLL_S = 4.0
"""While a slot starts the agent's phases change within seconds: the pod is read this
often then (the phase cell ran ~10 s behind the agent)."""
FRESH_SLACK_S = 0.5
"""A number on screen may be one refresh + this old before its age is shown beside it."""
WALL_REFRESH_GAP_S = 1.0
"""On a wall, a poll asked for (ctrl+r) comes no sooner than this after the last one."""
RUN_ALERTS = ("xid:", "ecc:", "remapfail:", "remap:", "throttle:", "heat:", "stray:")
"""Alert keys of what belongs to one run of the pod, its GPUs' state: they end with it
(``Session._advance_run``). Its stop event has no hold: it clears at the first reading
of the next run."""
AM_RESEND_FLOOR_S = 15.0
"""A firing alert sent to Alertmanager ends 4 x max(refresh, this) ahead: a console that
stops sending lets it resolve there within a minute, a slow poll does not."""
WATCHDOG_SAVE_S = 30.0
"""How often the heartbeat's last send is written for ``status --json``."""
GPU_FAULTS = ("xid:", "ecc:", "remapfail:")
"""Alert keys of hardware faults: facts about the pod that the audit log keeps."""

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


def _shifted(pod: PodSnapshot | None, by: float) -> PodSnapshot | None:
    """``pod`` with its stop plan's reading time moved ``by`` seconds (a step of our
    wall clock): its countdown and idle count go on from where they were."""
    if pod is None or pod.stop_plan is None:
        return pod
    plan = pod.stop_plan
    return replace(pod, stop_plan=replace(plan, read_at=plan.read_at + by))


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
        self._agent_seen: PodSnapshot | None = None
        """The last pod reading in which the agent answered (a stop is known from it
        once the agent has gone with its pod)."""
        self.failures: dict[str, Condition] = {}
        """Conditions the session itself found (an unsettled ledger), judged with the rest."""
        self.inhibits = InhibitBook()
        """Operations that take slots down on purpose (``R``, ``b``, a resume, a fallback)
        hold those slots' alerts until they are up again (``model/inhibit.py``)."""
        self._intent_of: dict[str, Intent] = {}
        self.run: PodRun | None = None
        """The pod's run (``pod_run``): advanced at every poll; what belongs to a run
        (acknowledgements, pending timers, GPU faults) ends with it."""
        self._audit_tail: AuditTail | None = None
        self._ops: tuple[Operation, ...] = ()
        """The console's recent machine operations (the audit log), for the run."""
        self.stalls = StallWatch()
        """Slots with requests running and no token for ``alerts.stall_after_s``: only
        polls a while apart tell it, so the session (which sees every poll) owns it."""
        self.polls = 0
        self.first_data_at: float | None = None
        self.poll_failure: tuple[float, str] | None = None
        """When the last poll failed and why; None once one succeeds (shown on screen)."""
        self.fleet: FleetSnapshot | None = None
        self._reading = _Reading()
        self._raw_pod: PodSnapshot | None = None
        self._gpu_line: GpuLine | None = None
        """The last good read of the pod's GPU endpoint (``gpu_line``)."""
        self._pod_polled_at: float | None = None
        """When the pod was last read (monotonic)."""
        self._gpu_line_m: float | None = None
        """When ``_gpu_line`` was read (monotonic)."""
        self._probe_pause_said = False
        """Whether the log has said that the probes wait on an idle pod (said once)."""
        self._pod_wanted = True
        self._polling = False
        self._poll_started_at: float | None = None
        self._fleet_busy = False
        self._fleet_collector: FleetCollector | None = None
        self._book: SpendBook | None = None
        self._no_book = SpendBook(None)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._shared: SharedAlerts | None = None
        self._share_lock = asyncio.Lock()
        self._share_failed = False
        self._acked: list[Alert] = []
        """Acknowledged here, not yet in the shared book."""
        self._unposted: set[str] = set()
        """Alerts whose post this session claimed and could not deliver."""
        self._outbox: Outbox | None = None
        self._draining = False
        self._drain_error: str | None = None
        self._am: Alertmanager | None = None
        self._am_busy = False
        self._am_error: str | None = None
        self._am_resolved: list[tuple[Alert, float]] = []
        self._am_restarting: dict[str, tuple[str, float]] = {}
        """Slot → (operation, since): the ``SlotRestarting`` alerts Alertmanager has."""
        """Cleared here, not yet told to Alertmanager: (alert, when it cleared)."""
        self._am_silence: list[tuple[Alert, str]] = []
        """Acknowledged here, no silence made yet: (alert, who)."""
        self._am_acks_at = -math.inf
        self._am_started = time.time()
        self.watchdog_sent_at: float | None = None
        """When this session's heartbeat last reached Alertmanager (None: never)."""
        self._watchdog_saved_at = -math.inf
        self.gateway: GatewaySnapshot | None = None
        """The gateway's last reading (``gateway_url`` with ``gateway.watch``), else None."""
        self._gateway_collector: GatewayCollector | None = None
        self.recorder: Recorder | None = None
        """Every poll of this session into a file of its own (``record: true``)."""
        self._recorder_off = False
        self._turn: SharedTurn | None = None
        """Web wall tabs: whether this one is the tab that records (``SharedTurn``)."""
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
        if self._operation not in ctx.registry.watchers:
            ctx.registry.watchers.append(self._operation)

    def _operation(self, op_id: str, args: dict[str, Any], out: Any) -> None:
        """An operation starts or ends (the registry's watcher): one that takes slots
        down on purpose holds their alerts from its start until they are up again."""
        ctx = self.ctx
        spec = ctx.registry.specs.get(op_id) if ctx is not None else None
        if ctx is None or spec is None or not spec.takes_down:
            return
        if out is None:
            every = [t.slot for t in self.view.targets] or list(ctx.profile.slots)
            slots = {"slot": [str(args.get("slot") or "")],
                     "split": [str(k) for k in (args.get("set") or {})]}.get(
                         spec.takes_down, every)
            self._intent_of[op_id] = self.inhibits.begin(
                spec.title, [x for x in slots if x], spec.takes_down == "pod", self.mono())
        elif (intent := self._intent_of.pop(op_id, None)) is not None:
            self.inhibits.end(intent, bool(out.ok), self.mono())  # its clock: monotonic

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
        self._pod_wanted = True
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

    def _pod_due(self, mono: float) -> bool:
        last = self._pod_polled_at
        raw = self._raw_pod
        every = STARTING_POD_POLL_S if raw is not None and any(
            startup.starting(st) for st in raw.agent_slots.values()) else POD_POLL_S
        return self._pod_wanted or last is None or not 0.0 <= mono - last < every

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
            self._note(f"poll failed: {reason}", "bold red")
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
        read_pod = pods is not None and self._pod_due(started_m)
        raw = self._raw_pod
        if pods is not None and raw is not None and raw.pod_id != pods.pod_id:
            read_pod = True  # a new pod (a fallback): nothing of the old one is shown
        gw_job = self._poll_gateway(started) if self._gateway_wanted() else None
        gw_task = asyncio.ensure_future(gw_job) if gw_job is not None else None
        line_src = gpu_line.fast_source(pods.gpu_metrics) if pods is not None else None
        line_task = asyncio.ensure_future(gpu_line.read(
            line_src, pods.pod_id, started, self.request_timeout_s)) \
            if line_src is not None and pods is not None else None
        try:
            if pods is not None and read_pod:
                self._pod_wanted, self._pod_polled_at = False, started_m
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
            self._gpu_line, self._gpu_line_m = line, started_m
        now, mono = self.now(), self.mono()
        pod_read_at = started if read_pod else self._reading.pod_read_at
        pod_read_m = started_m if read_pod else self._reading.pod_read_m
        shown = gpu_line.in_use(self._gpu_line, raw, pod_read_at) if raw is not None else None
        pod_now = gpu_line.merged(raw, shown) if raw is not None else None
        gpus_read = pod_now is not None and (read_pod or (line is not None and shown is line))
        if read_pod and raw is not None:
            self._say_phases(self._raw_pod, raw)
            await self._observe_spend(raw, now)
            if not raw.agent_error and raw.stop_plan is not None:
                self._agent_seen = raw
            await self._read_operations(now)
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
            ended_run = self._advance_run(snapshot, pod_now, now)
            gw_conds = gateway_conditions(self.gateway, snapshot, ctx.settings.gateway,
                                          ctx.settings.alerts)
            stalls = self.stalls.conditions()
            run = self.run
            planned = run is not None and run.planned
            if planned or self._gateway_counts_the_stop(now, ctx.settings.window_s):
                # a stop somebody meant: the slots' requests and the gateway's routes to
                # them stop with the pod; its one event says so
                ours = {c.key for c in on_the_pod(gw_conds, self.gateway, snapshot)}
                gw_conds = [c for c in gw_conds if c.key not in ours]
            if planned:
                stalls = []
            judged = judge(snapshot, pod_now, self._book or self._no_book, ctx.profile,
                           ctx.settings, now,
                           [*self.failures.values(), *stalls, *gw_conds],
                           self.faults, self._agent_seen, self.run)
            # what an operation takes down on purpose is not an outage (``inhibit``)
            judged = replace(judged, conditions=tuple(self.inhibits.apply(
                judged.conditions, snapshot, self.gateway, mono)))
            if ended_run:
                judged = replace(judged, ended={**ended_run, **judged.ended})
            raised, cleared = self.alerts.update(judged.conditions, now, judged.ended,
                                                 mono=mono)
        if read_pod:
            self._raw_pod = raw
        self._reading = _Reading(snapshot, judged.pod, now, pod_read_at,
                                 judged.spend_month, judged.stop,
                                 shown.read_at if shown is not None else None,
                                 pod_read_m, self._gpu_line_m if shown is not None else None)
        self.polls += 1
        self.poll_failure = None
        if self.first_data_at is None and any(s.figures for s in snapshot.slots):
            self.first_data_at = now
        self._tell(raised, cleared)
        self._record(pod_now if gpus_read else None)

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
        self._raw_pod = _shifted(self._raw_pod, by)
        self._agent_seen = _shifted(self._agent_seen, by)
        r = self._reading
        self._reading = replace(
            r, pod=_shifted(r.pod, by),
            pod_read_at=r.pod_read_at + by if r.pod_read_at is not None else None,
            gpus_at=r.gpus_at + by if r.gpus_at is not None else None)
        if self._gpu_line is not None:
            self._gpu_line = replace(self._gpu_line, read_at=self._gpu_line.read_at + by)
        self.history.shift(by)  # the plots: their last hour is the monotonic one
        if self._gateway_collector is not None:
            self._gateway_collector.shift(by)
        shift = getattr(self.poller, "shift", None)  # (a test's fake source has none)
        if shift is not None:
            shift(by)
        self._note(step.text(), "yellow")
        if self.recorder is not None:
            from console.session.record.tape import Marker

            self.recorder.mark(Marker(now, "clock", step.text(), f"clock:{step.by_s:+.0f}"))

    def _say_phases(self, before: PodSnapshot | None, after: PodSnapshot) -> None:
        """Each start-up phase the agent lists, in the action log as it ends: one shorter
        than a reading's interval never shows in the cell, and is still said."""
        was = before.agent_slots if before is not None and before.pod_id == after.pod_id \
            else None
        for slot, st in after.agent_slots.items():
            for line in startup.phase_lines(slot, was.get(slot) if was else None, st):
                self._note(line, "dim")

    # -- the pod's run -------------------------------------------------------------------
    async def _read_operations(self, now: float) -> None:
        """The console's recent machine operations from the audit log (off the loop)."""
        ctx = self.ctx
        if ctx is None:
            return
        if self._audit_tail is None:
            self._audit_tail = AuditTail(getattr(ctx.registry.audit, "path", None))
        # an unreadable log explains nothing (``AuditTail.read``): the run goes on
        self._ops = await self._run_blocking(self._audit_tail.read, now)

    def _gateway_counts_the_stop(self, now: float, window_s: float) -> bool:
        """Whether the gateway's figures still count the planned stop that ended the
        last run: its rates are over a window (``window_s``), and the calls that failed
        while the pod was stopped on purpose stay in it for that long after the resume.
        They are the stop's, not the new run's."""
        run, gw = self.run, self.gateway
        prior = run.previous if run is not None else None
        if run is None or gw is None or prior is None or not prior.planned:
            return False
        began = run.began if run.began is not None else now
        return 0.0 <= now - began < (gw.window_s or window_s)

    def _advance_run(self, snapshot: DeploymentSnapshot, pod: PodSnapshot | None,
                     now: float) -> dict[str, str]:
        """The pod's run after this poll. When a run ended and another began, what
        belonged to the old one ends (issue 42): its GPU faults (alert key → why, for
        the alert book), its pending timers and its acknowledgements."""
        up = sum(1 for s in snapshot.slots if s.health == "up")
        prev = self.run
        self.run = run = advance(prev, RunReading(now, pod, self._agent_seen, self._ops, up))
        if prev is None or run is None or run.number == prev.number:
            return {}
        old = run.previous or prev
        why = (f"ended with run {old.number} of pod {old.pod_id}" if old.pod_id == run.pod_id
               else f"ended with pod {old.pod_id}")
        self.alerts.new_run(now, why)
        self._note(f"pod {run.pod_id}: a new run"
                   + (f" (the last {old.stop_text(fmt.clock(old.at)[:5] if old.at else '')})"
                      if old.ended else ""), "dim")
        # the old run's GPUs are over: said so at once, not held; the new run's own
        # readings raise what is true of it
        ended = {k: why for k in self.alerts.active if k.startswith(RUN_ALERTS)}
        if old.pod_id == run.pod_id:
            ended.update(self.faults.end_run(old.pod_id, now, why))
        return ended

    # -- the recording ------------------------------------------------------------------
    def _record(self, pod_read: PodSnapshot | None) -> None:
        """This poll to the recorder's queue (its thread writes it: never the loop)."""
        ctx = self.ctx
        if ctx is None or self._recorder_off or not ctx.settings.record:
            return
        from console.session.record.store import PollItem, SharedTurn, recordings_dir
        from console.sources.collect.http import relay_from_env

        if self._turn is None and self.wall and relay_from_env() is not None:
            # a web wall's tab: its slots come through the shared scrape relay, and one
            # tab records them for all (another takes over when that tab closes)
            self._turn = SharedTurn(recordings_dir(ctx.settings.state_dir) / "web-wall.lock")
        if self._turn is not None and not self._turn.mine():
            return
        try:
            rec = self.recorder or self._start_recorder(ctx)
            rec.poll(PollItem(self.state(), getattr(self.poller, "last_read", None), pod_read))
        except Exception as exc:  # the console goes on without its recording
            self._recorder_off = True
            self._note(f"recording off: {type(exc).__name__}: {exc}"[:200], "yellow")

    def _start_recorder(self, ctx: ConsoleContext) -> Recorder:
        from console.session.record.store import Recorder, recordings_dir
        from console.session.record.tape import Marker

        loop = asyncio.get_running_loop()
        s = ctx.settings

        def paused(why: str | None) -> None:  # the writer thread's news, onto the loop
            loop.call_soon_threadsafe(self._recording_paused, why)

        self.recorder = Recorder(
            recordings_dir(s.state_dir),
            {"profile": ctx.profile_name, "context": s.context, "wall": self.wall,
             "window_s": getattr(self.poller, "window_s", 300.0),
             "history_s": self.history.window_s,
             "refresh_s": self.refresh_s},
            keep_s=s.record_keep_days * 86400.0, max_bytes=int(s.record_max_mb * 1024 * 1024),
            clock=self.now, mono=self.mono, on_pause=paused)
        rec = self.recorder

        def audited(r: dict[str, Any]) -> None:  # the audit's thread: the queue is safe
            args = r.get("arguments")
            said = ", ".join(f"{k}={v}" for k, v in args.items()
                             if isinstance(v, (str, int, float)) and not isinstance(v, bool)
                             ) if isinstance(args, dict) else ""
            rec.mark(Marker(float(r.get("t") or self.now()), "operation",
                            printable(f"{r.get('action')} {r.get('result')}"
                                      + (f" ({said})" if said else ""), 200),
                            f"audit:{r.get('t')}:{r.get('action')}"))

        listeners = getattr(ctx.registry.audit, "listeners", None)
        if listeners is not None:
            listeners.append(audited)
        return rec

    def _recording_paused(self, why: str | None) -> None:
        if why is None:
            self.failures.pop("recording", None)
            self._note("recording resumed", "green")
        else:
            self.failures["recording"] = Condition(
                "recording", "warn", "recording paused",
                f"{why}: polls are not recorded until it can write again")
            self._note(f"recording paused: {why}", "yellow")

    def _gateway_wanted(self) -> bool:
        settings = self.ctx.settings if self.ctx is not None else None
        return bool(settings is not None and settings.gateway_url and settings.gateway.watch)

    async def _poll_gateway(self, now: float) -> GatewaySnapshot | None:
        """The gateway's poll, beside the slots' (its requests have the same timeout)."""
        from console.sources.collect.gateway import GatewayCollector
        from console.sources.collect.promql import PromClient

        ctx = self.ctx
        assert ctx is not None
        st = ctx.settings
        col = self._gateway_collector
        if col is None or col.url != (st.gateway_url or "").rstrip("/"):
            prom = (PromClient(st.prometheus_url, self.poller.client, st.request_timeout_s)
                    if st.prometheus_url and st.gateway.via == "prometheus" else None)
            col = self._gateway_collector = GatewayCollector(
                st.gateway_url or "", st.gateway, st.window_s, st.request_timeout_s,
                client=self.poller.client, zone=day_zone(ctx.profile), prom=prom,
                prom_selector=f",{st.gateway.prometheus_match}" if st.gateway.prometheus_match
                else "")
        return await col.poll(now)

    async def _observe_spend(self, pod: PodSnapshot, now: float) -> None:
        """A new pod reading into the spend book (read once, saved when due)."""
        if self.ctx is None:
            return
        if self._book is None:
            # a wall reads the book the consoles keep and writes nothing in the state dir
            self._book = await self._run_blocking(
                SpendBook, self.ctx.settings.spend_path, self.wall)
        book = self._book
        book.observe(pod, now)
        if book.due(now):
            try:
                await self._run_blocking(book.save, now)
            except OSError as exc:  # a full disk costs the morning's figure, not the poll
                book.postpone(now)  # tried again in a minute, said once a minute
                self._note(f"today's spend could not be saved: {exc}", "yellow")

    def _tell(self, raised: list[Alert], cleared: list[Alert]) -> None:
        """Alert changes: the log, the audit (hardware faults) and the webhook."""
        for a in raised:
            self._note(f"ALERT {a.title}" + (f" — {d}" if (d := a.description()) else ""),
                       "bold red" if a.severity == "crit" else "yellow")
        for a in cleared:
            if a.ended is not None:  # nothing was repaired: it ended with its pod
                self._note(f"{a.ended}: {a.title}", "yellow")
            else:
                self._note(f"cleared: {a.title}", "green")
        faults = [a for a in raised if a.key.startswith(GPU_FAULTS)]
        if faults and not self.wall:
            self._spawn(self._audit_faults(faults), "audit-gpu")
        if self.ctx is not None and (raised or cleared or self._acked or self.alerts.firing()):
            # beside the poll, never inside it: neither a slow disk nor a slow webhook
            # may hold the figures
            self._spawn(self._share(raised, cleared), "alerts")
        elif self.ctx is not None and self.ctx.settings.webhook_url and not self._draining:
            # entries left by a failed POST, a killed session or a webhook-less one
            self._spawn(self._drain(), "webhook")
        if self.ctx is not None and self.ctx.settings.alertmanager_url:
            now = self.now()
            self._am_resolved += [(a, now) for a in cleared]
            if not self._am_busy:  # (one in flight sends these at its end)
                self._spawn(self._to_alertmanager(), "alertmanager")

    async def _share(self, raised: list[Alert], cleared: list[Alert]) -> None:
        """This session's alert changes into the book every session on the state dir
        shares (``shared_alerts.py``); post to the webhook what no other session has, and
        show the acknowledgements made elsewhere. In the order the polls made them."""
        from console.session.outbox import Outbox
        from console.session.shared_alerts import SharedAlerts, SharedAlertsError, Synced

        assert self.ctx is not None
        url = self.ctx.settings.webhook_url
        async with self._share_lock:
            if self._shared is None:
                self._shared = SharedAlerts(self.ctx.settings.state_dir)
                self._outbox = Outbox(self.ctx.settings.state_dir)
            acked, self._acked = self._acked, []
            unposted, self._unposted = self._unposted, set()
            try:
                # every session, webhook or not, hands what it judged to the outbox
                # (``outbox.py``); only those with a webhook deliver it
                synced = await self._run_blocking(
                    self._shared.sync, self.now(), raised=raised, cleared=cleared,
                    firing=self.alerts.told(), acked=acked, unposted=unposted,
                    webhook=url is not None, outbox=self._outbox,
                    source=f"pod-console {self.view.profile_name}")
                self._share_failed = False
            except SharedAlertsError as exc:  # this session then posts on its own
                if not self._share_failed:
                    self._note(f"shared alert book not usable ({exc}): this session posts "
                               "its own alerts", "yellow")
                self._share_failed = True
                synced = Synced(tuple(raised), tuple(cleared))
                if url and (raised or cleared):  # no outbox either: at most once
                    self._spawn(self._send(url.get_secret_value(), raised, cleared),
                                "webhook")
            if synced.warning:
                self._note(synced.warning, "yellow")
            adopted = [a for key, (who, at) in synced.acks.items()
                       if (a := self.alerts.adopt_ack(key, who, at)) is not None]
        if adopted:
            self._on_change("alerts")
        if url and not self._share_failed and not self._draining:
            self._spawn(self._drain(), "webhook")

    async def _drain(self) -> None:
        """The outbox to the webhook: what this or any session judged and nobody
        delivered yet (one drainer at a time across sessions, ``outbox.py``)."""
        from console.session.outbox import Outbox, drain

        ctx = self.ctx
        if ctx is None or ctx.settings.webhook_url is None or self._draining:
            return
        if self._outbox is None:
            self._outbox = Outbox(ctx.settings.state_dir)
        self._draining = True
        errors: list[str] = []
        try:
            await drain(self._outbox, ctx.settings.webhook_url.get_secret_value(),
                        self.webhook_timeout_s, self._run_blocking, errors.append,
                        now=self.now())
        except Exception as exc:  # an unusable outbox: said once, the next poll tries again
            errors.append(f"webhook outbox not usable: {type(exc).__name__}: {exc}"[:200])
        finally:
            self._draining = False
        # said when it starts failing and when the reason changes, not at every retry
        err = errors[-1].split(": tried again")[0] if errors else None
        if err is not None and err != self._drain_error:
            self._note(f"{errors[-1]} (kept in the outbox)", "red")
        self._drain_error = err

    # -- Alertmanager (``alertmanager.py``) ----------------------------------------------
    def _where(self) -> Where:
        from console.session.alertmanager import DEFAULT_CONTEXT, Where

        assert self.ctx is not None
        st = self.ctx.settings
        pod = self._reading.pod.pod_id if self._reading.pod is not None else None
        return Where(self.view.profile_name, pod or st.pod.machine_id or "local",
                     st.context or DEFAULT_CONTEXT)

    async def _to_alertmanager(self) -> None:
        """Every firing alert again (``endsAt`` a few polls ahead), the cleared ones with
        ``endsAt`` now, the heartbeat; then the silences asked for and those to expire,
        and every ``POD_POLL_S`` the silences made elsewhere, shown as acknowledgements."""
        from console.session.alertmanager import (
            Alertmanager,
            AlertmanagerError,
            api_alert,
            labels_of,
            restarting,
            watchdog,
        )

        ctx = self.ctx
        url = ctx.settings.alertmanager_url if ctx is not None else None
        if ctx is None or not url or self._am_busy:
            return
        st = ctx.settings
        if self._am is None:
            self._am = Alertmanager(url, self.webhook_timeout_s)
        am = self._am
        am.timeout_s = self.webhook_timeout_s  # derived from the refresh now
        self._am_busy = True
        try:
            while True:
                now = self.now()
                where = self._where()
                # as Prometheus: 4 x the resend interval, so one late poll resolves nothing
                ends = now + 4 * max(self.refresh_s, AM_RESEND_FLOOR_S)
                resolved, self._am_resolved = self._am_resolved, []
                batch = [api_alert(a, where, now, ends_at=ends, runbook_url=st.runbook_url)
                         for a in self.alerts.told()]  # not what a parent explains
                # two alerts of one label set (two Xid 79 of a GPU): one ending while
                # the other fires resolves nothing there
                live = [x["labels"] for x in batch]
                batch += [x for a, at in resolved if (x := api_alert(
                    a, where, now, ends_at=at, runbook_url=st.runbook_url))["labels"]
                    not in live]
                # a slot taken down on purpose, while it is: an inhibit source there
                was = self._am_restarting
                held = {slot: was.get(slot, (op, now))
                        for slot, op in self.inhibits.restarting().items()}
                batch += [restarting(slot, op, where, since, now, ends_at=ends)
                          for slot, (op, since) in held.items()]
                batch += [restarting(slot, op, where, since, now, ends_at=now)
                          for slot, (op, since) in was.items() if slot not in held]
                batch.append(watchdog(where, now, ends, self._am_started))
                try:
                    await am.post_alerts(batch)
                    self._am_restarting = held
                    self.watchdog_sent_at = now
                    await self._am_silences(am, where, now, [
                        a for a, _ in resolved if labels_of(a, where) not in live])
                    self._am_said(None)
                except AlertmanagerError as exc:
                    # a resolve not told is told at the next try; once its firing
                    # endsAt has passed, Alertmanager has resolved it on its own
                    self._am_resolved = [(a, at) for a, at in resolved
                                         if now - at < 4 * max(self.refresh_s,
                                                               AM_RESEND_FLOOR_S)
                                         ] + self._am_resolved
                    self._am_said(str(exc))
                    return
                if not self._am_resolved and not self._am_silence:
                    break  # nothing arrived while this one was on its way
        finally:
            self._am_busy = False
        if self.mono() - self._watchdog_saved_at >= WATCHDOG_SAVE_S and not self.wall:
            self._watchdog_saved_at = self.mono()  # a cadence: monotonic
            from console.session.alertmanager import save_watchdog

            # a full disk costs status --json its "last sent", not the alert
            with contextlib.suppress(OSError):
                await self._run_blocking(save_watchdog, st.state_dir, now)

    async def _am_silences(self, am: Alertmanager, where: Where, now: float,
                           cleared: list[Alert]) -> None:
        from console.session.alertmanager import (
            ACK_COMMENT,
            acked_here,
            exact,
            labels_of,
            silence,
        )

        assert self.ctx is not None
        asked, self._am_silence = self._am_silence, []
        until = now + self.ctx.settings.alertmanager_ack_max_s
        made = []
        for i, (a, who) in enumerate(asked):
            try:
                await am.create_silence(silence(labels_of(a, where), who, now, until))
            except Exception:
                self._am_silence = asked[i:] + self._am_silence  # made at the next try
                raise
            made.append(a.key)
        if made:
            self._note(f"silenced in Alertmanager: {len(made)} alert(s)", "dim")
        fresh = bool(made) or self.mono() - self._am_acks_at >= POD_POLL_S
        if not cleared and not fresh:
            return
        silences = await am.silences()
        # an acknowledgement never outlives its run: its silence ends with the alert
        gone = [labels_of(a, where) for a in cleared]
        for s in silences:
            if ((s.get("status") or {}).get("state") == "active"
                    and str(s.get("comment", "")).startswith(ACK_COMMENT)
                    and exact(s.get("matchers") or []) in gone and isinstance(s.get("id"), str)):
                await am.expire_silence(s["id"])
        if fresh:
            self._am_acks_at = self.mono()
            ours = {a.key: labels_of(a, where) for a in self.alerts.told()}
            acks = acked_here(await am.alerts(), silences, ours)
            adopted = [key for key, (who, at) in acks.items()
                       if self.alerts.adopt_ack(key, who, at) is not None]
            if adopted:
                self._on_change("alerts")

    def _am_said(self, err: str | None) -> None:
        """Said when Alertmanager starts failing, when the reason changes, and when it
        answers again: not at every poll."""
        if err is not None and err != self._am_error:
            self._note(f"{err} (sent again at the next poll)", "red")
        elif err is None and self._am_error is not None:
            self._note("Alertmanager answers again", "green")
        self._am_error = err

    async def _audit_faults(self, faults: list[Alert]) -> None:
        """Hardware faults outlive the screen: audited (the agent's own audit log on the
        pod has each Xid too)."""
        assert self.ctx is not None
        audit = self.ctx.registry.audit
        for a in faults:
            try:
                await self._run_blocking(audit.append, "gpu_fault", {
                    "alert": a.key, "title": a.title, "advice": a.detail}, "observed")
            except Exception as exc:  # a full disk: said, the alert still stands
                self._note(f"AUDIT RECORD LOST for {a.title}: {exc}", "bold red")

    async def _send(self, url: str, raised: list[Alert], cleared: list[Alert]) -> bool:
        from console.model.alerts import notify

        err = await notify(url, raised, cleared, f"pod-console {self.view.profile_name}",
                           timeout_s=self.webhook_timeout_s)
        if err:
            self._note(err, "red")
            self._unposted.update(a.key for a in raised)  # another session may post them
        return err is None

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
            thresholds = {t.slot: ctx.settings.thresholds_for(t.slot) for t in view.targets}
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
        if done and self.ctx is not None:
            self._acked.extend(done)
            self._spawn(self._share([], []), "alerts")
            if self.ctx.settings.alertmanager_url:  # the acknowledgement is a silence
                # on the alerts Alertmanager knows: a group's consequences are not sent
                self._am_silence += [(a, who) for a in done if a.told]
                if not self._am_busy:
                    self._spawn(self._to_alertmanager(), "alertmanager")
        return [a.title for a in done]

    async def slot_logs(self, slot: str, lines: int = 200) -> list[str]:
        """A slot's recent log lines through the agent, or one line that says why not."""
        agent = self.ctx.agent if self.ctx is not None else None
        if agent is None or not agent.configured:
            return [f"(no agent connection: {'wall mode' if self.wall else 'not configured'})"]
        try:
            r = await agent.logs(slot, lines)
        except Exception as exc:  # the panel shows why, it never crashes
            return [printable(f"(could not fetch logs: {exc})")]
        got = r.final.get("lines", []) if r.ok and r.final else [r.message]
        # a slot's own output: whatever it printed (colours, titles, clipboard writes)
        # is drawn as text only
        return [printable(line) for line in (got if isinstance(got, list) else [got])]

    def want_fleet(self) -> None:
        """Read every context's pod now (none while a cycle runs: polls never overlap)."""
        if not self._fleet_busy and self.ctx is not None:
            self._spawn(self.poll_fleet(), "fleet")

    async def poll_fleet(self) -> FleetSnapshot | None:
        if self._fleet_busy or self.ctx is None:
            return self.fleet
        self._fleet_busy = True
        try:
            if self._fleet_collector is None:
                from console.session.fleet import FleetCollector

                # reads every context's settings and profiles: files, off the loop
                self._fleet_collector = await self._run_blocking(
                    FleetCollector, config=self.ctx.config, clock=self.now)
            limit = self.fleet_timeout_s
            try:
                self.fleet = await asyncio.wait_for(self._fleet_collector.poll(), limit)
            except TimeoutError:
                self._note(f"fleet: no answer within {limit:g} s", "yellow")
        finally:
            self._fleet_busy = False
        self._on_change("fleet")
        return self.fleet

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
                       "bold red")

    async def settle(self) -> None:
        """Wait for the jobs started beside the poll (default spawner only)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._am is not None:
            await self._am.aclose()
        if self.recorder is not None:
            await self._run_blocking(self.recorder.close)
        if self._turn is not None:
            self._turn.release()
        await self.poller.aclose()
        if self._fleet_collector is not None:
            await self._fleet_collector.aclose()
        for fn in self.ctx.on_exit if self.ctx is not None else ():
            r = fn()
            if asyncio.iscoroutine(r):
                await r
