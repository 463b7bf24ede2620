"""What a console runs on, without Textual: the context, the view and the staged start.

The headless commands (``status``, ``rebalance``, ``up``, ``down``) build the same
context as the TUI; keeping these types here, below the app, means building it
never loads Textual (import contracts in ``pyproject.toml`` hold that line).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from msgspec import Struct, field

from console.model.history import History
from console.sources.collect.poller import DeploymentPoller
from console.sources.collect.targets import SlotTarget

if TYPE_CHECKING:
    from console.config.settings import GatewaySettings, Settings, SlotThresholds
    from console.model.alerts import Alert, AlertEvent
    from console.model.fleet import FleetSnapshot
    from console.model.gateway import GatewaySnapshot
    from console.model.pod_run import PodRun
    from console.model.pod_stop import PlannedStop
    from console.model.snapshot import DeploymentSnapshot, PodSnapshot
    from console.model.stall import Stall
    from console.operations.planner import Planner
    from console.operations.registry import OperationRegistry
    from console.session.deployment import Deployment
    from console.session.first_poll import FirstPoll
    from console.sources.agent_client import AgentClient, Transport
    from console.sources.collect.pod import PodCollector
    from pod_agent.profile import Profile


class Demo(Protocol):
    """What a console asks of the demo that built its context (``console.demo`` sits
    above the session: the session knows it by this alone)."""

    def faults(self, pod_id: str | None = None) -> list[tuple[str, str, Callable[[], Any]]]:
        """(title, what it does, how to cause it): the command palette's fault entries,
        on ``pod_id``'s pod (the console's own: each context of a fleet has its pod)."""
        ...


class ConsoleContext(Struct):
    """Everything a console needs, built by ``make_context`` (CLI) or the demo."""

    settings: Settings
    profile_name: str
    profile: Profile
    poller: DeploymentPoller
    registry: OperationRegistry
    history: History
    pod_collector: PodCollector | None = None
    transport: Transport | None = None
    demo: Demo | None = None
    clock: Callable[[], float] = time.time
    rotate_s: float = 15.0
    planner: Planner | None = None
    on_exit: list[Callable[[], Any]] = field(default_factory=list)
    agent: AgentClient | None = None
    """The pod agent (every agent command goes through it); unconfigured in wall mode."""
    config: Path | None = None
    """The config file it was built from (``--config``): the fleet reads every context
    of it."""
    pod_rotate_s: float = 0.0
    """Wall: seconds on each context's pod before the next one (0: stay)."""
    deployment: Deployment | None = None
    """The composition root all of the above came from (``make_context``): a pod switch
    is ``deployment.switch_pod``, and everything here follows it."""


class SwitchRequest(Struct, frozen=True):
    """What the console exits with to be reopened on another context's pod."""

    context: str


class ConsoleView(Struct, frozen=True):
    """What the screens show about the deployment itself: known before the context is."""

    profile_name: str
    targets: tuple[SlotTarget, ...]
    read_only: bool
    demo: bool
    refresh_s: float
    plot_refresh_s: float
    rotate_s: float = 15.0
    context: str | None = None
    """The config's context this console shows (None: a config without contexts)."""
    contexts: tuple[str, ...] = ()
    theme: str = "default"
    """The config's ``theme:`` (one of ``console.config.defaults.THEMES``)."""

    @property
    def title(self) -> str:
        """The header's name for what is shown: the context first, when there are some."""
        return f"{self.context} · {self.profile_name}" if self.context else self.profile_name


class StagedStart(Struct):
    """A first frame from the boot plan; ``finish`` builds the context (in a thread)."""

    view: ConsoleView
    poller: DeploymentPoller
    history: History
    finish: Callable[[DeploymentPoller, History], ConsoleContext]
    """Typed settings + validated profiles → context. It reuses the poller and history it
    is given when they match what the validated settings would build."""
    first_poll: FirstPoll | None = None
    """The first poll, begun in a thread as soon as the plan was read (``first_poll.py``):
    the session's first poll takes its snapshot. None: the session polls first itself."""


class ReplayMark(Struct, frozen=True):
    """What the header says while a recording is shown (``console/session/record``)."""

    badge: str
    """``REPLAY`` (a recording) or ``PAUSED`` (the live pause)."""
    clock: str
    """The recorded time shown (``03:10:05``)."""
    day: str
    play: str
    """``▶ 10×`` or ``paused``."""
    behind_s: float | None = None
    """The live pause: how far the poll shown is behind the last one."""
    ahead: History | None = None
    """The plots' points around the cursor: the history as it stood ``AROUND_S`` after
    the poll shown (or at the tape's end), so that a replay draws the recorded hour
    around the cursor, not only the hour up to it. None: the state's own history."""


class ConsoleState(Struct, frozen=True):
    """Everything a screen shows, from one poll: the session builds it
    (``Session.state``), the app hands it to every open screen after each poll, and the
    screens render it and never read the app back."""

    view: ConsoleView
    ready: bool
    """The full context has loaded (plots, pod state, alerts and operations exist)."""
    now: float
    snapshot: DeploymentSnapshot | None
    pod: PodSnapshot | None
    alerts: tuple[Alert, ...]
    """Active alerts, most severe and oldest first."""
    stale: str | None
    """Why the numbers are not fresh (a failed poll, a stale slot), or None."""
    history: History
    """The plots' bounded ring buffers (read-only for screens)."""
    allowed: frozenset[str]
    """Operation ids the registry would run (none in read-only mode)."""
    gpus: dict[str, str] = field(default_factory=dict)
    """Slot → its GPUs as shown (``0,1``)."""
    utils: dict[str, float] = field(default_factory=dict)
    """Slot → gpu_util in effect: the agent's when it reports one, else the profile's."""
    states: dict[str, str] = field(default_factory=dict)
    """Slot → the agent's state for it (``ready``, ``starting``…), empty when unknown."""
    operation: str | None = None
    """The dangerous operation running now (its title), shown until it ends."""
    alert_history: tuple[AlertEvent, ...] = ()
    """Alert events (fired, resolved, acknowledged, failed operations), oldest first."""
    thresholds: dict[str, SlotThresholds] = field(default_factory=dict)
    """Slot → its ``SlotThresholds`` (cell colours); empty until the settings have loaded."""
    fleet: FleetSnapshot | None = None
    """Every context's pod while the fleet is shown."""
    polled_at: float | None = None
    """When the poll that brought ``snapshot``, ``pod`` and ``alerts`` ran (None: none yet)."""
    ages: dict[str, float] = field(default_factory=dict)
    """Seconds since ``"pod"`` (the header's pod fields) and ``"gpus"`` (the GPU line) were
    read, for those older than one refresh + 0.5 s: shown beside them (see
    ``console.session.session``)."""
    spend_month: float | None = None
    """$ since the first of the month in the profile's zone, every run of the pod counted."""
    stop: PlannedStop | None = None
    """The stop somebody meant that the pod is in (being made, or made): the header says
    "stopped at HH:MM (reason)" instead of a countdown."""
    phases: dict[str, str] | None = None
    """Slot → its start-up phase cell now (``startup.phase_cells``, counted on from the
    agent's reading); None: derive it from ``pod`` as read (a replay)."""
    run: PodRun | None = None
    """The pod's run (``console.model.pod_run``): its state, cause and who; None before
    the first pod reading, and in a recording."""
    gpu_marks: dict[int, str] = field(default_factory=dict)
    """GPU index → what is wrong with it (``XID 79``, ``ECC``, ``REMAP``, ``HOT``)."""
    stalled: dict[str, Stall] = field(default_factory=dict)
    """Slot → its stall (requests running, no token for ``alerts.stall_after_s``): the
    row says STALLED (``console.model.stall``)."""
    replay: ReplayMark | None = None
    """Shown from a recording (a replay, the live pause): what the header says; the
    state is then read-only."""
    gateway: GatewaySnapshot | None = None
    """The gateway's last reading (LiteLLM), None when none is watched."""
    idle_source: str = "slots"
    """``gateway.idle_source``: what the idle countdown counts as activity."""
    active_window_s: float = 3600.0
    """``gateway.active_window_s``: "who is using it" looks this far back."""
    stall_after_s: float = 30.0
    """``alerts.stall_after_s``: how long with no token a slot is STALLED (the help says
    the value)."""
    gateway_limits: GatewaySettings | None = None
    """``gateway``'s settings: its limits colour the header's gateway field as its alerts
    judge it (None: the defaults, e.g. a recording)."""

    @property
    def slot_marks(self) -> dict[str, str]:
        """Slot → the worst mark of the GPUs it runs on (none: not in it)."""
        out: dict[str, str] = {}
        for slot, gpus in self.gpus.items():
            for g in gpus.split(","):
                mark = self.gpu_marks.get(int(g)) if g.strip().isdigit() else None
                if mark is not None and (slot not in out or out[slot] == "HOT"):
                    out[slot] = mark
        return out


def slot_columns(view: ConsoleView, pod: PodSnapshot | None
                 ) -> tuple[dict[str, str], dict[str, float], dict[str, str]]:
    """GPUs, effective gpu_util and agent state per slot: one place computes them."""
    agent = pod.agent_slots if pod else {}
    gpus = {t.slot: ",".join(map(str, t.gpus)) for t in view.targets}
    utils = {t.slot: float(agent.get(t.slot, {}).get("gpu_util", t.gpu_util))
             for t in view.targets}
    states = {t.slot: str(agent.get(t.slot, {}).get("state", "")) for t in view.targets}
    return gpus, utils, states


def view_of(ctx: ConsoleContext) -> ConsoleView:
    return ConsoleView(profile_name=ctx.profile_name, targets=ctx.poller.targets,
                       read_only=ctx.registry.read_only,
                       demo=ctx.demo is not None or ctx.settings.demo,
                       refresh_s=ctx.settings.refresh_s,
                       plot_refresh_s=ctx.settings.plot_refresh_s, rotate_s=ctx.rotate_s,
                       context=ctx.settings.context,
                       contexts=tuple(ctx.settings.context_names),
                       theme=ctx.settings.theme)


def state_path(settings: Settings, name: str) -> Path:
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    return settings.state_dir / name
