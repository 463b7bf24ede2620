"""Judging one reading: the spend book, the earlier spend and the alert rules meet here, for
the console's session, a fleet row and ``pod-console status`` alike. Its own module so that
the fleet and the commands judge a reading without importing the session that drives
polls (the session imports the fleet: a circle)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from msgspec import Struct, field
from msgspec.structs import replace

from console.model.conditions import Condition
from console.model.gpu_faults import FaultBook
from console.model.pod_run import PodRun
from console.model.pod_stop import PlannedStop
from console.model.snapshot import DeploymentSnapshot, PodSnapshot
from console.session.spend import SpendBook

if TYPE_CHECKING:
    from console.config.settings import Settings
    from pod_agent.profile import Profile


def day_zone(profile: Profile | None) -> dt.tzinfo | None:
    """Whose midnight starts the day's spend: the profile's schedule zone (the pod's
    working day, as its watchdog counts it), this machine's when there is no profile."""
    if profile is None:
        return None
    try:
        return ZoneInfo(profile.schedule.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        return None


class Judged(Struct, frozen=True):
    """One reading judged: the pod with today's earlier runs, the alert conditions true
    now, and this month's spend."""

    pod: PodSnapshot | None
    conditions: tuple[Condition, ...]
    spend_month: float | None
    ended: dict[str, str] = field(default_factory=dict)
    """Alert keys of GPU faults that ended with their pod, and how to say so."""
    stop: PlannedStop | None = None
    """The planned stop the pod is in (being made or made), if any."""


def judge(snapshot: DeploymentSnapshot | None, pod: PodSnapshot | None, book: SpendBook,
          profile: Profile, settings: Settings, now: float,
          failures: Iterable[Condition] = (), faults: FaultBook | None = None,
          agent_seen: PodSnapshot | None = None, run: PodRun | None = None) -> Judged:
    """Spend book + earlier spend + alert rules: the one place they meet (the console,
    the fleet and ``pod-console status`` all judge a reading here). The day and the month
    start at midnight in the profile's zone. ``faults``: the session's GPU fault book
    (None: this reading alone); ``agent_seen``: the last reading of the pod in which its
    agent answered; ``run``: the pod's run as the session follows it (None: this
    reading's alone)."""
    from console.model.alerts import evaluate, observe_pod, run_of

    zone = day_zone(profile)
    month = None
    if pod is not None:
        pod = replace(pod, spent_earlier_today=book.earlier_today(pod, now, zone),
                      day_zone=zone)
        month = book.this_month(pod, now, zone) if pod.pod_id else None
    faults = faults if faults is not None else FaultBook()
    ended = observe_pod(faults, pod, profile, settings, now)
    if agent_seen is None and pod is not None and not pod.agent_error:
        agent_seen = pod
    run = run_of(pod, agent_seen, now, run)
    conds = evaluate(snapshot, pod, profile, settings, now, failures, faults, agent_seen,
                     run)
    return Judged(pod, tuple(conds), month, ended,
                  run.planned_stop() if run is not None else None)


async def judge_once(snapshot: DeploymentSnapshot | None, pod: PodSnapshot | None,
                     profile: Profile, settings: Settings, now: float,
                     run_blocking: Callable[..., Awaitable[Any]] = asyncio.to_thread) -> Judged:
    """:func:`judge` for a one-shot reading (``status``, a fleet row): the spend book is
    read from the state directory (off the loop) and only read, never written."""
    book = await run_blocking(SpendBook, settings.spend_path, True)
    return judge(snapshot, pod, book, profile, settings, now)
