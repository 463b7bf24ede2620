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

from console.config import config_file
from console.config.profile_file import write_split
from console.config.settings import Settings
from console.model.history import History
from console.operations.audit import audit_log_for
from console.operations.build import build_registry
from console.operations.planner import Planner
from console.operations.provision import ProvisionConfig, Provisioner, ProvisionResult
from console.session.deployment import open_deployment
from console.session.view import ConsoleContext
from console.sources.agent_client import AgentClient
from console.sources.collect.gpu_metrics import from_settings as gpu_metrics_from_settings
from console.sources.collect.pod import PodCollector
from console.sources.collect.poller import DeploymentPoller
from console.sources.collect.targets import targets_for
from console.sources.provider import make_provider
from console.sources.remote import AgentEndpoint, AgentTransport, agent_command
from pod_agent.profiles import LoadedProfile


def ssh_transport(settings: Settings) -> AgentTransport | None:
    p = settings.pod
    if not p.ssh_host:
        return None
    ep = AgentEndpoint(host=p.ssh_host, port=p.ssh_port, user=p.ssh_user,
                       key_path=p.ssh_key, pod_id=p.runpod_id or p.ssh_host,
                       agent_cmd=agent_command(p.agent_dir))
    return AgentTransport(ep, settings.state_dir)


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
    dep = open_deployment(settings)
    fresh_history = History(settings.history_s, settings.refresh_s)
    if history is None or (history.window_s, history.maxlen) != (
            fresh_history.window_s, fresh_history.maxlen):
        history = fresh_history
    fresh = dep.poller(history)
    if poller is None or poller.config_key() != fresh.config_key() \
            or poller.history is not history:
        poller = fresh
    poller.probe_interval_s = probe_interval_s
    # Wall mode needs no SSH key and never talks to the agent or RunPod's write API.
    if read_only:
        transport = None
    elif transport is None:
        transport = ssh_transport(settings)
    client = make_provider(settings, runpod_base)
    ctx_holder: dict[str, ConsoleContext] = {}
    remote_profile = f"{settings.pod.agent_dir}/pkg/profiles/{dep.today.path.name}"
    if demo is not None:
        remote_profile = str(demo.remote_profile(dep.today))

    def refresh() -> None:
        """Until an app takes over (``PodConsoleApp.on_mount``), a refresh polls once."""
        asyncio.get_running_loop().create_task(ctx_holder["ctx"].poller.poll())

    provisioner = None
    if client is not None and not read_only:
        cfg = provision_cfg or ProvisionConfig(
            render_dir=settings.state_dir / "rendered", prometheus_url=settings.prometheus_url,
            agent_dir=settings.pod.agent_dir, ledger=config_file.ledger_path(settings.state_dir))

        def factory(pod, agent_cmd: str) -> Any:
            if transport_factory is not None:
                return transport_factory(pod, agent_cmd)
            host, port = pod.ssh_endpoint
            return AgentTransport(AgentEndpoint(host=host, port=port, user="root",
                                                key_path=settings.pod.ssh_key, pod_id=pod.id,
                                                agent_cmd=agent_cmd), settings.state_dir)

        async def on_ready(res: ProvisionResult) -> None:
            ctx = ctx_holder.get("ctx")
            if ctx is not None:
                switch_pod(ctx, res, factory, demo)

        provisioner = Provisioner(client, list(dep.profiles), factory, cfg,
                                  pod_id=settings.pod.runpod_id, on_ready=on_ready,
                                  log=lambda s: None)

    async def on_rebalanced(values: dict[str, float]) -> str:
        return await asyncio.to_thread(write_split, dep.today.path, values,
                                       settings.state_dir / "profile-backups")

    audit = audit_log_for(settings)
    agent = AgentClient(transport, remote_profile)
    async def smoke(on_check: Callable[[Any], None]) -> Any:
        """Today's deployment as the context knows it now (a fallback retargets it)."""
        from console.operations.smoke import plan_for, run_smoke

        cur = ctx_holder.get("ctx")
        prof = cur.profile if cur is not None else dep.today.profile
        targets = cur.poller.targets if cur is not None else dep.targets
        client = (cur.poller if cur is not None else poller).client
        return await run_smoke(plan_for(prof, targets, settings, client), client, on_check)

    async def bench(slot: str, progress: Any) -> tuple[dict[str, Any], Path]:
        """The benchmark of one slot of today's deployment, kept under the state dir."""
        from console.operations.benchmark.measure import PodFacts
        from console.operations.benchmark.runner import baseline_of, bench_and_record, plans_for
        from console.sources.collect.http import HttpClient

        cur = ctx_holder.get("ctx")
        prof = cur.profile if cur is not None else dep.today.profile
        name = cur.profile_name if cur is not None else dep.today.name
        targets = cur.poller.targets if cur is not None else dep.targets
        plan = plans_for(name, prof, targets, settings, [slot])[0]
        pods = cur.pod_collector if cur is not None else None
        pod = None
        if pods is not None:
            with contextlib.suppress(Exception):  # where it ran is worth knowing, not vital
                pod = await asyncio.wait_for(pods.poll(), pods.timeout_s * 2)
        client = HttpClient()
        try:
            return await bench_and_record(plan, client, PodFacts.from_pod(pod),
                                          settings.state_dir, baseline_of(prof, slot),
                                          settings.bench.regression_pct, progress)
        finally:
            await client.aclose()

    registry = build_registry(audit, read_only, agent=agent, refresh=refresh,
                              provisioner=provisioner, on_rebalanced=on_rebalanced,
                              smoke=smoke, bench=bench)
    pod_collector = None
    gpu_metrics = gpu_metrics_from_settings(settings, poller.client)
    if client is not None or transport is not None or gpu_metrics is not None:
        pod_collector = PodCollector(settings.pod.runpod_id, client, agent,
                                     timeout_s=max(2.0, settings.request_timeout_s * 2),
                                     gpu_metrics=gpu_metrics)
    planner = Planner(dep.today.profile, settings.state_dir) if not read_only else None
    ctx = ConsoleContext(settings=settings, profile_name=dep.today.name,
                         profile=dep.today.profile, poller=poller, registry=registry,
                         history=history, pod_collector=pod_collector, transport=transport,
                         demo=demo, clock=clock, planner=planner, agent=agent)
    ctx_holder["ctx"] = ctx
    if client is not None:
        ctx.on_exit.append(client.aclose)
    if demo is not None:
        ctx.on_exit.append(demo.stop)
    return ctx


def switch_pod(ctx: ConsoleContext, res: ProvisionResult, factory: Callable[..., Any],
               demo: Any) -> None:
    """After fallback provisioning: follow the new pod, its profile and its address."""
    lp: LoadedProfile = res.profile
    s = ctx.settings
    s.pod.runpod_id = res.pod.id
    s.pod.host = res.address.host
    s.pod.port_map = dict(res.address.port_map)
    targets = targets_for(lp.profile, res.address.host, res.address.port_map)
    old = ctx.poller
    ctx.poller = old.retargeted(lp.name, targets)
    ctx.profile = lp.profile
    ctx.profile_name = lp.name
    if ctx.pod_collector is not None:
        ctx.pod_collector.pod_id = res.pod.id
    if ctx.agent is not None and ctx.agent.configured:
        agent_cmd = agent_command(s.pod.agent_dir)
        new_t = factory(res.pod, agent_cmd) if demo is None else demo.transport_for(res.pod)
        ctx.transport = new_t
        # the handlers, the pod collector and the logs all call this one client
        ctx.agent.retarget(new_t, str(demo.remote_profile(lp)) if demo is not None
                           else f"{s.pod.agent_dir}/pkg/profiles/{lp.path.name}")
    asyncio.get_running_loop().create_task(old.aclose())


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "true", "yes")


def state_file(settings: Settings, name: str) -> Path:
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    return settings.state_dir / name
