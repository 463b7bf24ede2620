"""What a console runs on, without Textual: the context, the view and the staged start.

The headless commands (``status``, ``rebalance``, ``up``, ``down``) build the same
context as the TUI; keeping these types here, below the app, means building it
never loads Textual (import contracts in ``pyproject.toml`` hold that line).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .collect.poller import DeploymentPoller
from .collect.targets import SlotTarget
from .history import History

if TYPE_CHECKING:
    from pod_agent.profile import Profile

    from .actions.registry import ActionRegistry
    from .collect.pod import PodCollector
    from .settings import Settings


@dataclass
class ConsoleContext:
    """Everything a console needs, built by ``make_context`` (CLI) or the demo."""

    settings: Settings
    profile_name: str
    profile: Profile
    poller: DeploymentPoller
    registry: ActionRegistry
    history: History
    pod_collector: PodCollector | None = None
    transport: Any | None = None
    demo: Any | None = None
    clock: Callable[[], float] = time.time
    rotate_s: float = 15.0
    planner: Any | None = None
    on_exit: list[Callable[[], Any]] = field(default_factory=list)


@dataclass(frozen=True)
class ConsoleView:
    """What the screens show about the deployment itself: known before the context is."""

    profile_name: str
    targets: tuple[SlotTarget, ...]
    read_only: bool
    demo: bool
    refresh_s: float
    plot_refresh_s: float
    rotate_s: float = 15.0


@dataclass
class StagedStart:
    """A first frame from the boot plan; ``finish`` builds the context (in a thread)."""

    view: ConsoleView
    poller: DeploymentPoller
    history: History
    finish: Callable[[DeploymentPoller, History], ConsoleContext]
    """Typed settings + validated profiles → context. It reuses the poller and history it
    is given when they match what the validated settings would build."""


def view_of(ctx: ConsoleContext) -> ConsoleView:
    return ConsoleView(profile_name=ctx.profile_name, targets=ctx.poller.targets,
                       read_only=ctx.registry.read_only, demo=ctx.demo is not None,
                       refresh_s=ctx.settings.refresh_s,
                       plot_refresh_s=ctx.settings.plot_refresh_s, rotate_s=ctx.rotate_s)


def state_path(settings: Settings, name: str) -> Path:
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    return settings.state_dir / name
