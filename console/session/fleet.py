"""Several pods at once: one line per context (pod) of the config, k9s-style.

Each context is a deployment of its own (its provider pod, profiles, agent access,
thresholds, state directory). A fleet cycle polls every context's pod (provider and
agent) and slots side by side. When every context reads the same Prometheus (a global
one federating per-site servers, or one that scrapes them all), the slots' figures of the
whole fleet come from one fixed set of queries grouped by pod and slot
(``collect/promql.fetch_fleet``) — as many as for one pod, whatever the fleet's size —
and each context's poll uses its slice instead of asking Prometheus itself.

A fleet of N contexts costs N times one context, not more: the config file is read
once (each context's settings are built from that one reading), contexts that share a
profiles directory read it once, every context's slots are polled through one HTTP
client and every context of one provider account through one API client (one
connection pool, one TLS context), and at most ``concurrency`` pods are contacted at
once (their polls and completion probes): a request's timeout runs from when it is
sent, never while it waits its turn, so a large fleet is slower, never "timed out".

No Textual here: ``pod-console fleet`` and the console's fleet screen render the same
immutable :class:`FleetSnapshot`.
"""

from __future__ import annotations

import asyncio
import functools
import time
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from console.model import slo
from console.model.fleet import FleetRow, FleetSnapshot
from console.model.pod_stop import probe_hold
from console.model.printable import clean

HEALTH_ORDER = {"down": 0, "unknown": 1, "starting": 2, "up": 3}
CONCURRENCY = 16
"""Pods contacted at once by a fleet cycle (their provider record, agent and slots)."""


class Member(Struct):
    """One context: its settings and the parts that poll it (built once, reused)."""

    name: str
    settings: Any = None
    deployment: Any = None
    poller: Any = None
    pods: Any = None
    provider: Any = None
    error: str | None = None
    last_pod: Any = None
    """Its pod's last reading: whether its completion probes wait (``probe_hold``)."""


def _hold(poller: Any, pod: Any) -> str | None:
    """``probe_hold`` for a fleet member: its pod's reading and, where no stop plan is
    served, its slots' own request counters (its own probes discounted)."""
    return probe_hold(pod, poller.in_use(60.0))


def _load(source: Any, name: str | None, loaded: dict[Path, Any]) -> Member:
    """One context from the config read once (``settings.ConfigSource``)."""
    from console.config.settings import ConfigError
    from console.session.deployment import DeploymentError, apply_current_pod, open_deployment

    m = Member(name or "default")
    try:
        m.settings = source.settings(context=name)
        apply_current_pod(m.settings)
        m.deployment = open_deployment(m.settings, loaded=loaded)
    except (ConfigError, DeploymentError) as exc:
        m.error = str(exc).splitlines()[0]
    return m


class FleetCollector(Struct, dict=True):
    """Polls every context of a config; ``poll`` never raises for a source's behaviour.
    (``dict``: what ``__post_init__`` builds from the fields is kept beside them.)"""

    config: Path | None = None
    clock: Any = time.time
    members: list[Member] = field(default_factory=list)
    current: str | None = None
    concurrency: int = CONCURRENCY
    """Pods contacted at once (:data:`CONCURRENCY`)."""

    def __post_init__(self) -> None:
        from console.config.settings import ConfigError, ConfigSource
        from console.sources.collect.http import HttpClient

        if self.concurrency < 1:
            raise ValueError("concurrency: at least 1")
        self._gate = asyncio.Semaphore(self.concurrency)
        self._client = HttpClient()
        self._providers: dict[tuple[object, ...], Any] = {}
        try:
            source = ConfigSource.read(self.config)
            top = source.settings()
            names: list[str | None] = list(top.context_names) or [None]
            self.current = top.context
        except ConfigError as exc:
            self.members = [Member("default", error=str(exc).splitlines()[0])]
            return
        loaded: dict[Path, Any] = {}
        for name in names:
            m = _load(source, name, loaded)
            if m.deployment is not None:
                # the console's wiring (``Deployment.wire``): the same parts, GPU source
                # and agent profile path included; the clients shared
                parts = m.deployment.wire(client=self._client, providers=self._providers)
                m.poller, m.provider, m.pods = parts.poller, parts.provider, parts.pods
                m.poller.gate = self._gate
            self.members.append(m)

    @property
    def shared_prometheus(self) -> str | None:
        """The one Prometheus every context reads, when they agree on one (and on the
        window): then the fleet's figures are one set of queries."""
        live = [m.settings for m in self.members if m.deployment is not None]
        urls = {s.prometheus_url for s in live}
        windows = {s.window_s for s in live}
        if len(live) < 1 or len(urls) != 1 or None in urls or len(windows) != 1:
            return None
        return next(iter(urls))

    async def poll(self) -> FleetSnapshot:
        from console.sources.collect.promql import PromClient, PromError, fetch_fleet

        now = self.clock()
        live = [m for m in self.members if m.deployment is not None]
        # a pod ``up`` or a console's ``f``/``r`` moved a context to since the last cycle
        from console.config.config_file import read_current_pod

        currents = await asyncio.to_thread(
            lambda: [read_current_pod(m.settings.state_dir) for m in live])
        for m, cur in zip(live, currents, strict=True):
            m.deployment.follow_current_pod(cur)
        prefetched: dict[str, Any] = {}
        queries = 0
        shared = self.shared_prometheus
        if shared and live:
            first = live[0]
            pods = [m.deployment.machine_id or "local" for m in live]
            prom = PromClient(shared, first.poller.client, first.settings.request_timeout_s)
            try:
                figs, kv = await fetch_fleet(prom, first.settings.window_s, pods)
                from console.sources.collect.promql import figure_queries

                queries = len(figure_queries(first.settings.window_s))
                for m, pod in zip(live, pods, strict=True):
                    prefetched[m.name] = (
                        {f.model_name: f for (p, _), f in figs.items() if p == pod},
                        {figs[k].model_name: v for k, v in kv.items()
                         if k[0] == pod and k in figs})
            except PromError as exc:
                for m in live:
                    prefetched[m.name] = exc
        rows = await asyncio.gather(*(self._row(m, now, prefetched.get(m.name))
                                      for m in self.members))
        # other contexts' pods and config errors: no control character on screen
        return FleetSnapshot(clean(tuple(rows)), now, self.current, shared, queries)

    async def _row(self, m: Member, now: float, prefetched: Any) -> FleetRow:
        from console.session.judging import judge_once

        if m.deployment is None:
            return FleetRow(m.name, error=m.error)
        s = m.settings
        async with self._gate:  # its turn: the timeouts start now, not while it waits
            # an idle pod is not probed: the probe would keep it running (``probe_hold``),
            # so the first cycle reads the pod before its slots; later ones read both at
            # once, the probe going by the pod's reading of the cycle before
            if m.last_pod is None:
                pod = await m.pods.poll()
                m.poller.probe_hold = functools.partial(_hold, m.poller, pod)
                snap = await m.poller.poll(prefetched)
            else:
                m.poller.probe_hold = functools.partial(_hold, m.poller, m.last_pod)
                snap, pod = await asyncio.gather(m.poller.poll(prefetched), m.pods.poll())
        m.last_pod = pod
        judged = await judge_once(snap, pod, m.deployment.today.profile, s, now)
        pod, conds = judged.pod or pod, judged.conditions
        up = [x for x in snap.slots if x.health == "up"]
        worst = min(snap.slots, key=lambda x: HEALTH_ORDER.get(x.health, 1), default=None)
        ttfts = [x.figure("ttft_p95_s") for x in up]
        kvs = [x.kv_p99 for x in snap.slots]
        # SLO attainment: the lowest of the UP slots with a target (model/slo.py)
        profile = m.deployment.today.profile
        th = {x.slot: s.thresholds_for(x.slot, profile) for x in up}
        with_target = [x for x in up if slo.targets(th[x.slot])]
        shares = [(v, x.slot) for x in with_target
                  if (v := x.figure("slo_attainment", th[x.slot])) is not None]
        low = min(shares, default=None)
        no_req = bool(with_target) and all(
            slo.no_requests(x.figures, th[x.slot]) for x in with_target)
        plan = pod.stop_plan
        source = ("fleet prometheus" if prefetched is not None else
                  "prometheus" if s.prometheus_url and not snap.prometheus_error else "direct")
        errs = [e for e in (pod.provider_error, pod.agent_error, snap.prometheus_error) if e]
        return FleetRow(
            context=m.name, pod_id=pod.pod_id, profile=m.deployment.today.name,
            status=pod.status, gpu_name=pod.gpu_name, gpu_count=pod.gpu_count,
            cost_per_hr=pod.cost_per_hr, spend_today=pod.spend_today(now),
            spend_month=judged.spend_month,
            stop_in_s=pod.stop_in_s(now),
            stop_reason=plan.next_reason if plan is not None else None,
            slots_up=len(up), slots=len(snap.slots),
            worst_health=worst.health if worst is not None else None,
            worst_slot=worst.slot if worst is not None else None,
            ttft_p95_s=max((t for t in ttfts if t is not None), default=None),
            kv_p99=max((k for k in kvs if k is not None), default=None),
            slo_attainment=low[0] if low else None, slo_slot=low[1] if low else None,
            slo_no_requests=no_req, slo_set=bool(with_target),
            alerts=tuple((c.severity, c.title) for c in conds), source=source,
            error="; ".join(errs) or None)

    async def aclose(self) -> None:
        for m in self.members:
            if m.poller is not None:
                await m.poller.aclose()
        for provider in {id(p): p for p in self._providers.values() if p is not None}.values():
            await provider.aclose()
        await self._client.aclose()
