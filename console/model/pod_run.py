"""A pod run, modelled once (issue 42, item 1): one machine from one start to its stop,
terminate or replacement.

Every reader that asks "what is the pod doing, and since when, and why" — the header,
the alerts, spend, acknowledgements, GPU faults — reads one :class:`PodRun`, derived here
by :func:`advance`: the run as it stood, plus one :class:`RunReading` (the provider's and
the agent's words, the console's own operations from its audit log), gives the run as it
stands. Pure: immutable snapshots in, an immutable snapshot out; no clock is read here.

What a run is:

* it begins when a machine is first seen running (or being made), and again after each
  stop: **a resume is a new run**, as is a start the console did not see (the provider's
  ``started_at`` moved);
* it ends stopped, terminated, or replaced (the deployment moved to another machine: a
  fallback);
* what belongs to it ends with it. A new run starts clean: the stop that ended the last
  one is *spent* (:attr:`PodRun.spent`) — the agent may still report it for a while (its
  record outlives the container; the demo's agent outlives the pod), and a spent stop
  never marks the new run "stopping";
* its state is always that of the last reading: a stop made in this run shows until a
  reading says the pod runs again (a new run), never after.

Each state that a stop explains carries its **cause** (:data:`Cause`) and **who**
(``watchdog``, ``user@host``, ``cron down``, ``provider``). A stop is *planned*
(:attr:`PodRun.planned`) for every cause but ``provider`` and ``unknown``: the alert
rules then raise one INFO event for it, no outage of what depends on the pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from msgspec import Struct, field
from msgspec.structs import replace

from console.model.fmt import OVERDUE_S
from console.model.pod_stop import PlannedStop
from console.model.snapshot import PodSnapshot, StopPlan

__all__ = ["BILLING", "CAUSES", "ENDED", "OPERATION_S", "PLANNED_CAUSES", "STATES", "Cause",
           "Operation", "PodRun", "RunReading", "RunState", "StopEvidence", "advance",
           "cause_of", "operation_of"]

RunState = Literal["provisioning", "booting", "serving", "idle", "warned", "stopping",
                   "stopped", "terminated", "replaced"]
STATES: tuple[RunState, ...] = ("provisioning", "booting", "serving", "idle", "warned",
                                "stopping", "stopped", "terminated", "replaced")
ENDED: frozenset[RunState] = frozenset({"stopped", "terminated", "replaced"})
"""States a run does not leave: the next start is another run."""

Cause = Literal["schedule", "idle", "memory guard", "stop-now", "down", "down --force",
                "fallback", "provider", "unknown"]
CAUSES: tuple[Cause, ...] = ("schedule", "idle", "memory guard", "stop-now", "down",
                             "down --force", "fallback", "provider", "unknown")
PLANNED_CAUSES: frozenset[Cause] = frozenset(CAUSES) - {"provider", "unknown"}
"""Stops somebody meant: the watchdog's, the console's, a fallback's."""

STOPPED = ("EXITED", "STOPPED")
"""Provider statuses of a machine that is stopped (its volume kept)."""
GONE = ("TERMINATED",)
BILLING = ("RUNNING", "STARTING", "PROVISIONING", "CREATED", "RESTARTING")
"""Provider statuses of a machine that runs, or is being made to (it bills)."""
NEW_START_S = 5.0
"""The provider's start time moved by more than this: the machine was started again."""
START_SLACK_S = 60.0
"""Clocks differ: stop evidence this much older than a run's start may still be its own
(only for evidence no earlier run of this console saw)."""
OPERATION_S = 600.0
"""A console operation older than this explains no stop seen now."""


def cause_of(reason: str | None) -> Cause:
    """The agent's words for a stop (``LastStop.reason``, ``next_stop_reason``) as a
    cause: ``extension ends`` is the schedule's stop, moved."""
    r = (reason or "").strip().lower()
    if r in ("schedule", "extension ends", "extension", "scheduled"):
        return "schedule"
    if r.startswith("idle"):
        return "idle"
    if r.startswith("memory"):
        return "memory guard"
    if r in ("stop-now", "stop now", "w s"):
        return "stop-now"
    if r == "down --force" or r == "down-force":
        return "down --force"
    if r.startswith("down"):
        return "down"
    if r.startswith("fallback"):
        return "fallback"
    if r == "provider":
        return "provider"
    return "unknown"


class Operation(Struct, frozen=True):
    """One of the console's own operations on the pod, as its audit log records it."""

    kind: Literal["stop-now", "down", "down --force", "fallback", "resume", "up"]
    at: float
    """When it was recorded (our clock: the audit record's ``t``)."""
    result: str
    """``started``, ``ok``, ``failed``, ``refused``, ``kept``, ``cancelled``."""
    by: str | None = None
    """``user@host``, or ``cron down`` / ``cron up`` (no terminal)."""
    pod_id: str | None = None
    new_pod: str | None = None
    """A fallback's new machine, once it is known."""

    @property
    def acted(self) -> bool:
        """It did (or is doing) what it says: not refused, kept or failed before acting."""
        return self.result in ("started", "ok")


def operation_of(rec: Mapping[str, Any]) -> Operation | None:
    """An audit record (``console.operations.audit``) as an :class:`Operation`, or None
    for one that does not start or stop a machine."""
    action = rec.get("action")
    args = rec.get("arguments") if isinstance(rec.get("arguments"), Mapping) else {}
    assert isinstance(args, Mapping)
    t = rec.get("t")
    if not isinstance(t, int | float) or isinstance(t, bool):
        return None
    kind: Any = None
    if action == "watchdog" and args.get("cmd") == "stop-now":
        kind = "stop-now"
    elif action == "down":
        kind = "down --force" if args.get("force") else "down"
    elif action in ("fallback", "resume", "up"):
        kind = action
    if kind is None:
        return None
    user, host = rec.get("user"), rec.get("host")
    by = f"{user}@{host}" if user and host else (str(user) if user else None)
    if rec.get("via") == "cron" and kind in ("down", "down --force", "up"):
        by = f"cron {kind.split()[0]}"
    pod = rec.get("pod") or args.get("pod")
    new = rec.get("new_pod")
    return Operation(kind, float(t), str(rec.get("result") or ""), by,
                     str(pod) if pod else None, str(new) if new else None)


class RunReading(Struct, frozen=True):
    """What one poll brought, for the run: the provider and the agent now, the last
    reading in which the agent answered (it goes quiet with its pod), and the console's
    operations (recent audit records, oldest first)."""

    now: float
    pod: PodSnapshot | None
    agent_seen: PodSnapshot | None = None
    operations: tuple[Operation, ...] = ()
    slots_up: int | None = None
    """How many of the profile's slots answer (None: not known)."""


class StopEvidence(Struct, frozen=True):
    """One sign that the run is being (or was) stopped on purpose, and by whom."""

    key: str
    """Its identity across readings: a new run never takes an earlier run's stop."""
    cause: Cause
    reason: str
    by: str | None
    at: float | None
    made: bool = True
    """False: the watchdog's stop is due, and nothing says yet that it is being made."""


class PodRun(Struct, frozen=True):
    """One machine from one start to its end, as the last reading tells it."""

    pod_id: str | None
    number: int
    """1 for the first run this console saw, one more for each after it."""
    state: RunState
    since: float
    """When this state began (our clock: the first reading that told it)."""
    started_at: float | None = None
    """The provider's start of this run (our clock), None when it does not say."""
    began: float | None = None
    """When this console first saw this run."""
    cause: Cause | None = None
    """Why it is warned, stopping, stopped, terminated or replaced (None otherwise)."""
    reason: str | None = None
    """The words of that cause as the agent gave them (``extension ends``)."""
    by: str | None = None
    """Who: ``watchdog``, ``user@host``, ``cron down``, ``provider``."""
    at: float | None = None
    """When the stop was made or is due (our clock); None: unknown."""
    phase: str | None = None
    """While booting: the engine's phase (``loading weights``…), when the agent says."""
    ended_at: float | None = None
    """When this console saw the run end."""
    replaced_by: str | None = None
    """The machine that took over (a fallback)."""
    made: bool = True
    """False while a watchdog stop is due but not yet seen being made."""
    spent: frozenset[str] = field(default_factory=frozenset)
    """Stop evidence of earlier runs: never this run's."""
    evidence: frozenset[str] = field(default_factory=frozenset)
    """Stop evidence seen in this run (spent when the next run begins)."""
    previous: PodRun | None = None
    """The run that ended when this one began (its own ``previous`` dropped)."""

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    @property
    def stopping_or_ended(self) -> bool:
        """Being stopped, or already over: what depends on the pod goes with it."""
        return self.state == "stopping" or self.ended

    @property
    def planned(self) -> bool:
        """A stop somebody meant (every cause but ``provider`` and ``unknown``)."""
        return self.stopping_or_ended and self.cause in PLANNED_CAUSES

    @property
    def key(self) -> str:
        """This run's identity (acknowledgements, faults and timers belong to it)."""
        return f"{self.pod_id or '-'}#{self.number}"

    def who(self) -> str:
        """``by watchdog``, ``by alice@laptop`` ("" when nobody is known)."""
        return f"by {self.by}" if self.by else ""

    def planned_stop(self) -> PlannedStop | None:
        """The stop this run is in (being made, or made) as the header and the recording
        say it (``pod_stop.PlannedStop``); None while it runs. A stop of an unknown cause
        has no reason to say; the provider's says so."""
        if not self.stopping_or_ended:
            return None
        reason = "" if self.cause in (None, "unknown") else str(self.cause)
        return PlannedStop(self.pod_id, reason, self.by, self.at, done=self.ended,
                           made=self.made or self.ended)

    def event_title(self, clock: str) -> str:
        """The one INFO event of a stop: "pod stopped (idle) by watchdog at 17:55",
        "pod stopping (stop-now) by alice@laptop", "stop due now (idle) by watchdog"
        (``clock``: ``at`` as shown, "" when unknown)."""
        why = f" ({self.cause})" if self.cause and self.cause != "unknown" else ""
        by = f" by {self.by}" if self.by else ""
        when = f" at {clock}" if clock and self.at is not None else ""
        if self.state == "stopping" and not self.made:
            return f"stop due now{why}{by}"
        verb = {"stopping": "stopping", "stopped": "stopped", "terminated": "terminated",
                "replaced": "replaced"}.get(self.state, self.state)
        if self.state == "replaced" and self.replaced_by:
            verb += f" by pod {self.replaced_by}"
            by = f" ({self.by})" if self.by else ""
        return f"pod {verb}{why}{by}{when}"

    def stop_text(self, clock: str) -> str:
        """The header's words for a stop (``clock``: ``at`` as shown): "stopped at
        17:55 (idle)", "stopping (stop-now)", "stop due now (idle)", "terminated",
        "replaced by p2"."""
        why = f" ({self.cause})" if self.cause else ""
        if self.state == "replaced":
            return f"replaced by {self.replaced_by}" if self.replaced_by else "replaced"
        if self.state == "terminated":
            return f"terminated{why}"
        if self.state == "stopped":
            return f"stopped at {clock}{why}" if self.at is not None else f"stopped{why}"
        if self.state == "stopping":
            return f"stopping{why}" if self.made else f"stop due now{why}"
        return self.state


def _op_by(ops: tuple[Operation, ...], kinds: tuple[str, ...], since: float | None,
           now: float) -> Operation | None:
    """The newest operation of these kinds that acted, in this run and recently."""
    for op in reversed(ops):
        if op.kind in kinds and op.acted and now - op.at <= OPERATION_S and (
                since is None or op.at >= since - NEW_START_S):
            return op
    return None


def _belongs(at: float | None, started_at: float | None) -> bool:
    if at is None:
        return False
    return started_at is None or at >= started_at - START_SLACK_S


def _agent_stops(seen: PodSnapshot, started_at: float | None) -> list[StopEvidence]:
    """The agent's own records: its last stop (not a failed one) and a stop-now action
    (not a failed one)."""
    out: list[StopEvidence] = []
    plan = seen.stop_plan
    if plan is not None and plan.last_stop_at is not None and plan.last_stop_ok is not False:
        at = plan.ours(plan.last_stop_at)
        # a stop carried out before this run's start ended an earlier run, whatever the
        # slack for clocks (a resume within a minute of an idle stop)
        done_before = plan.last_stop_ok is True and started_at is not None \
            and at < started_at
        if _belongs(at, started_at) and not done_before:
            reason = plan.last_stop_reason or "stop"
            by = plan.last_stop_by
            out.append(StopEvidence(f"agent:{reason}:{plan.last_stop_at:.3f}",
                                    cause_of(reason), reason,
                                    None if by in (None, "stop-now") else by, at))
    for act in seen.agent_actions:
        started = act.get("started_at")
        if (act.get("kind") == "stop-now" and act.get("state") != "failed"
                and isinstance(started, int | float) and _belongs(float(started), started_at)):
            out.append(StopEvidence(f"action:{act.get('id') or started}", "stop-now",
                                    "stop-now", None, float(started)))
    return out


def _due(pod: PodSnapshot, seen: PodSnapshot, plan: StopPlan, now: float,
         started_at: float | None) -> StopEvidence | None:
    """The watchdog's stop whose time has come (not held by requests, not late)."""
    if seen.watchdog_armed is False or plan.grace_until:
        return None
    left = plan.stop_in(now)
    if left is None or left > 0:
        return None
    # the agent still answering with a stop long past its time: late, not planned
    if pod.agent_error is None and left < -OVERDUE_S:
        return None
    due = now + left / (plan.clock_speed or 1.0)
    if not _belongs(due, started_at):
        return None
    reason = plan.next_reason or "stop"
    return StopEvidence(f"due:{reason}", cause_of(reason), reason, "watchdog", due,
                        made=pod.agent_error is not None)


def _evidence(run: PodRun, r: RunReading) -> StopEvidence | None:
    """The stop this run is in, from the readings and the console's operations (first
    that holds: the agent's record, the console's operation, a watchdog stop due)."""
    pod = r.pod
    assert pod is not None
    seen = r.agent_seen if r.agent_seen is not None and r.agent_seen.pod_id == pod.pod_id \
        else (pod if not pod.agent_error else None)
    since = run.started_at if run.started_at is not None else run.began
    found: StopEvidence | None = None
    if seen is not None:
        for ev in _agent_stops(seen, since):
            if ev.key not in run.spent:
                found = ev
                break
    kinds: tuple[str, ...] = ("stop-now", "down", "down --force")
    if pod.status in STOPPED + GONE or pod.agent_error:
        kinds += ("fallback",)  # a fallback moves off a pod that has gone quiet
    op = _op_by(r.operations, kinds, since, r.now)
    if op is not None and f"op:{op.kind}:{op.at:.3f}" not in run.spent:
        key = f"op:{op.kind}:{op.at:.3f}"
        if found is None:
            found = StopEvidence(key, cause_of(op.kind), op.kind, op.by, op.at)
        elif found.cause == op.kind or (found.cause == "down" and op.kind == "down --force"):
            # the agent's record of the console's stop: the console knows who asked (the
            # agent may name only the pod's user, "root")
            found = replace(found, cause=cause_of(op.kind), by=op.by or found.by)
    if found is None and seen is not None and seen.stop_plan is not None:
        due = _due(pod, seen, seen.stop_plan, r.now, since)
        if due is not None and due.key not in run.spent:
            found = due
    if found is not None and found.by is None and found.cause in ("schedule", "idle",
                                                                  "memory guard"):
        found = replace(found, by="watchdog")
    return found


def _living_state(pod: PodSnapshot, r: RunReading) -> tuple[RunState, str | None,
                                                            Cause | None, str | None]:
    """A run no stop explains: (state, phase, cause of a coming stop, its words)."""
    if pod.status in ("STARTING", "PROVISIONING", "CREATED", "RESTARTING"):
        return "provisioning", None, None, None
    starting = [st for st in pod.agent_slots.values()
                if isinstance(st, Mapping) and st.get("state") in ("starting", "backoff")]
    if starting:
        phase = None
        for st in starting:
            raw = st.get("phases")
            if isinstance(raw, list) and raw and isinstance(raw[-1], list | tuple) \
                    and raw[-1] and isinstance(raw[-1][0], str):
                phase = raw[-1][0]
        return "booting", phase, None, None
    if r.slots_up == 0 and pod.agent_error is None and pod.agent_slots:
        return "booting", None, None, None
    plan = pod.stop_plan
    if plan is not None and pod.watchdog_armed is not False and (plan.warning
                                                                 or plan.grace_until):
        return "warned", None, cause_of(plan.next_reason), plan.next_reason
    if plan is not None and plan.idle_after_s and not plan.busy and (plan.idle(r.now) or 0) > 0:
        return "idle", None, None, None
    return "serving", None, None, None


def _begin(prev: PodRun | None, pod: PodSnapshot, r: RunReading,
           ended: PodRun | None) -> PodRun:
    """A new run of ``pod``: earlier runs' stops spent, nothing else carried."""
    spent: frozenset[str] = frozenset()
    if prev is not None:
        spent = prev.spent | prev.evidence
        seen = r.agent_seen if r.agent_seen is not None else pod
        if seen.pod_id == pod.pod_id:
            # what the agent still says of the stop that ended the last run
            spent |= {e.key for e in _agent_stops(seen, None)}
        spent |= {f"op:{op.kind}:{op.at:.3f}" for op in r.operations if op.at <= r.now}
    number = prev.number + 1 if prev is not None else 1
    prior = replace(ended, previous=None) if ended is not None else None
    return PodRun(pod.pod_id, number, "provisioning", r.now, started_at=pod.started_at,
                  began=r.now, spent=spent, previous=prior)


def _end(run: PodRun, state: RunState, r: RunReading, ev: StopEvidence | None,
         default: Cause) -> PodRun:
    """The run over (stopped or terminated), its cause from the stop seen, else from what
    it last was: a stop being made, or a watchdog warning of one (the agent may go before
    any reading shows its record), else ``default``."""
    if run.ended and run.state == state:
        return run
    cause: Cause
    reason: str | None
    by: str | None
    at: float | None
    if ev is not None:
        cause, reason, by, at = ev.cause, ev.reason, ev.by, ev.at
    elif run.state == "stopping" or (run.state == "warned" and run.cause is not None
                                     and run.cause != "unknown"):
        cause, reason, by, at = run.cause or default, run.reason, run.by, run.at
    else:
        cause, reason, by, at = default, None, "provider" if default == "provider" \
            else None, None
    keys = run.evidence | ({ev.key} if ev is not None and not ev.key.startswith("due:")
                           else set())
    return replace(run, state=state, since=r.now, cause=cause, reason=reason, by=by,
                   at=at, ended_at=r.now, made=True, phase=None, evidence=keys)


def advance(prev: PodRun | None, r: RunReading) -> PodRun | None:
    """The run after one more reading (None: no pod is known yet)."""
    pod = r.pod
    if pod is None or (pod.status is None and pod.agent_error and pod.stop_plan is None
                       and prev is None):
        return prev
    run = prev
    ended_now: PodRun | None = None
    if run is not None and run.pod_id != pod.pod_id:
        # the deployment moved to another machine: the old run is replaced
        op = _op_by(r.operations, ("fallback",), None, r.now)
        old = run if run.ended else replace(
            run, state="replaced", since=r.now, cause="fallback" if op else "unknown",
            by=op.by if op else None, ended_at=r.now)
        ended_now = replace(old, replaced_by=pod.pod_id, previous=None)
        run = _begin(run, pod, r, ended_now)
    elif run is None:
        run = _begin(None, pod, r, None)
    else:
        moved = (pod.started_at is not None and run.started_at is not None
                 and pod.started_at > run.started_at + NEW_START_S)
        again = run.ended and pod.status in BILLING
        if moved or again:
            if not run.ended:  # stopped and started between two readings
                ev = _evidence(run, r)
                run = _end(run, "stopped", r, ev, "unknown")
            ended_now = run
            run = _begin(run, pod, r, run)
    if run.ended:
        return run  # nothing comes back from an end but a new run (above)
    if run.started_at is None and pod.started_at is not None:
        run = replace(run, started_at=pod.started_at)
    # a stop nothing explains: the provider's (or someone's at its console) when this
    # console saw the run alive; unknown when it was first seen over
    default: Cause = "provider" if run.state != "provisioning" or run.began != r.now \
        else "unknown"
    if pod.status in GONE:
        return _end(run, "terminated", r, _evidence(run, r), default)
    ev = _evidence(run, r)
    if pod.status in STOPPED:
        return _end(run, "stopped", r, ev, default)
    if ev is not None:
        state: RunState = "stopping"
        keys = run.evidence | ({ev.key} if not ev.key.startswith("due:") else set())
        return replace(run, state=state, since=run.since if run.state == state else r.now,
                       cause=ev.cause, reason=ev.reason, by=ev.by, at=ev.at, made=ev.made,
                       phase=None, evidence=keys)
    if pod.status is None and pod.agent_error:
        return run  # neither the provider nor the agent said anything: nothing new
    state, phase, cause, reason = _living_state(pod, r)
    by = "watchdog" if state == "warned" else None
    at = None
    if state == "warned" and pod.stop_plan is not None:
        left = pod.stop_plan.stop_in(r.now)
        at = None if left is None else r.now + left / (pod.stop_plan.clock_speed or 1.0)
    return replace(run, state=state, since=run.since if run.state == state else r.now,
                   phase=phase, cause=cause, reason=reason, by=by, at=at, made=True)
