"""Is this pod stop planned? (issue 30, finding 4)

A stop somebody meant — the watchdog's (idle, schedule, an extension's end), the
console's (``w s``, ``down``), or one made elsewhere and seen through the provider — takes
the slots and the agent with it. That is one event ("pod stopped at 18:00 (idle)"), not
a slot outage and not an unreachable agent. This module says whether the pod is being
stopped, or was, on purpose, from what the provider and the agent last said; the alert
rules then raise the one event instead of the outages (``alerts.evaluate``).

Pure: readings in, a verdict out. The session keeps the last reading in which the agent
answered (``agent_seen``), since an agent that stopped with its pod says nothing more.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from msgspec import Struct
from msgspec.structs import replace

from console.model.fmt import OVERDUE_S
from console.model.snapshot import PodSnapshot, SlotSnapshot

__all__ = ["OVERDUE_S", "PROBE_WAITS_FOR_IDLE", "PROBE_WAITS_FOR_POD",
           "PROBE_WAITS_FOR_TRAFFIC", "STOPPED", "PlannedStop", "planned_stop", "probe_hold",
           "probe_hold_unplanned", "slots_in_use", "stop_near"]

PROBE_WAITS_FOR_POD = "waiting for the pod's stop plan"
PROBE_WAITS_FOR_IDLE = ("the pod is idle: a completion probe is a request, and would keep "
                        "it running")
PROBE_WAITS_FOR_TRAFFIC = ("no stop plan is served here and the slots count no request but "
                           "this console's: the pod may be counting idle time, and a probe "
                           "would keep it running")


def probe_hold(pod: PodSnapshot | None, in_use: bool | None = None) -> str | None:
    """Why the console's completion probe must wait now; None when it may go.

    The probe is a real chat completion, and the agent's idle stop counts requests, not
    who sent them: on a pod nobody uses, a console (a wall display, on all night) probing
    every few minutes would be the one user that keeps it running. So the probe goes only
    while the pod is not counting idle time — it has traffic, or no idle limit — and not
    before the pod's first reading says which. Where neither the agent nor its exporter
    serves a stop plan (a wall without SSH, gpu_metrics_url or Prometheus), the slots' own
    request counters say it (``probe_hold_unplanned``)."""
    if pod is None:
        return PROBE_WAITS_FOR_POD
    plan = pod.stop_plan
    if plan is None:
        return probe_hold_unplanned(in_use)
    if plan.idle_after_s and not plan.busy:
        return PROBE_WAITS_FOR_IDLE
    return None


def probe_hold_unplanned(in_use: bool | None) -> str | None:
    """The probe's hold where no stop plan is known: it goes only while others' requests
    run (``in_use``: ``slots_in_use``); not knowing (no figures yet) is not knowing that
    it may. The laptop's profile is no guide to whether the pod counts idle time: the pod
    runs the copy it was given (the demo's sets an idle limit the file does not)."""
    return None if in_use is True else PROBE_WAITS_FOR_TRAFFIC


def slots_in_use(slots: Iterable[SlotSnapshot], own: Mapping[str, int]) -> bool | None:
    """Whether the slots' own request counters show requests that this console did not
    send: some running or waiting now, or more finished in the figures' window than
    ``own`` (slot → this console's probes over that window, counted generously: one too
    many only holds a probe, one too few would keep the pod up for ever). None when no
    slot has fresh figures."""
    known = False
    for s in slots:
        f = s.figures
        if f is None or s.stale_since is not None:
            continue
        known = True
        running = (f.value("running") or 0.0) + (f.value("waiting") or 0.0)
        done = sum(f.requests_by_reason.values())
        if running > own.get(s.slot, 0) or done - own.get(s.slot, 0) >= 1.0:
            return True
    return False if known else None

STOPPED = ("EXITED", "TERMINATED", "STOPPED")
"""Provider statuses of a pod that is not running because it was stopped."""
START_SLACK_S = 60.0
"""Clocks differ: evidence this much older than the run's start still belongs to it."""


class PlannedStop(Struct, frozen=True):
    """A stop somebody meant: why, by whom, when (our clock), and whether it is done."""

    pod_id: str | None
    reason: str
    by: str | None = None
    at: float | None = None
    done: bool = False
    """The provider says the pod is stopped (else: it is being stopped)."""
    made: bool = True
    """False: the watchdog's stop is due (its time has come) and nothing says yet that
    it is being made; its slots may go at any moment, as planned."""

    def text(self, clock: str) -> str:
        """"stopped at 18:00 (idle)", "stopping (idle)", "stop due now (idle)"
        (``clock``: ``at`` as shown)."""
        why = f" ({self.reason})" if self.reason else ""
        if self.done:
            return f"stopped at {clock}{why}" if self.at is not None else f"stopped{why}"
        return f"stopping{why}" if self.made else f"stop due now{why}"


def _this_run(pod: PodSnapshot, at: float | None) -> bool:
    """Whether an instant (ours) belongs to the pod's current run (not an earlier one)."""
    if at is None:
        return False
    return pod.started_at is None or at >= pod.started_at - START_SLACK_S


def planned_stop(pod: PodSnapshot | None, agent_seen: PodSnapshot | None,
                 now: float) -> PlannedStop | None:
    """The planned stop this pod is in (being made, or made), or None.

    ``pod``: the provider and agent now. ``agent_seen``: the last reading of the same pod
    in which the agent answered (``pod`` itself when it did). Evidence, first that holds:
    the agent's record of its last stop in this run (not a failed one); a ``stop-now``
    the console asked of the agent; a stop of the watchdog that is due (its time reached
    and not held by requests, not yet late); a provider that says the pod is stopped.
    """
    if pod is None:
        return None
    seen = agent_seen if agent_seen is not None and agent_seen.pod_id == pod.pod_id else None
    stopped = pod.status in STOPPED
    found: PlannedStop | None = None
    plan = seen.stop_plan if seen is not None else None
    if plan is not None and plan.last_stop_at is not None and plan.last_stop_ok is not False:
        at = plan.ours(plan.last_stop_at)
        if _this_run(pod, at):
            found = PlannedStop(pod.pod_id, plan.last_stop_reason or "stop",
                                plan.last_stop_by, at)
    if found is None and seen is not None:
        for act in seen.agent_actions:
            started = act.get("started_at")
            if (act.get("kind") == "stop-now" and act.get("state") != "failed"
                    and isinstance(started, int | float) and _this_run(pod, float(started))):
                found = PlannedStop(pod.pod_id, "stop-now", "console", float(started))
    if found is None and plan is not None and seen is not None \
            and seen.watchdog_armed is not False and not plan.grace_until:
        left = plan.stop_in(now)
        # the agent still answering with a stop long past its time: late, not planned
        late = pod.agent_error is None and left is not None and left < -OVERDUE_S
        due = None if left is None else now + left / (plan.clock_speed or 1.0)
        if left is not None and left <= 0 and not late and _this_run(pod, due):
            # the agent gone with its slots: being made; still answering: due
            found = PlannedStop(pod.pod_id, plan.next_reason or "stop", "watchdog", due,
                                made=pod.agent_error is not None)
    if found is None and stopped:
        found = PlannedStop(pod.pod_id, "stopped through the provider", None, None)
    if found is None:
        return None
    if stopped:
        return replace(found, done=True, made=True)
    return found


def stop_near(pod: PodSnapshot | None, now: float) -> bool:
    """The pod's stop is within its warning (``warn_before``; held by requests counts):
    the agent's flag, or the countdown itself (read since the warning began). The header
    colours the countdown then, and the key bar shows ``w`` whatever its width."""
    plan = pod.stop_plan if pod is not None else None
    if pod is None or plan is None or pod.watchdog_armed is False:
        return False
    if plan.warning or plan.grace_until:
        return True
    left = pod.stop_in_s(now)
    return left is not None and plan.warn_before_s is not None and left <= plan.warn_before_s
