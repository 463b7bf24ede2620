"""Build a :class:`ConsoleContext` from settings: the same wiring for production and demo.

The demo passes its own transport (the agent as a local process) and its
RunPod base URL (the emulator); everything else — collectors, registry,
provisioner, alert rules — is the production code.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.config.settings import Settings
from console.model.history import History
from console.operations.audit import audit_log_for
from console.operations.ops import build_registry
from console.operations.planner import Planner
from console.operations.provision import ProvisionConfig, Provisioner, ProvisionResult
from console.session import deployment_ops
from console.session.deployment import Deployment, open_deployment
from console.session.deployment import ssh_transport as ssh_transport
from console.session.view import ConsoleContext
from console.sources.collect.poller import DeploymentPoller
from console.sources.remote import agent_command


def make_context(settings: Settings, *, read_only: bool = False, transport: Any = None,
                 transport_factory: Callable[..., Any] | None = None,
                 runpod_base: str | None = None, demo: Any = None,
                 provision_cfg: ProvisionConfig | None = None,
                 clock: Callable[[], float] = time.time,
                 probe_interval_s: float = 300.0,
                 history: History | None = None,
                 poller: DeploymentPoller | None = None) -> ConsoleContext:
    """The full context. ``history``/``poller`` (a staged start's) are kept when they are
    what these settings would build, so the first frame's data carries over."""
    dep = open_deployment(settings, clock)
    if demo is not None:
        dep.remote_profile_of = lambda lp: str(demo.remote_profile(lp, dep.machine_id))
    history = _history_kept(settings, history)
    if poller is not None and (poller.config_key() != dep.new_poller(history).config_key()
                               or poller.history is not history):
        poller = None
    # Wall mode needs no SSH key and never talks to the agent or RunPod's write API.
    parts = dep.wire(read_only=read_only, transport=transport, provider_base=runpod_base,
                     history=history, poller=poller)
    parts.poller.probe_interval_s = probe_interval_s
    provisioner = (_provisioner(dep, provision_cfg, transport_factory, demo)
                   if parts.provider is not None and not read_only else None)

    def refresh() -> None:
        """Until an app takes over (``PodConsoleApp.on_mount``), a refresh polls once."""
        asyncio.get_running_loop().create_task(parts.poller.poll())

    # read-only contexts are walls' (``watch --wall``, the web wall): they run nothing
    registry = build_registry(
        audit_log_for(settings), read_only, wall=read_only, agent=parts.agent,
        refresh=refresh, provisioner=provisioner,
        on_rebalanced=functools.partial(deployment_ops.write_back_split, dep),
        smoke=functools.partial(deployment_ops.smoke, dep),
        bench=functools.partial(deployment_ops.bench, dep))
    ctx = ConsoleContext(settings=settings, profile_name=dep.today.name,
                         profile=dep.today.profile, poller=parts.poller, registry=registry,
                         history=history,
                         pod_collector=parts.pods if parts.reads_the_pod else None,
                         transport=parts.transport, demo=demo, clock=clock,
                         planner=None if read_only else Planner(dep.today.profile,
                                                                settings.state_dir),
                         agent=parts.agent, deployment=dep)
    dep.on_switch.append(functools.partial(_follow, ctx, dep))
    if parts.provider is not None:
        ctx.on_exit.append(parts.provider.aclose)
    if demo is not None:
        ctx.on_exit.append(demo.stop)
    return ctx


def _history_kept(settings: Settings, history: History | None) -> History:
    """A staged start's history when it is what these settings would build, else new."""
    fresh = History(settings.history_s, settings.refresh_s)
    if history is None or (history.window_s, history.maxlen) != (fresh.window_s,
                                                                 fresh.maxlen):
        return fresh
    return history


def _provisioner(dep: Deployment, cfg: ProvisionConfig | None,
                 transport_factory: Callable[..., Any] | None, demo: Any) -> Provisioner:
    """``f`` and ``r``: the deployment's provisioner; when it has brought a pod up, the
    deployment moves there and the plots fill from Prometheus."""
    parts = dep.parts
    assert parts is not None and parts.provider is not None
    tasks: set[asyncio.Task[Any]] = set()

    def factory(pod: Any, agent_cmd: str) -> Any:
        if transport_factory is not None:
            return transport_factory(pod, agent_cmd)
        return dep.pod_transport(pod, agent_cmd)

    async def on_ready(res: ProvisionResult) -> None:
        new_t = None
        if parts.agent.configured:
            new_t = (demo.transport_for(res.pod) if demo is not None
                     else factory(res.pod, agent_command(dep.settings.pod.agent_dir)))
        switch_pod(dep, res, new_t)
        if parts.poller.prometheus_url:
            task = asyncio.get_running_loop().create_task(
                parts.poller.backfill(dep.backfill_step_s))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    return dep.provisioner(parts.provider, cfg=cfg, transport_factory=factory,
                           on_ready=on_ready, log=lambda s: None)


def _follow(ctx: ConsoleContext, dep: Deployment) -> None:
    """The context's own words for what the deployment runs (the poller, the pod
    collector and the agent are the deployment's own parts: they follow by themselves)."""
    moved_profile = ctx.profile_name != dep.today.name
    ctx.profile, ctx.profile_name = dep.today.profile, dep.today.name
    ctx.transport = dep.parts.transport if dep.parts is not None else None
    if moved_profile and ctx.planner is not None:
        ctx.planner = Planner(dep.today.profile, dep.settings.state_dir)


def switch_pod(dep: Deployment, res: ProvisionResult, transport: Any = None) -> None:
    """After ``f`` or ``r``: the deployment runs on the pod ``res`` names, at its address,
    with its profile; ``transport``: the new pod's agent connection (None: read-only)."""
    dep.switch_pod(res.pod.id, res.address.host, res.address.port_map, res.profile,
                   transport)


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "true", "yes")


def state_file(settings: Settings, name: str) -> Path:
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    return settings.state_dir / name
