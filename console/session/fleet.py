"""Several pods at once: one line per context (pod) of the config, k9s-style.

Each context is a deployment of its own (its provider pod, profiles, agent access,
thresholds, state directory). A fleet cycle polls every context's pod (provider and
agent) and slots side by side. When every context reads the same Prometheus (a global
one federating per-site servers, or one that scrapes them all), the slots' figures of the
whole fleet come from one fixed set of queries grouped by pod and slot
(``collect/promql.fetch_fleet``) — as many as for one pod, whatever the fleet's size —
and each context's poll uses its slice instead of asking Prometheus itself.

No Textual here: ``pod-console fleet`` and the console's fleet screen render the same
immutable :class:`FleetSnapshot`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from console.model import fmt

HEALTH_ORDER = {"down": 0, "unknown": 1, "starting": 2, "up": 3}


@dataclass(frozen=True)
class FleetRow:
    """One pod as the fleet overview shows it; None: its source did not say."""

    context: str
    pod_id: str | None = None
    profile: str | None = None
    status: str | None = None
    gpu_name: str | None = None
    gpu_count: int | None = None
    cost_per_hr: float | None = None
    spend_today: float | None = None
    spend_month: float | None = None
    stop_in_s: float | None = None
    stop_reason: str | None = None
    slots_up: int = 0
    slots: int = 0
    worst_health: str | None = None
    worst_slot: str | None = None
    ttft_p95_s: float | None = None
    """The worst (highest) TTFT p95 of its slots that are UP."""
    kv_p99: float | None = None
    """The highest KV p99 of its slots."""
    alerts: tuple[tuple[str, str], ...] = ()
    """(severity, title) of every alert condition that holds now."""
    source: str = ""
    """Where its slots' figures came from: ``fleet prometheus``, ``prometheus``, ``direct``."""
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: (list(map(list, v)) if k == "alerts" else v)
                for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class FleetSnapshot:
    rows: tuple[FleetRow, ...]
    fetched_at: float
    current: str | None
    """The context the console (or command) is in."""
    shared_prometheus: str | None = None
    queries: int = 0
    """Prometheus queries the fleet's figures took this cycle (0: each pod asked its own)."""

    @property
    def spend_today(self) -> float:
        return sum(r.spend_today or 0.0 for r in self.rows)

    @property
    def spend_month(self) -> float:
        return sum(r.spend_month or 0.0 for r in self.rows)

    @property
    def cost_per_hr(self) -> float:
        return sum(r.cost_per_hr or 0.0 for r in self.rows if r.status == "RUNNING")

    def to_json(self) -> dict[str, Any]:
        return {"fetched_at": self.fetched_at, "current": self.current,
                "shared_prometheus": self.shared_prometheus, "queries": self.queries,
                "total": {"cost_per_hr_running": self.cost_per_hr,
                          "spend_today": self.spend_today, "spend_month": self.spend_month},
                "pods": [r.to_json() for r in self.rows]}

    def lines(self) -> list[str]:
        """The overview as text: one line per pod, then the totals."""
        from console.model.fmt import aligned

        rows = [("CONTEXT", "POD", "STATE", "GPUs", "$/h", "TODAY", "MONTH", "STOP",
                 "SLOTS", "WORST", "TTFT p95", "KV p99", "ALERTS")]
        for r in self.rows:
            gpus = (f"{r.gpu_count}× {r.gpu_name}" if r.gpu_count and r.gpu_name
                    else (r.gpu_name or fmt.DASH))
            crit = sum(1 for s, _ in r.alerts if s == "crit")
            warn = len(r.alerts) - crit
            rows.append((
                ("* " if r.context == self.current else "  ") + r.context,
                r.pod_id or fmt.DASH, r.status or ("ERROR" if r.error else "?"), gpus,
                fmt.money(r.cost_per_hr), fmt.money(r.spend_today), fmt.money(r.spend_month),
                fmt.DASH if r.stop_in_s is None else
                fmt.duration(r.stop_in_s, False) + (f" ({r.stop_reason})" if r.stop_reason
                                                   else ""),
                f"{r.slots_up}/{r.slots}",
                fmt.DASH if r.worst_health is None else
                f"{r.worst_slot} {r.worst_health.upper()}",
                fmt.secs(r.ttft_p95_s), fmt.pct(r.kv_p99),
                (f"{crit} crit " if crit else "") + (f"{warn} warn" if warn else "")
                or "none"))
        out = aligned(rows)
        out.append(f"  fleet: {fmt.money(self.cost_per_hr)}/h running, today "
                   f"{fmt.money(self.spend_today)}, this month {fmt.money(self.spend_month)}")
        if self.shared_prometheus:
            out.append(f"  figures: {self.queries} queries to {self.shared_prometheus} for "
                       f"every slot of every pod")
        for r in self.rows:
            if r.error:
                out.append(f"  {r.context}: {r.error}")
        return out


@dataclass
class Member:
    """One context: its settings and the parts that poll it (built once, reused)."""

    name: str
    settings: Any = None
    deployment: Any = None
    poller: Any = None
    pods: Any = None
    provider: Any = None
    error: str | None = None


def _load(config: Path | None, name: str | None) -> Member:
    from console.config.settings import ConfigError, load_settings
    from console.session.deployment import DeploymentError, apply_current_pod, open_deployment

    m = Member(name or "default")
    try:
        m.settings = load_settings(config, context=name)
        apply_current_pod(m.settings)
        m.deployment = open_deployment(m.settings)
    except (ConfigError, DeploymentError) as exc:
        m.error = str(exc).splitlines()[0]
    return m


@dataclass
class FleetCollector:
    """Polls every context of a config; ``poll`` never raises for a source's behaviour."""

    config: Path | None = None
    clock: Any = time.time
    members: list[Member] = field(default_factory=list)
    current: str | None = None

    def __post_init__(self) -> None:
        from console.config.settings import ConfigError, load_settings
        from console.session.context import ssh_transport
        from console.sources.agent_client import AgentClient
        from console.sources.collect.pod import PodCollector
        from console.sources.provider import make_provider

        try:
            top = load_settings(self.config)
            names: list[str | None] = list(top.context_names) or [None]
            self.current = top.context
        except ConfigError as exc:
            self.members = [Member("default", error=str(exc).splitlines()[0])]
            return
        for name in names:
            m = _load(self.config, name)
            if m.deployment is not None:
                s = m.settings
                m.poller = m.deployment.poller()
                m.provider = make_provider(s)
                transport = ssh_transport(s)
                agent = AgentClient(transport) if transport is not None else None
                m.pods = PodCollector(s.pod.runpod_id, m.provider, agent,
                                      timeout_s=max(2.0, s.request_timeout_s * 2))
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
        prefetched: dict[str, Any] = {}
        queries = 0
        shared = self.shared_prometheus
        if shared and live:
            first = live[0]
            pods = [m.settings.pod.runpod_id or "local" for m in live]
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
        return FleetSnapshot(tuple(rows), now, self.current, shared, queries)

    async def _row(self, m: Member, now: float, prefetched: Any) -> FleetRow:
        from console.model.alerts import evaluate
        from console.session.spend import SpendBook

        if m.deployment is None:
            return FleetRow(m.name, error=m.error)
        s = m.settings
        snap, pod = await asyncio.gather(m.poller.poll(prefetched), m.pods.poll())
        book = await asyncio.to_thread(SpendBook, s.state_dir / "spend.json")
        pod = replace(pod, spent_earlier_today=book.earlier_today(pod, now))
        conds = evaluate(snap, pod, m.deployment.today.profile, s, now)
        up = [x for x in snap.slots if x.health == "up"]
        worst = min(snap.slots, key=lambda x: HEALTH_ORDER.get(x.health, 1), default=None)
        ttfts = [x.figure("ttft_p95_s") for x in up]
        kvs = [x.kv_p99 for x in snap.slots]
        plan = pod.stop_plan
        source = ("fleet prometheus" if prefetched is not None else
                  "prometheus" if s.prometheus_url and not snap.prometheus_error else "direct")
        errs = [e for e in (pod.provider_error, pod.agent_error, snap.prometheus_error) if e]
        return FleetRow(
            context=m.name, pod_id=pod.pod_id, profile=m.deployment.today.name,
            status=pod.status, gpu_name=pod.gpu_name, gpu_count=pod.gpu_count,
            cost_per_hr=pod.cost_per_hr, spend_today=pod.spend_today(now),
            spend_month=book.this_month(pod, now) if pod.pod_id else None,
            stop_in_s=pod.stop_in_s(now),
            stop_reason=plan.next_reason if plan is not None else None,
            slots_up=len(up), slots=len(snap.slots),
            worst_health=worst.health if worst is not None else None,
            worst_slot=worst.slot if worst is not None else None,
            ttft_p95_s=max((t for t in ttfts if t is not None), default=None),
            kv_p99=max((k for k in kvs if k is not None), default=None),
            alerts=tuple((c.severity, c.title) for c in conds), source=source,
            error="; ".join(errs) or None)

    async def aclose(self) -> None:
        for m in self.members:
            if m.poller is not None:
                await m.poller.aclose()
            if m.provider is not None:
                await m.provider.aclose()
