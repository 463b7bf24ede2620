"""The refresh rate and what follows from it: one room of the session (issue 46).

The refresh rate has one owner, here. ``+``/``-`` change it (:meth:`Pacing.step`), and
what follows from it — the history's step, the request and pod timeouts, the backfill
step, the webhook's deadline, the fleet's cadence — is derived from it where it is used
(the properties below, read at each use), never copied at start. What the sources in use
hold of it is set again before every poll (:meth:`Pacing.apply`): a fallback or a
finished start may have replaced them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from console.config import defaults
from console.model.pod_stop import (
    PROBE_WAITS_FOR_IDLE,
    PROBE_WAITS_FOR_POD,
    PROBE_WAITS_FOR_TRAFFIC,
    probe_hold,
    probe_hold_unplanned,
)

if TYPE_CHECKING:
    from console.model.history import History
    from console.model.snapshot import PodSnapshot
    from console.session.view import ConsoleContext, StagedStart
    from console.sources.collect.poller import DeploymentPoller

REFRESH_STEPS = (1.0, 2.0, 5.0, 10.0, 30.0)
"""What + and - step through (the settings' refresh_s is where it starts)."""

Note = Callable[[str, str], None]


def next_refresh(current: float, direction: int) -> float:
    """The step after ``current`` (``direction`` > 0: faster, a shorter interval)."""
    if direction > 0:
        return max([x for x in REFRESH_STEPS if x < current - 1e-9] or [REFRESH_STEPS[0]])
    return min([x for x in REFRESH_STEPS if x > current + 1e-9] or [REFRESH_STEPS[-1]])


def webhook_timeout_s(refresh_s: float) -> float:
    """A webhook's or Alertmanager's deadline at this refresh."""
    return min(5.0, refresh_s * 4)


class PacingHost(Protocol):
    """What the pacing reads of its session: where the settings' refresh comes from,
    and the sources it paces."""

    ctx: ConsoleContext | None
    staged: StagedStart | None

    @property
    def poller(self) -> DeploymentPoller: ...

    @property
    def history(self) -> History: ...

    @property
    def pod(self) -> PodSnapshot | None: ...


class Pacing:
    """One session's refresh rate (see the module docstring)."""

    def __init__(self, host: PacingHost, note: Note) -> None:
        self.host = host
        self._note = note
        self.chosen: float | None = None
        """What +/- chose; None: the settings' (the boot plan's until they load)."""
        self._pause_said = False
        """Whether the log has said that the probes wait on an idle pod (said once)."""

    @property
    def refresh_s(self) -> float:
        """Seconds between polls: what +/- chose, else the settings'."""
        if self.chosen is not None:
            return self.chosen
        h = self.host
        if h.ctx is not None:
            return h.ctx.settings.refresh_s
        assert h.staged is not None, "a session runs on a context or a staged start"
        return h.staged.view.refresh_s

    @property
    def request_timeout_s(self) -> float:
        return defaults.request_timeout_s(self.refresh_s)

    @property
    def pod_timeout_s(self) -> float:
        return max(2.0, self.request_timeout_s * 2)

    @property
    def backfill_step_s(self) -> float:
        """Prometheus range queries: a point a refresh, at most 240 over the window."""
        return max(self.refresh_s, self.host.history.window_s / 240)

    @property
    def fleet_timeout_s(self) -> float:
        return 2 * max(5.0, self.refresh_s * 2)

    def step(self, direction: int) -> float | None:
        """+ (``direction`` > 0) or -: the new refresh, or None when it stays."""
        current = self.refresh_s
        new = next_refresh(current, direction)
        if new == current:
            return None
        self.chosen = new
        self.apply()
        return new

    def apply(self) -> None:
        """What follows from the refresh, applied to the sources in use now."""
        h = self.host
        h.history.fit_step(self.refresh_s)
        h.poller.timeout_s = self.request_timeout_s
        h.poller.probe_hold = self.probe_hold
        pods = h.ctx.pod_collector if h.ctx is not None else None
        if pods is not None:
            pods.timeout_s = self.pod_timeout_s
            if pods.gpu_metrics is not None:  # made with the refresh at start
                pods.gpu_metrics.timeout_s = self.pod_timeout_s

    def probe_hold(self) -> str | None:
        """Why the completion probe waits (``pod_stop.probe_hold``), read by the poller
        when one is due. Where no stop plan is served (no pod source, an agent out of
        reach, no exporter) the slots' own request counters say whether anyone but this
        session uses the pod: others' requests over the figures' window, this session's
        own probes and two refreshes discounted (``DeploymentPoller.in_use``). The log
        says it the first time the probes wait for an idle pod — once: a pod with sparse
        traffic goes idle and busy between the agent's looks all day."""
        h = self.host
        if h.ctx is None:
            held: str | None = PROBE_WAITS_FOR_POD
        else:
            in_use = h.poller.in_use(2 * self.refresh_s)
            held = (probe_hold(h.pod, in_use) if h.ctx.pod_collector is not None
                    else probe_hold_unplanned(in_use))
        if held in (PROBE_WAITS_FOR_IDLE, PROBE_WAITS_FOR_TRAFFIC) and not self._pause_said:
            self._pause_said = True
            self._note("completion probes wait while the pod is idle: a probe is a request, "
                       "and would keep the pod running", "dim")
        return held
