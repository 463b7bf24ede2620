"""What one poll brought, and how old its numbers are: one room of the session (issue 46).

A :class:`Reading` is replaced whole at the end of each poll, so that what a screen
builds from it is of one poll. How old a number may be (issue 27, item 3): the pod and
its GPU line are read less often than the slots; once one of them is older than one
refresh + :data:`FRESH_SLACK_S` its age is shown beside it (:meth:`Reading.ages`). The
header says why nothing is fresh (:func:`stale_text`): a failed poll, none yet, or every
slot stale.
"""

from __future__ import annotations

from msgspec import Struct
from msgspec.structs import replace

from console.model import fmt
from console.model.pod_stop import PlannedStop
from console.model.snapshot import DeploymentSnapshot, PodSnapshot
from console.session.pod_reads import shifted

FRESH_SLACK_S = 0.5
"""A number on screen may be one refresh + this old before its age is shown beside it."""


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


class Reading(Struct, frozen=True):
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

    def ages(self, mono: float, refresh_s: float) -> dict[str, float]:
        """Ages of the pod fields (``pod``) and the GPU line (``gpus``) older than one
        refresh + ``FRESH_SLACK_S``: the screens print them beside those numbers. The
        GPU line is as old as its last read of the GPU endpoint, when it has one
        (``gpu_line``). Counted on the monotonic clock (``mono``)."""
        pod, read, read_m = self.pod, self.pod_read_at, self.pod_read_m
        if pod is None or read is None or read_m is None:
            return {}
        bound = refresh_s + FRESH_SLACK_S
        age = max(0.0, mono - read_m)
        out = {"pod": age} if age > bound else {}
        line_m = self.gpus_m
        g = max(0.0, mono - line_m) if line_m is not None and pod.gpus is not None \
            and pod.gpus.gpus else gpu_age(pod, age, read)
        if g is not None and g > bound:
            out["gpus"] = g
        return out

    def shifted(self, by: float) -> Reading:
        """The wall clock stepped ``by``: the wall times held here move with it (the
        stop plan's countdown, the reading's and the GPU line's times)."""
        return replace(
            self, pod=shifted(self.pod, by),
            pod_read_at=self.pod_read_at + by if self.pod_read_at is not None else None,
            gpus_at=self.gpus_at + by if self.gpus_at is not None else None)


def stale_text(failure: tuple[float, str] | None, reading: Reading) -> str | None:
    """Why the deployment's numbers are not fresh, said in the header: a failed poll
    (``failure``: when and why), none yet, or every slot stale. One dead slot is its own
    row's STALE, not the header's; a pod stopped on purpose is "stopped at …", not
    STALE."""
    if failure is not None:
        t, reason = failure
        return f"POLL FAILED {fmt.clock(t)}: {reason}"
    if reading.snapshot is None:
        return "waiting for first data…"
    return stale_header(reading.snapshot, reading.stop)
