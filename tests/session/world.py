"""A console's sources in process, on an injected clock: what the session tier drives.

The slots' source and the pod's source answer like the real ones (a
``DeploymentSnapshot`` stamped with the clock, points added to the plots' history; a
``PodSnapshot`` as RunPod and the agent describe it), from values a test sets; nothing
starts a process, opens a socket or waits on real time. The rest is the real thing: the
settings, today's profile (``profiles/10-rtx6000-2x.yaml``, Asia/Seoul), the alert rules,
the spend book on disk, the operation registry."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.config.settings import AlertTiming, Settings
from console.model.gpu_state import GpuReport
from console.model.history import History
from console.model.model_figures import ModelFigures
from console.model.snapshot import DeploymentSnapshot, PodSnapshot, SlotSnapshot
from console.operations.audit import AuditLog
from console.operations.registry import OperationRegistry
from console.session.session import Session
from console.session.view import ConsoleContext
from console.sources.collect.targets import SlotTarget, targets_for
from pod_agent.profiles import load_profile
from tests.conftest import PROFILES


class Clock:
    """The wall clock and the monotonic clock, moved only when the test says: together
    (``advance``: time passing), or the wall clock alone (``step_wall``: NTP, a VM
    resumed). Called, it reads the wall clock (the sources stamp their readings so)."""

    def __init__(self, t: float, mono: float = 5_000.0) -> None:
        self._t = t
        self.m = mono

    @property
    def t(self) -> float:
        return self._t

    @t.setter
    def t(self, value: float) -> None:
        """Setting the time is time passing (both clocks move): ``clock.t = T``."""
        self.advance(value - self._t)

    def __call__(self) -> float:
        return self._t

    def wall(self) -> float:
        return self._t

    def monotonic(self) -> float:
        return self.m

    def advance(self, s: float) -> None:
        self._t += s
        self.m += s

    def step_wall(self, s: float) -> None:
        self._t += s


class Slots:
    """The slots' source: every slot up (or down, when named in ``down``), one point per
    poll in the plots' history. ``gate``, when set, holds each poll until it opens."""

    def __init__(self, targets: tuple[SlotTarget, ...], history: History,
                 clock: Clock) -> None:
        self.targets = targets
        self.history = history
        self.clock = clock
        self.prometheus_url: str | None = None
        self.timeout_s = 1.0
        self.down: set[str] = set()
        self.values: dict[str, dict[str, float | None]] = {}
        """Slot → catalog figures it reports (none: a slot without figures)."""
        self.gate: asyncio.Event | None = None
        self.calls = 0
        self.running = 0
        self.most_at_once = 0
        self.in_use_now: bool | None = None
        """What ``in_use`` answers (the real poller's reads its slots' counters)."""

    async def poll(self) -> DeploymentSnapshot:
        self.calls += 1
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            if self.gate is not None:
                await self.gate.wait()
            now = self.clock()
            slots = []
            for t in self.targets:
                up = t.slot not in self.down
                slots.append(SlotSnapshot(
                    slot=t.slot, served_model_name=t.served_model_name, port=t.port,
                    url=t.base_url, health="up" if up else "down",
                    health_detail="200" if up else "connection refused", fetched_at=now,
                    error=None if up else "/metrics: connection refused",
                    figures=ModelFigures(t.served_model_name, None, dict(self.values[t.slot]))
                    if up and t.slot in self.values else None))
                self.history.add(t.slot, "kv_cache_usage", now, 0.25)
            return DeploymentSnapshot("rtx6000-2x", tuple(slots), fetched_at=now)
        finally:
            self.running -= 1

    def in_use(self, slack_s: float) -> bool | None:
        return self.in_use_now

    async def aclose(self) -> None:
        return None


class GpuEndpoint:
    """The pod's GPU endpoint (``gpu_metrics_url``: the agent's exporter) as
    ``GpuMetrics`` answers for it: ``report`` now, or nothing in time (``hang``)."""

    url = "http://127.0.0.1:9400/metrics"

    def __init__(self, report: GpuReport) -> None:
        self.report = report
        self.hang = False
        self.error: Exception | None = None
        self.calls = 0

    async def fetch(self) -> GpuReport:
        self.calls += 1
        if self.hang:
            await asyncio.sleep(3600)
        if self.error is not None:
            raise self.error
        return self.report


class Pod:
    """The pod's source: ``pod`` as the provider and agent describe it now; its GPU
    endpoint, when ``gpu_metrics`` is set."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.pod = PodSnapshot(pod_id="p1", status="RUNNING", cost_per_hr=4.0,
                               started_at=clock(), gpu_name="NVIDIA RTX PRO 6000", gpu_count=2)
        self.timeout_s = 5.0
        self.calls = 0
        self.gpu_metrics: GpuEndpoint | None = None

    @property
    def pod_id(self) -> str | None:
        """The machine the deployment points at now (a fallback changes it)."""
        return self.pod.pod_id

    def run(self, started_at: float, status: str = "RUNNING") -> None:
        """The pod from now on: a run that started then (a stop, then a resume)."""
        self.pod = PodSnapshot(pod_id="p1", status=status, cost_per_hr=4.0,
                               started_at=started_at)

    async def poll(self) -> PodSnapshot:
        self.calls += 1
        from msgspec.structs import replace

        return replace(self.pod, fetched_at=self.clock())


async def inline(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """Blocking work run where it is asked for: deterministic, and a file that small."""
    return fn(*args, **kw)


@dataclass
class World:
    clock: Clock
    ctx: ConsoleContext
    slots: Slots
    pod: Pod
    session: Session
    notes: list[tuple[str, str]] = field(default_factory=list)

    @property
    def settings(self) -> Settings:
        return self.ctx.settings


def world(tmp: Path, t0: float, *, refresh_s: float = 2.0, history_s: float = 3600.0,
          run_blocking: Callable[..., Any] = inline, wall: bool = False,
          deployment: Any = None, **settings: Any) -> World:
    """A console on the fake sources, its session on the clock at ``t0``; ``deployment``:
    the composition root its context came from (what operations reach the pod by)."""
    clock = Clock(t0)
    profile = load_profile(PROFILES / "10-rtx6000-2x.yaml")
    settings.setdefault("alerts", AlertTiming(down_for_s=0, for_s=0, hold_s=0))
    s = Settings(profiles_dir=PROFILES, state_dir=tmp / "state", refresh_s=refresh_s,
                 history_s=history_s, **settings)
    history = History(s.history_s, s.refresh_s)  # as make_context builds it
    slots = Slots(targets_for(profile, "127.0.0.1"), history, clock)
    pod = Pod(clock)
    ctx = ConsoleContext(settings=s, profile_name="rtx6000-2x", profile=profile,
                         poller=slots,  # type: ignore[arg-type]
                         registry=OperationRegistry(AuditLog(tmp / "audit.jsonl")),
                         history=history, pod_collector=pod,  # type: ignore[arg-type]
                         clock=clock, deployment=deployment)
    notes: list[tuple[str, str]] = []
    session = Session(ctx, run_blocking=run_blocking, wall=wall,
                      note=lambda text, style: notes.append((text, style)))
    return World(clock, ctx, slots, pod, session, notes)
