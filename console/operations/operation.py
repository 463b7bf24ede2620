"""What an operation is: a spec, a handler, and up to three hooks the console's flow calls.

Each module of ``console/operations/ops/`` is one operation. It exports

* ``SPEC`` (:class:`OperationSpec`): its id, key, title and confirmation text;
* ``handler(deps, args, progress) -> Outcome``: the work, reaching the pod only through
  ``deps`` (:class:`OperationDeps`);

and may export

* ``preflight(facts, args) -> str | None``: why it cannot do anything now, said before
  anything is asked (the handler checks again when it runs);
* ``ask(facts, args, dialogs) -> args | None``: what it needs from the user (None: they
  cancelled), through :class:`Dialogs`, which the UI implements;
* ``question(facts, args) -> str``: the confirmation question, when ``SPEC.confirm``
  filled from :meth:`OperationFacts.fields` and the arguments is not enough.

Hooks read :class:`OperationFacts` (what the console knows from its last poll) and never
the app: the flow that calls them (``console/ui/operation_flow.py``) is the same for all.
Nothing heavy is imported at the top: the first frame imports every spec.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from msgspec import Struct

from console.model import fmt
from console.operations.registry import Handler, OperationSpec, Outcome, Progress

if TYPE_CHECKING:
    from console.config.settings import Settings
    from console.model.snapshot import DeploymentSnapshot, PodSnapshot
    from console.operations.planner import Planner
    from console.sources.agent_client import AgentClient
    from console.sources.collect.targets import SlotTarget
    from pod_agent.profile import Profile

Args = dict[str, Any]


class Provisioning(Protocol):
    """What resume and fallback need of ``console.operations.provision.Provisioner``."""

    async def resume_action(self, progress: Progress) -> Outcome: ...

    async def fallback_action(self, progress: Progress) -> Outcome: ...


class OperationDeps(Struct, frozen=True):
    """How handlers reach the pod and the console; None: not configured here."""

    agent: AgentClient | None
    refresh: Callable[[], bool]
    """Ask for a poll now (False: nothing polls)."""
    acknowledge: Callable[..., list[str] | None]
    """Mark the firing alerts seen (given an alert's key: that one, with its group);
    their titles, or None while there is no alert book."""
    provisioner: Provisioning | None = None
    on_rebalanced: Callable[[dict[str, float]], Awaitable[str]] | None = None
    """Write an applied split back into the laptop's profile; what it did, said."""
    smoke: Callable[[Callable[[Any], None]], Awaitable[Any]] | None = None
    bench: Callable[[str, Progress], Awaitable[tuple[dict[str, Any], Path]]] | None = None


class OperationFacts(Struct, frozen=True):
    """What the console knows when an operation is asked for: the hooks' only input."""

    now: float
    pod: PodSnapshot | None
    snapshot: DeploymentSnapshot | None
    settings: Settings
    profile_name: str
    profile: Profile
    targets: Sequence[SlotTarget]
    agent_configured: bool
    planner: Planner | None = None
    who: str | None = None
    """Who used the gateway lately (``model.gateway.who_text``), None without a gateway:
    what a stop's confirmation names beside the slots."""

    def pod_label(self) -> str:
        pod_id = (self.pod.pod_id if self.pod else None) or self.settings.pod.machine_id or "?"
        context = self.settings.context
        return f"{pod_id} (context {context})" if context else pod_id

    def fields(self) -> dict[str, str]:
        """What every confirmation may name: ``{pod}``, ``{profile}``, ``{cost}``."""
        return {"pod": self.pod_label(), "profile": self.profile_name,
                "cost": fmt.money(self.pod.cost_per_hr if self.pod else None)}


class Dialogs(Protocol):
    """The questions an ``ask`` hook can put; the UI draws them (``screens/modals.py``)."""

    async def choose_split(self, rows: list[dict[str, Any]], plan_lines: list[str],
                           predict: Callable[[str, float | None], str]
                           ) -> dict[str, float] | None: ...

    async def choose_watchdog(self, armed: bool | None, next_stop: str | None, now: float,
                              extension: str | None) -> dict[str, Any] | None: ...


OperationHandler = Callable[[OperationDeps, Args, Progress], Awaitable[Outcome]]
Preflight = Callable[[OperationFacts, Args], "str | None"]
Ask = Callable[[OperationFacts, Args, Dialogs], Awaitable["Args | None"]]
Question = Callable[[OperationFacts, Args], str]


class Operation(Struct, frozen=True):
    spec: OperationSpec
    handler: OperationHandler
    preflight: Preflight | None = None
    ask: Ask | None = None
    question: Question | None = None

    @classmethod
    def of(cls, module: ModuleType) -> Operation:
        """The operation a module of ``ops/`` defines (see this module's docstring)."""
        return cls(module.SPEC, module.handler, getattr(module, "preflight", None),
                   getattr(module, "ask", None), getattr(module, "question", None))

    def bound(self, deps: OperationDeps) -> Handler:
        """The handler as the registry calls it: ``(args, progress)``."""
        async def run(args: Args, progress: Progress) -> Outcome:
            return await self.handler(deps, args, progress)
        return run

    def confirmation(self, facts: OperationFacts, args: Args) -> str:
        if self.question is not None:
            return self.question(facts, args)
        return fill(self.spec.confirm, facts, args)


class _Known(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "?"  # a question never fails for want of a figure: it says it does not know


def fill(template: str, facts: OperationFacts, args: Args, **more: str) -> str:
    """``template`` with the facts' fields, the arguments as text, and ``more``."""
    known = _Known({k: str(v) for k, v in args.items()})
    known.update(facts.fields())
    known.update(more)
    return template.format_map(known)


# -- what several operations share ------------------------------------------------------
NO_AGENT = Outcome(False, "no pod agent configured (pod.ssh_host)", state="failed")


def configured_agent(deps: OperationDeps) -> AgentClient | None:
    """The agent, when one is configured (else the handler answers ``NO_AGENT``)."""
    return deps.agent if deps.agent is not None and deps.agent.configured else None


def agent_preflight(facts: OperationFacts, args: Args) -> str | None:
    """The preflight of every operation that runs through the pod agent."""
    if not facts.agent_configured:
        return "no pod agent configured (pod.ssh_host in the config)"
    return None


def relay_events(progress: Progress) -> Callable[[dict[str, Any]], None]:
    """The agent's progress and log events, as progress lines."""
    def on_event(ev: dict[str, Any]) -> None:
        if ev.get("kind") == "progress":
            progress(str(ev.get("step", "")), ev.get("fraction"), str(ev.get("message", "")))
        elif ev.get("kind") == "log":
            progress("", None, str(ev.get("line", "")))
    return on_event
