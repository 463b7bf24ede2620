"""One poll of every source due, judged: the body of the session's poll, in a room of
its own (issue 46), with what only it keeps — the last reading, the pod between its
readings, the gateway's, the stall watch, the count and failure of polls, and the wall
clock's steps.

The slots are polled every refresh; the pod every ``POD_POLL_S`` (``pod_reads.py``), its
GPU endpoint (``gpu_line``) and the gateway (``gateway_polling.py``) beside the slots.
Polls never overlap (:attr:`PollCycle.busy`): a staged start's first one, begun before the
UI loaded (``first_poll.py``), is awaited by the first run. One that fails is said in the
log and on every screen, and the next tick polls again. A step of the wall clock between
polls is told once and moves the wall times held here, so that the seconds since them stay
what they were (:meth:`PollCycle.wall_step`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from msgspec.structs import replace

from console.model import startup
from console.model.alerts import Alert, AlertBook
from console.model.conditions import Condition
from console.model.gateway import GatewaySnapshot, on_the_pod
from console.model.gateway import conditions as gateway_conditions
from console.model.gpu_faults import FaultBook
from console.model.snapshot import DeploymentSnapshot, PodSnapshot
from console.model.stall import StallWatch
from console.session import gateway_polling, gpu_line
from console.session.clock import WallSteps
from console.session.gateway_polling import GatewayPolling
from console.session.gpu_history import record_gpus
from console.session.judging import Judged, judge
from console.session.pod_reads import PodReads
from console.session.reading import Reading

if TYPE_CHECKING:
    from console.model.history import History
    from console.session.delivery import AlertDelivery
    from console.session.first_poll import FirstPoll
    from console.session.intents import OperationIntents
    from console.session.pacing import Pacing
    from console.session.recording import SessionRecording
    from console.session.run_tracking import RunTracking
    from console.session.spend import SessionSpend
    from console.session.view import ConsoleContext, StagedStart
    from console.sources.collect.poller import DeploymentPoller

RunBlocking = Callable[..., Awaitable[Any]]
Note = Callable[[str, str], None]


class PollHost(Protocol):
    """What a poll reads and feeds of its session: the context, the clocks, the books it
    judges into and the rooms it hands each poll to."""

    ctx: ConsoleContext | None
    staged: StagedStart | None
    wall: bool
    alerts: AlertBook
    faults: FaultBook
    failures: dict[str, Condition]
    intents: OperationIntents
    runs: RunTracking
    spend: SessionSpend
    delivery: AlertDelivery
    recording: SessionRecording
    pacing: Pacing

    def now(self) -> float: ...

    def mono(self) -> float: ...

    @property
    def poller(self) -> DeploymentPoller: ...

    @property
    def history(self) -> History: ...


async def _already(snapshot: DeploymentSnapshot) -> DeploymentSnapshot:
    """A snapshot read before this poll (the first poll's), where a poll is awaited."""
    return snapshot


class PollCycle:
    """One session's polls (see the module docstring)."""

    def __init__(self, host: PollHost, *, run_blocking: RunBlocking, note: Note,
                 on_change: Callable[[str], None]) -> None:
        self.host = host
        self._run_blocking = run_blocking
        self._note = note
        self._on_change = on_change
        self.busy = False
        """A poll runs now (the next tick starts none)."""
        self.started_m: float | None = None
        """When the last poll started (monotonic)."""
        self.count = 0
        self.failure: tuple[float, str] | None = None
        """When the last poll failed and why; None once one succeeds (shown on screen)."""
        self.reading = Reading()
        self.pod_reads = PodReads()
        """What is kept of the pod between its readings (``pod_reads.py``)."""
        self.gateway: GatewaySnapshot | None = None
        """The gateway's last reading (``gateway_url`` with ``gateway.watch``), else None."""
        self.gateway_polling = GatewayPolling()
        self.stalls = StallWatch()
        """Slots with requests running and no token for ``alerts.stall_after_s``: only
        polls a while apart tell it, so the poll (which sees every one) owns it."""
        self.wall_steps = WallSteps()
        """Steps of the wall clock seen between polls (told once each, never judged)."""
        self._first_taken = False
        """A staged start's first poll (``first_poll.py``) was awaited by a run."""

    async def run(self) -> bool:
        """One poll; False when one was already running (nothing done) or it failed.
        The screens are told (``on_change("poll")``) after each poll run."""
        if self.busy:
            return False
        self.busy = True
        self.started_m = self.host.mono()
        ok = False
        try:
            await self._poll()
            ok = True
        except Exception as exc:  # whatever a source did: shown, never a silent stop
            reason = f"{type(exc).__name__}: {exc}"[:200]
            self.failure = (self.host.now(), reason)
            self._note(f"poll failed: {reason}", "crit")
        finally:
            self.busy = False
        self._on_change("poll")
        return ok

    def _first_poll(self) -> FirstPoll | None:
        """A staged start's first poll, begun before the UI loaded (``first_poll.py``):
        the first run takes its snapshot instead of polling the slots again."""
        staged = self.host.staged
        return staged.first_poll if staged is not None else None

    async def close_poller(self) -> None:
        """Close the poller once the first poll's thread is done with it (a console
        closing before its first poll was shown must not close it under that poll)."""
        first = self._first_poll()
        if first is not None:
            await first.ended()
        await self.host.poller.aclose()

    async def _poll(self) -> None:
        host = self.host
        first = None if self._first_taken else self._first_poll()
        self._first_taken = True
        # before anything here touches the poller: until it has ended, it is the thread's
        early = await first.result() if first is not None else None
        host.pacing.apply()  # a fallback or a finished start may have new sources
        ctx, poller, reads = host.ctx, host.poller, self.pod_reads
        started, started_m = host.now(), host.mono()
        # told at the poll's start: whatever this poll reads is stamped after the step
        self.wall_step(started, started_m)
        pods = ctx.pod_collector if ctx is not None else None
        read_pod = pods is not None and reads.due(started_m)
        raw = reads.raw
        if pods is not None and raw is not None and raw.pod_id != pods.pod_id:
            read_pod = True  # a new pod (a fallback): nothing of the old one is shown
        gw_job = (self.gateway_polling.poll(ctx, poller.client, started, host.runs.run,
                                            host.pacing.request_timeout_s)
                  if ctx is not None and gateway_polling.wanted(ctx) else None)
        gw_task = asyncio.ensure_future(gw_job) if gw_job is not None else None
        line_src = gpu_line.fast_source(pods.gpu_metrics) if pods is not None else None
        line_task = asyncio.ensure_future(gpu_line.read(
            line_src, pods.pod_id, started, host.pacing.request_timeout_s)) \
            if line_src is not None and pods is not None else None
        try:
            slots = poller.poll() if early is None else _already(early)
            if pods is not None and read_pod:
                reads.read(started_m)
                snapshot, raw = await asyncio.gather(slots, pods.poll())
            else:
                snapshot = await slots
            if gw_task is not None:
                self.gateway = await gw_task
            line = await line_task if line_task is not None else None
        finally:  # a failed poll leaves nothing running behind it
            for task in (gw_task, line_task):
                if task is not None and not task.done():
                    task.cancel()
        if line is not None:
            reads.gpu_line, reads.gpu_line_m = line, started_m
        now, mono = host.now(), host.mono()
        pod_read_at = started if read_pod else self.reading.pod_read_at
        pod_read_m = started_m if read_pod else self.reading.pod_read_m
        shown = gpu_line.in_use(reads.gpu_line, raw, pod_read_at) if raw is not None else None
        pod_now = gpu_line.merged(raw, shown) if raw is not None else None
        gpus_read = pod_now is not None and (read_pod or (line is not None and shown is line))
        if read_pod and raw is not None:
            self._say_phases(reads.raw, raw)
            if ctx is not None:
                await host.spend.observe(ctx.settings.spend_path, host.wall, raw, now)
            if not raw.agent_error and raw.stop_plan is not None:
                reads.agent_seen = raw
            if ctx is not None:
                await host.runs.read_operations(ctx, self._run_blocking, now)
        if gpus_read and pod_now is not None:
            record_gpus(host.history, pod_now.gpus, now)
        # from here to the end nothing awaits: the reading, the alerts and the counters
        # change together, so a state() built at any moment is of one poll
        raised: list[Alert] = []
        cleared: list[Alert] = []
        if ctx is None:  # a staged start: the slots only, no pod and no alerts yet
            judged = Judged(None, (), None)
        else:
            judged = self._judge(ctx, snapshot, pod_now, now, mono)
            raised, cleared = host.alerts.update(judged.conditions, now, judged.ended,
                                                 mono=mono)
        if read_pod:
            reads.raw = raw
        self.reading = Reading(snapshot, judged.pod, now, pod_read_at, judged.spend_month,
                               judged.stop, shown.read_at if shown is not None else None,
                               pod_read_m, reads.gpu_line_m if shown is not None else None)
        self.count += 1
        self.failure = None
        self._tell(raised, cleared)
        host.recording.poll(pod_now if gpus_read else None)

    def _judge(self, ctx: ConsoleContext, snapshot: DeploymentSnapshot,
               pod_now: PodSnapshot | None, now: float, mono: float) -> Judged:
        """This poll's conditions: the slots', the pod's, the gateway's, the stalls' and
        the session's own, less what a stop or an operation takes down on purpose."""
        host = self.host
        st = ctx.settings
        self.stalls.observe(snapshot.slots, now, st.alerts.stall_after_s, mono,
                            slack=host.pacing.refresh_s / 2)
        ended_run = host.runs.advance(snapshot, pod_now, self.pod_reads.agent_seen, now)
        gw_conds = gateway_conditions(self.gateway, snapshot, st.gateway, st.alerts)
        stalls = self.stalls.conditions()
        run = host.runs.run
        planned = run is not None and run.planned
        if planned or gateway_polling.counts_the_stop(run, self.gateway, now, st.window_s):
            # a stop somebody meant: the slots' requests and the gateway's routes to
            # them stop with the pod; its one event says so
            ours = {c.key for c in on_the_pod(gw_conds, self.gateway, snapshot)}
            gw_conds = [c for c in gw_conds if c.key not in ours]
        if planned:
            stalls = []
        judged = judge(snapshot, pod_now, host.spend.book, ctx.profile, st, now,
                       [*host.failures.values(), *stalls, *gw_conds],
                       host.faults, self.pod_reads.agent_seen, run)
        # what an operation takes down on purpose is not an outage (``inhibit``)
        judged = replace(judged, conditions=tuple(host.intents.inhibits.apply(
            judged.conditions, snapshot, self.gateway, mono)))
        if ended_run:
            judged = replace(judged, ended={**ended_run, **judged.ended})
        return judged

    def wall_step(self, now: float, mono: float) -> None:
        """A step of the wall clock since the last poll (more than a refresh off the
        monotonic clock, either way): said once, in the log and the recording. Nothing
        is decided on it: every duration is monotonic."""
        host = self.host
        step = self.wall_steps.observe(now, mono, host.pacing.refresh_s)
        if step is None:
            return
        # the wall times this session holds to count on from (the stop plan's countdown
        # and idle count, the reading's and the GPU line's times) move with the clock:
        # the seconds since them stay what they were
        by = step.by_s
        self.pod_reads.shift(by)
        self.reading = self.reading.shifted(by)
        host.history.shift(by)  # the plots: their last hour is the monotonic one
        self.gateway_polling.shift(by)
        shift = getattr(host.poller, "shift", None)  # (a test's fake source has none)
        if shift is not None:
            shift(by)
        self._note(step.text(), "warn")
        from console.session.record.tape import Marker

        host.recording.mark(Marker(now, "clock", step.text(), f"clock:{step.by_s:+.0f}"))

    def _say_phases(self, before: PodSnapshot | None, after: PodSnapshot) -> None:
        """Each start-up phase the agent lists, in the action log as it ends: one shorter
        than a reading's interval never shows in the cell, and is still said."""
        was = before.agent_slots if before is not None and before.pod_id == after.pod_id \
            else None
        for slot, st in after.agent_slots.items():
            for line in startup.phase_lines(slot, was.get(slot) if was else None, st):
                self._note(line, "dim")

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
        self.host.delivery.tell(raised, cleared)
