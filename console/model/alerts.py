"""Alert rules from the field's own triggers, with Prometheus's timing semantics.

``evaluate`` turns the latest snapshots into the set of conditions true now. Each
carries a ``for`` duration and a hold time, as a Prometheus rule's ``for`` and
``keep_firing_for``: ``AlertBook`` keeps a new condition *pending* until it has held for
``for_s``, then *fires* it; a firing alert clears only once its condition has been gone
for ``hold_s``, so a figure hovering at its threshold does not flap. Changes (fired,
resolved, acknowledged) are kept in a bounded history and are what the webhook sends,
never every poll. A failed operation is an event of that history, not a standing alert.

A condition may name the condition that explains it (``Condition.parent``: a gateway
deployment's cooldown explains its fallbacks and 5xx): while that parent is active the
alert is drawn under it and is told to nobody on its own (``Alert.told``); the parent's
``description`` lists it. What outlives its parent is an alert of its own from then on.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from msgspec import Struct, field
from msgspec.structs import replace

from console.model import catalog, fmt, startup
from console.model.conditions import SEVERITY_ORDER, Condition, Severity
from console.model.gpu_faults import FaultBook, is_hardware
from console.model.gpu_state import conditions as gpu_conditions
from console.model.pod_run import PodRun, RunReading, advance
from console.model.pod_stop import STOPPED, PlannedStop
from console.model.snapshot import DeploymentSnapshot, PodSnapshot, StopPlan

if TYPE_CHECKING:  # evaluated only once settings and profiles have loaded
    from console.config.settings import Settings
    from pod_agent.profile import Profile

State = Literal["pending", "firing"]
ACK_SLACK_S = 5.0
"""Clocks of the sessions on one state dir differ this much at most: an acknowledgement
older than the pod's run by more was made in an earlier run."""
EXTENSION_WARN_S = 600.0
"""How long before an extension ends it is said, when the agent does not say."""


class Alert(Struct, frozen=True):
    key: str
    severity: Severity
    title: str
    detail: str
    since: float
    """When the condition became true (pending from then on)."""
    state: State = "firing"
    fired_at: float | None = None
    last_true: float | None = None
    """The last evaluation that found the condition true (a firing alert past it holds)."""
    acked_by: str | None = None
    acked_at: float | None = None
    gone_since: float | None = None
    """Firing, but its condition is gone since then: it clears when the hold has passed."""
    ended: str | None = None
    """Set on an alert that ended without clearing ("ended with pod X")."""
    since_m: float | None = None
    """``since`` on the monotonic clock: its ``for:`` counts from here (None: ``since``)."""
    gone_m: float | None = None
    """``gone_since`` on the monotonic clock: its hold counts from here."""
    true_m: float | None = None
    """``last_true`` on the monotonic clock."""
    parent: str | None = None
    """The alert that explains this one, while it is active: this one is shown under it
    and is no alert of its own (no WARN, no notification) until the parent has cleared."""
    told: bool = False
    """Its firing was told (the log, the webhook, Alertmanager): then its clear is too. A
    consequence under its parent is not told; it is when it outlives the parent."""
    consequences: tuple[str, ...] = ()
    """The titles of the alerts under this one (what it explains), for its description."""

    def description(self) -> str:
        """What a notification says under the title: the advice, then what this alert
        explains (those are not sent on their own)."""
        if not self.consequences:
            return self.detail
        return (f"{self.detail}; " if self.detail else "") + "with: " + "; ".join(
            self.consequences)

    def age(self, now: float) -> float:
        """Seconds since it became true, at wall time ``now``: monotonic up to its last
        evaluation, the wall clock's few seconds since (a step of the wall clock ages no
        alert)."""
        if self.since_m is None or self.true_m is None or self.last_true is None:
            return max(0.0, now - self.since)
        return max(0.0, self.true_m - self.since_m) + max(0.0, now - self.last_true)

    def resolving(self, now: float) -> bool:
        return self.state == "firing" and self.gone_since is not None


class AlertEvent(Struct, frozen=True):
    t: float
    kind: Literal["firing", "resolved", "acknowledged", "failed", "ended"]
    severity: Severity
    title: str
    detail: str = ""
    lasted_s: float | None = None
    """On a resolved or ended alert: how long it fired (from firing to this event)."""


def _lasted(a: Alert, now: float, m: float) -> float:
    """How long it was true: on the monotonic clock where the book knows it (``m``: now
    on that clock), so a step of the wall clock lengthens no alert."""
    if a.since_m is not None:
        return max(0.0, m - a.since_m)
    return max(0.0, now - (a.fired_at if a.fired_at is not None else a.since))


class AlertBook(Struct):
    active: dict[str, Alert] = field(default_factory=dict)
    history: deque[AlertEvent] = field(default_factory=lambda: deque(maxlen=500))
    """Newest last; bounded, for a wall that runs for weeks (the audit log keeps acks)."""
    _conds: dict[str, Condition] = field(default_factory=dict)
    run_began: float | None = None
    """When the pod's current run began, once this book saw a run end (``new_run``):
    acknowledgements made before it belong to an earlier run."""

    def update(self, conditions: Iterable[Condition], now: float,
               ended: dict[str, str] | None = None, mono: float | None = None
               ) -> tuple[list[Alert], list[Alert]]:
        """Apply the conditions true now; return (fired, cleared) by this evaluation.
        ``ended``: alert key → why it ended when that is not "cleared" (a GPU fault whose
        pod is gone: "ended with pod X"); said in the history, at once (no hold).
        ``now``: the wall clock (the times shown); ``mono``: the monotonic clock, what
        ``for:`` and the hold count on (None: ``now`` serves as both), so that a step of
        the wall clock neither fires nor clears anything."""
        ended = ended or {}
        m = now if mono is None else mono
        seen: dict[str, Condition] = {c.key: c for c in conditions}
        fired: list[str] = []
        for key, cond in seen.items():
            self._conds[key] = cond
            old = self.active.get(key)
            a = (Alert(key, cond.severity, cond.title, cond.detail, now, "pending",
                       last_true=now, since_m=m, true_m=m) if old is None else
                 replace(old, severity=cond.severity, title=cond.title, detail=cond.detail,
                         last_true=now, gone_since=None, gone_m=None, true_m=m))
            began = a.since_m if a.since_m is not None else a.since
            if a.state == "pending" and m - began >= cond.for_s:
                a = replace(a, state="firing", fired_at=now)
                fired.append(key)
            self.active[key] = a
        gone: list[tuple[Alert, str | None]] = []
        for key in [k for k in self.active if k not in seen]:
            a = self.active[key]
            hold = self._conds[key].hold_s if key in self._conds else 0.0
            if a.state == "pending":
                del self.active[key]  # never fired: nothing to clear
            elif key in ended:
                del self.active[key]
                gone.append((a, ended[key]))
            elif m - (a.gone_m if a.gone_m is not None else m) >= hold:
                # the hold counts from the first evaluation that found it gone, as
                # Prometheus's keep_firing_for does
                del self.active[key]
                gone.append((a, None))
            else:
                if a.gone_since is None:
                    self.active[key] = replace(a, gone_since=now, gone_m=m)
                continue
            self._conds.pop(key, None)
        self._link(seen)
        raised, cleared = [], []
        for key in [*fired, *(k for k in self.active if k not in fired)]:
            was = self.active.get(key)
            if was is None or was.state != "firing" or was.told or was.parent is not None:
                continue
            # fired on its own, or outlived the alert that explained it: an alert now
            # (an acknowledgement made of its group was of the parent's trouble)
            a = self.active[key] = replace(was, told=True, acked_by=None, acked_at=None)
            raised.append(a)
            self.history.append(AlertEvent(now, "firing", a.severity, a.title,
                                           a.description()))
        for a, why in gone:
            if not a.told:
                continue  # a consequence that ended under its parent: never said alone
            if why is not None:
                cleared.append(replace(a, ended=why))
                self.history.append(AlertEvent(now, "ended", a.severity, a.title, why,
                                               _lasted(a, now, m)))
            else:
                cleared.append(a)
                self.history.append(AlertEvent(now, "resolved", a.severity, a.title,
                                               lasted_s=_lasted(a, now, m)))
        return raised, cleared

    def _link(self, seen: dict[str, Condition]) -> None:
        """Each alert under the alert that explains it (its condition's ``parent``), as
        long as that one is active; an alert stays under its parent while the parent
        holds (a 5xx rate over a window outlasts the cooldown that made it). One level:
        a parent is never itself under another."""
        for key, a in list(self.active.items()):
            cond = seen.get(key)
            want = cond.parent if cond is not None and cond.parent else a.parent
            top = self._conds.get(want) if want is not None else None
            ok = (want is not None and want != key and want in self.active
                  and (top is None or top.parent is None))
            if (want if ok else None) != a.parent:
                self.active[key] = replace(a, parent=want if ok else None)
        under: dict[str, list[str]] = {}
        for a in self.active.values():
            if a.parent is not None:
                under.setdefault(a.parent, []).append(a.title)
        for key, a in list(self.active.items()):
            kids = tuple(under.get(key, ()))
            if kids != a.consequences:
                self.active[key] = replace(a, consequences=kids)

    def acknowledge(self, who: str, now: float, key: str | None = None) -> list[Alert]:
        """Mark every firing, unacknowledged alert as seen by ``who``; returns them.
        ``key``: that alert alone, with the alerts under it when it explains some (a
        group is acknowledged by its parent).

        An acknowledged alert stays on screen (dimmed) until it clears; it is not sent
        again. A new alert after it is not covered."""
        done = []
        for k, a in self.active.items():
            if key is not None and k != key and a.parent != key:
                continue
            if a.state == "firing" and a.acked_by is None:
                self.active[k] = replace(a, acked_by=who, acked_at=now)
                done.append(self.active[k])
                self.history.append(AlertEvent(now, "acknowledged", a.severity, a.title,
                                               f"by {who}"))
        return done

    def adopt_ack(self, key: str, who: str, at: float) -> Alert | None:
        """An acknowledgement made in another session (the shared book, a silence): the
        alert, now marked, or None when it is not firing here or is already
        acknowledged. The alerts under it are acknowledged with it (they are not sent
        on their own, so no other session or silence names them)."""
        a = self.active.get(key)
        if a is None or a.state != "firing" or a.acked_by is not None:
            return None
        if self.run_began is not None and at < self.run_began - ACK_SLACK_S:
            return None  # made in an earlier run of the pod: not for this one
        self.active[key] = replace(a, acked_by=who, acked_at=at)
        self.history.append(AlertEvent(at, "acknowledged", a.severity, a.title, f"by {who}"))
        for k, kid in list(self.active.items()):
            if kid.parent == key and not kid.told and kid.acked_by is None:
                self.active[k] = replace(kid, acked_by=who, acked_at=at)
        return self.active[key]

    def new_run(self, now: float, why: str) -> list[Alert]:
        """The pod's run ended and another began (``pod_run``): what belonged to the old
        run ends with it. Pending alerts are dropped (their ``for:`` counts afresh in the
        new run), and a firing alert's acknowledgement is withdrawn: an ack was for what
        the operator saw then, not for the same trouble on a new run. Returns the alerts
        whose acknowledgement was withdrawn."""
        self.run_began = now
        out = []
        for key, a in list(self.active.items()):
            if a.state == "pending":
                del self.active[key]
            elif a.acked_by is not None:
                self.active[key] = replace(a, acked_by=None, acked_at=None)
                out.append(self.active[key])
        if out:
            self.history.append(AlertEvent(now, "acknowledged", "info",
                                           f"acknowledgements withdrawn: {why}",
                                           ", ".join(a.title for a in out)[:200]))
        return out

    def event(self, ev: AlertEvent) -> None:
        """Record something that happened once (a failed operation)."""
        self.history.append(ev)

    def sorted(self) -> list[Alert]:
        """Firing before pending, unacknowledged before acknowledged, then by severity
        and age."""
        return sorted(self.active.values(), key=lambda a: (
            a.state != "firing", a.acked_by is not None, SEVERITY_ORDER[a.severity], a.since))

    def firing(self) -> list[Alert]:
        return [a for a in self.sorted() if a.state == "firing"]

    def told(self) -> list[Alert]:
        """The firing alerts that stand on their own (what the webhook and Alertmanager
        know of): not the consequences under a parent."""
        return [a for a in self.firing() if a.told]


def grouped(alerts: Iterable[Alert]) -> list[tuple[Alert, tuple[Alert, ...]]]:
    """Alerts as the screens draw them: each with the alerts it explains under it, in
    the order given; an alert whose parent is not among them stands on its own."""
    alerts = list(alerts)
    keys = {a.key for a in alerts}
    under: dict[str, list[Alert]] = {}
    for a in alerts:
        if a.parent is not None and a.parent in keys:
            under.setdefault(a.parent, []).append(a)
    return [(a, tuple(under.get(a.key, ()))) for a in alerts
            if a.parent is None or a.parent not in keys]


def _working_hours(profile: Profile, now: float) -> bool:
    from zoneinfo import ZoneInfo

    s = profile.schedule
    local = dt.datetime.fromtimestamp(now, ZoneInfo(s.timezone))
    day = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")[local.weekday()]
    hm = (local.hour, local.minute)
    start = tuple(int(x) for x in s.start.split(":"))
    stop = tuple(int(x) for x in s.stop.split(":"))
    return day in s.days and start <= hm < stop


def observe_pod(book: FaultBook, pod: PodSnapshot | None, profile: Profile,
                settings: Settings, now: float) -> dict[str, str]:
    """A pod reading into the GPU fault book (``gpu_faults``); the alert keys of faults
    that ended with their pod, and why."""
    if pod is None:
        return {}
    timing = settings.alerts
    now_true = ([] if pod.status in STOPPED else
                gpu_conditions(pod.gpus, set(profile.slots), now, timing.for_s, timing.hold_s))
    return book.observe(pod.pod_id, pod.status, pod.started_at, pod.gpus, now_true, now)


def stop_event(stop: PlannedStop, run: PodRun | None = None) -> Condition:
    """The one event a planned stop raises (instead of its slots' and agent's outages):
    its cause and who, "pod stopped (idle) by watchdog at 17:55"."""
    detail = "its slots and agent stop with it: not an outage; r resumes it"
    if run is not None:
        severity: Severity = "info"
        if run.cause in ("provider", "unknown"):
            # nobody here meant it (the provider, or someone at its console): the slots
            # are down for their users. One WARN says so (not a CRIT per slot and the
            # agent): a teammate's stop in the provider's console reads the same
            severity = "warn"
            detail = ("not by its watchdog or this console (the provider, or someone at "
                      "its console): its slots stopped with it; r resumes it, "
                      "f falls back to another GPU kind")
        return Condition("stopped", severity, run.event_title(fmt.clock(run.at)[:5]
                                                              if run.at is not None else ""),
                         detail)
    by = f" by {stop.by}" if stop.by else ""
    text = stop.text(fmt.clock(stop.at)[:5])
    return Condition("stopped", "info", f"pod {text}{by}" if stop.made else text + by,
                     detail)


def run_of(pod: PodSnapshot | None, agent_seen: PodSnapshot | None, now: float,
           run: PodRun | None = None) -> PodRun | None:
    """The pod's run: the session's (it saw every reading), else this reading's alone."""
    if run is not None and pod is not None and run.pod_id == pod.pod_id:
        return run
    return advance(None, RunReading(now, pod, agent_seen))


def evaluate(snap: DeploymentSnapshot | None, pod: PodSnapshot | None, profile: Profile,
             settings: Settings, now: float, failures: Iterable[Condition] = (),
             faults: FaultBook | None = None, agent_seen: PodSnapshot | None = None,
             run: PodRun | None = None) -> list[Condition]:
    """The conditions true now. ``faults``: the session's GPU fault book, already told of
    this reading (None: a one-shot reading, judged alone). ``agent_seen``: the last
    reading of this pod in which its agent answered (a stop is known from it after the
    agent has gone with its pod). ``run``: the pod's run as the session follows it
    (``pod_run``; None: derived from this reading alone)."""
    from pod_agent.gpuinfo import version_tuple
    from pod_agent.profile import MAX_GPU_UTIL_PER_GPU as max_per_gpu

    out: list[Condition] = list(failures)
    timing = settings.alerts
    if faults is None:
        faults = FaultBook()
        observe_pod(faults, pod, profile, settings, now)
    if agent_seen is None and pod is not None and not pod.agent_error:
        agent_seen = pod
    run = run_of(pod, agent_seen, now, run)
    stop = run.planned_stop() if run is not None else None
    stopped = pod is not None and pod.status in STOPPED
    if stop is not None:
        # a stop somebody meant takes the slots and the agent with it: one event says
        # so, not a CRIT per slot and an unreachable agent
        out.append(stop_event(stop, run))
    if snap is not None and not stopped and stop is None:
        for s in snap.slots:
            th = settings.thresholds_for(s.slot, profile)
            agent_state = (pod.agent_slots.get(s.slot, {}).get("state")
                           if pod is not None else None)
            if startup.shown_health(s.health, agent_state) == "starting":
                # the agent is bringing it up: expected, not an outage
                out.append(Condition(f"starting:{s.slot}", "info", f"{s.slot} starting",
                                     f"agent: {agent_state or 'starting'}"))
            elif s.health != "up":
                out.append(Condition(f"down:{s.slot}", "crit", f"{s.slot} down",
                                     s.error or s.health_detail, timing.down_for_s,
                                     timing.hold_s))
            elif s.probe_ok is False:
                out.append(Condition(f"probe:{s.slot}", "crit",
                                     f"{s.slot} up but completions fail", s.probe_detail))
            if s.figures is None or s.health != "up":
                continue  # a slot that is not up has no live figures to judge
            for fig, rule in catalog.thresholds():
                value = s.figure(fig.key, th)
                if value is not None and rule.breached(value, th):
                    out.append(Condition(f"{rule.alert}:{s.slot}", "warn",
                                         rule.title(s.slot, value, th), rule.hint,
                                         timing.for_s, timing.hold_s))
    per_gpu: dict[int, float] = {}
    for name, slot in profile.slots.items():
        util = slot.gpu_util
        if pod is not None and name in pod.agent_slots:
            util = float(pod.agent_slots[name].get("gpu_util", util))
        for g in slot.gpus:
            per_gpu[g] = per_gpu.get(g, 0.0) + util
    for g, total in sorted(per_gpu.items()):
        if total > max_per_gpu + 1e-9:
            out.append(Condition(f"util:{g}", "crit", f"GPU {g} gpu_util "
                                 f"{catalog.Beyond(total, max_per_gpu):.2f} > {max_per_gpu:g}"))
    if pod is not None:
        if pod.p2p_disabled:
            out.append(Condition("p2p", "info", "P2P disabled on this host",
                                 "NCCL_P2P_DISABLE=1 + --disable-custom-all-reduce (slower TP)"))
        have, want = version_tuple(pod.host_cuda), version_tuple(profile.min_cuda)
        if have and want and have < want:  # an unreadable version is not judged
            out.append(Condition("cuda", "crit", f"host driver CUDA {pod.host_cuda} < "
                                 f"{profile.min_cuda}"))
        # the pod's working hours on the pod's clock (the agent's, which its stops
        # follow; the demo's runs hours from this machine's), this machine's if unsaid.
        # A reading without the agent (busy restarting a slot, timed out on a loaded
        # machine) keeps the clock of its last answer: the demo's pod is at noon while
        # this machine is at 03:00. Such a reading may still hold a plan, the exporter's
        # (``gpu_metrics``), which has no clock: a plan counts only with its pod's time
        seen_plan = (agent_seen.stop_plan if agent_seen is not None
                     and agent_seen.pod_id == pod.pod_id else None)
        pod_now = next((p.pod_clock(now) for p in (pod.stop_plan, seen_plan)
                        if p is not None and p.pod_now is not None), None)
        if pod.status == "RUNNING" and stop is None and not _working_hours(
                profile, now if pod_now is None else pod_now):
            rate = f" at ${pod.cost_per_hr:.2f}/h" if pod.cost_per_hr else ""
            out.append(Condition("hours", "warn", f"pod running outside working hours{rate}"))
        plan = pod.stop_plan
        if plan is not None and stop is None and pod.watchdog_armed is not False and (
                plan.warning or plan.grace_until):
            left = pod.stop_in_s(now)
            mins = f"{max(0, round((left or 0) / 60))} min"
            title = (f"pod stop held {mins}: requests running" if plan.grace_until else
                     f"pod stops in {mins} ({plan.next_reason}) — w extends")
            out.append(Condition("stop-soon", "warn", title, "press w: +1h, +2h or until "
                                 "a time; the pod's watchdog and `down` both honour it"))
        if plan is not None and plan.memory_warning:
            out.append(Condition("memory-guard", "warn", "memory guard about to stop a slot",
                                 plan.memory_warning))
        if plan is not None and plan.skew_s is not None and abs(plan.skew_s) > 120:
            out.append(Condition("pod-clock", "warn", f"pod clock {plan.skew_s:+.0f} s off "
                                 "this machine's", "the pod's clock decides when it stops; "
                                 "times shown are the pod's"))
        if plan is not None and plan.failing_since and stop is None:
            # the one safeguard that saves money, not working (issue 42): never silent
            out.append(Condition("watchdog-failing", "crit", f"watchdog failing since "
                                 f"{fmt.wall_time(plan.failing_since)}: "
                                 f"{plan.failing_error or 'unknown error'}",
                                 f"{plan.failing_ticks} tick(s) in a row; the scheduled "
                                 "stop still comes, an idle stop may not: the agent's log "
                                 "has the traceback (pod-agent status --json)"))
        if pod.last_watchdog_result and "FAILED" in pod.last_watchdog_result:
            out.append(Condition("watchdog", "crit", "watchdog stop FAILED",
                                 pod.last_watchdog_result))
        # a source that fails once is a blip; one that keeps failing is an alert
        if pod.agent_error and stop is None:
            out.append(Condition("agent", "warn", "pod agent unreachable", pod.agent_error,
                                 timing.down_for_s))
        if pod.provider_error:
            out.append(Condition("provider", "warn", "RunPod API error", pod.provider_error,
                                 timing.down_for_s))
        # heat, throttling, strays: what the GPUs say now — not while the pod is being
        # stopped on purpose (its slots' processes go, its exporter's last samples age)
        if not stopped and not (run is not None and run.planned):
            out += [c for c in gpu_conditions(pod.gpus, set(profile.slots), now,
                                              timing.for_s, timing.hold_s)
                    if not is_hardware(c)]
        # hardware faults: until the GPU is seen healthy or the pod is gone, readings
        # or not (a stopped pod repaired nothing)
        out += faults.conditions(pod.pod_id)
        ext = extension_warning(plan, now)
        if ext is not None and stop is None:
            out.append(ext)
    if snap is not None and snap.prometheus_error:
        out.append(Condition("prometheus", "info", "Prometheus unreachable: scraping slots "
                             "directly", snap.prometheus_error, timing.down_for_s))
    return out


def extension_warning(plan: StopPlan | None, now: float) -> Condition | None:
    """An extension about to end, said before it does (its ``warn_before``, 10 min when
    the agent does not say, on the pod's clock): warn when its end stops the pod, info
    when the schedule just applies again."""
    if plan is None or (plan.warning and plan.next_reason == "extension ends"):
        return None  # the stop's own warning says it
    left = plan.extension_left(now)
    before = plan.warn_before_s if plan.warn_before_s else EXTENSION_WARN_S
    if left is None or left <= 0 or left > before:
        return None
    mins = f"{max(1, round(left / 60))} min"
    by = f" (by {plan.extension_by})" if plan.extension_by else ""
    if plan.extension_stops_at_end is False:
        return Condition("extension-ends", "info", f"extension{by} ends in {mins}: the "
                         "schedule applies again", "w: +1h, +2h or until a time")
    return Condition("extension-ends", "warn", f"extension{by} ends in {mins}: the pod "
                     "stops then", "press w: +1h, +2h or until a time")


async def notify(url: str, raised: list[Alert], cleared: list[Alert], source: str,
                 timeout_s: float = 5.0) -> str | None:
    """POST a Slack-compatible message about changes; return an error text or None."""
    if not raised and not cleared:
        return None
    icon = {"crit": ":red_circle:", "warn": ":large_orange_circle:", "info": ":information_source:"}
    lines = [f"{icon[a.severity]} {a.title}" + (f" — {d}" if (d := a.description()) else "")
             for a in raised]
    lines += [f":white_check_mark: cleared: {a.title}" if a.ended is None else
              f":black_square_for_stop: {a.ended}: {a.title}" for a in cleared]
    payload = {"text": f"[{source}]\n" + "\n".join(lines)}
    import httpx  # here, not at the top: the console's first frame does not wait for it

    try:
        # httpx's timeout is per read: a server dripping a byte a second never trips
        # it. One deadline covers the whole exchange.
        async with asyncio.timeout(timeout_s):
            async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as c:
                r = await c.post(url, content=json.dumps(payload),
                                 headers={"Content-Type": "application/json"})
        return None if r.status_code < 400 else f"webhook HTTP {r.status_code}"
    except TimeoutError:
        return f"webhook failed: no answer within {timeout_s:g} s"
    except httpx.HTTPError as exc:
        return f"webhook failed: {type(exc).__name__}"
