"""Build a :class:`ConsoleContext` from settings: the same wiring for production and demo.

The demo passes its own transport (the agent as a local process) and its
RunPod base URL (the emulator); everything else — collectors, registry,
provisioner, alert rules — is the production code.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.config.profile_file import write_split
from console.config.settings import Settings
from console.model.history import History
from console.operations.audit import audit_log_for
from console.operations.ops import build_registry
from console.operations.planner import Planner
from console.operations.provision import ProvisionConfig, ProvisionResult
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
    fresh_history = History(settings.history_s, settings.refresh_s)
    if history is None or (history.window_s, history.maxlen) != (
            fresh_history.window_s, fresh_history.maxlen):
        history = fresh_history
    if poller is not None and (poller.config_key() != dep.new_poller(history).config_key()
                               or poller.history is not history):
        poller = None
    # Wall mode needs no SSH key and never talks to the agent or RunPod's write API.
    parts = dep.wire(read_only=read_only, transport=transport, provider_base=runpod_base,
                     history=history, poller=poller)
    parts.poller.probe_interval_s = probe_interval_s
    client = parts.provider
    agent = parts.agent
    tasks: set[asyncio.Task[Any]] = set()

    def refresh() -> None:
        """Until an app takes over (``PodConsoleApp.on_mount``), a refresh polls once."""
        asyncio.get_running_loop().create_task(parts.poller.poll())

    provisioner = None
    if client is not None and not read_only:
        def factory(pod: Any, agent_cmd: str) -> Any:
            if transport_factory is not None:
                return transport_factory(pod, agent_cmd)
            return dep.pod_transport(pod, agent_cmd)

        async def on_ready(res: ProvisionResult) -> None:
            """``f`` brought up a new pod, or ``r`` resumed this one (at a new address,
            maybe): the deployment moves there, and the plots fill from Prometheus."""
            new_t = None
            if agent.configured:
                new_t = (demo.transport_for(res.pod) if demo is not None
                         else factory(res.pod, agent_command(settings.pod.agent_dir)))
            switch_pod(dep, res, new_t)
            if parts.poller.prometheus_url:
                task = asyncio.get_running_loop().create_task(
                    parts.poller.backfill(dep.backfill_step_s))
                tasks.add(task)
                task.add_done_callback(tasks.discard)

        provisioner = dep.provisioner(client, cfg=provision_cfg, transport_factory=factory,
                                      on_ready=on_ready, log=lambda s: None)

    async def on_rebalanced(values: dict[str, float]) -> str:
        return await asyncio.to_thread(write_split, dep.today.path, values,
                                       settings.state_dir / "profile-backups")

    audit = audit_log_for(settings)

    async def smoke(on_check: Callable[[Any], None]) -> Any:
        """Today's deployment as it is now (a pod switch moves it)."""
        from console.operations.smoke import plan_for, run_smoke

        client = parts.poller.client
        return await run_smoke(plan_for(dep.today.profile, dep.targets, settings, client),
                               client, on_check)

    async def bench(slot: str, progress: Any) -> tuple[dict[str, Any], Path]:
        """The benchmark of one slot of today's deployment, kept under the state dir."""
        from console.operations.benchmark.measure import PodFacts
        from console.operations.benchmark.runner import baseline_of, bench_and_record, plans_for
        from console.sources.collect.http import HttpClient

        prof = dep.today.profile
        plan = plans_for(dep.today.name, prof, dep.targets, settings, [slot])[0]
        pods = parts.pods
        pod = None
        if parts.reads_the_pod:
            with contextlib.suppress(Exception):  # where it ran is worth knowing, not vital
                pod = await asyncio.wait_for(pods.poll(), pods.timeout_s * 2)
        client = HttpClient()
        try:
            return await bench_and_record(plan, client, PodFacts.from_pod(pod),
                                          settings.state_dir, baseline_of(prof, slot),
                                          settings.bench.regression_pct, progress)
        finally:
            await client.aclose()

    # read-only contexts are walls' (``watch --wall``, the web wall): they run nothing
    registry = build_registry(audit, read_only, wall=read_only, agent=agent, refresh=refresh,
                              provisioner=provisioner, on_rebalanced=on_rebalanced,
                              smoke=smoke, bench=bench)
    planner = Planner(dep.today.profile, settings.state_dir) if not read_only else None
    ctx = ConsoleContext(settings=settings, profile_name=dep.today.name,
                         profile=dep.today.profile, poller=parts.poller, registry=registry,
                         history=history,
                         pod_collector=parts.pods if parts.reads_the_pod else None,
                         transport=parts.transport, demo=demo, clock=clock, planner=planner,
                         agent=agent, deployment=dep)

    def follow() -> None:
        """The context's own words for what the deployment runs (the poller, the pod
        collector and the agent are the deployment's own parts: they follow by
        themselves)."""
        moved_profile = ctx.profile_name != dep.today.name
        ctx.profile, ctx.profile_name = dep.today.profile, dep.today.name
        ctx.transport = parts.transport
        if moved_profile and ctx.planner is not None:
            ctx.planner = Planner(dep.today.profile, settings.state_dir)

    dep.on_switch.append(follow)
    if client is not None:
        ctx.on_exit.append(client.aclose)
    if demo is not None:
        ctx.on_exit.append(demo.stop)
    return ctx


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
