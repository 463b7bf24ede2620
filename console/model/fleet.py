"""The fleet overview as data: one row per context's pod, and the totals.

Immutable and free of I/O, like the other snapshots: ``console.session.fleet`` polls
the pods and builds it; ``pod-console fleet`` prints it and the fleet screen renders
it (the screens read it through ``ConsoleState.fleet``, so it sits below the session).
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct
from msgspec.structs import asdict

from console.model import fmt
from console.model.slo import floor_pct


class FleetRow(Struct, frozen=True):
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
    slo_attainment: float | None = None
    """The lowest SLO attainment of its UP slots that have a target (``model/slo.py``);
    None: no target, or no slot with enough requests."""
    slo_slot: str | None = None
    """The slot that lowest attainment is of."""
    slo_no_requests: bool = False
    """Targets set and not one request in the window on any UP slot that has one."""
    slo_set: bool = False
    """Some UP slot of it has an SLO target (else its SLO says nothing)."""
    alerts: tuple[tuple[str, str], ...] = ()
    """(severity, title) of every alert condition that holds now."""
    source: str = ""
    """Where its slots' figures came from: ``fleet prometheus``, ``prometheus``, ``direct``."""
    error: str | None = None

    def slo_text(self) -> str:
        """``97.5% Q27``, ``no req``, or ``–``."""
        if self.slo_attainment is None:
            return "no req" if self.slo_no_requests else fmt.DASH
        return f"{floor_pct(self.slo_attainment)} {self.slo_slot or ''}".rstrip()

    def to_json(self) -> dict[str, Any]:
        return {k: (list(map(list, v)) if k == "alerts" else v)
                for k, v in asdict(self).items()}


class FleetSnapshot(Struct, frozen=True):
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
                 "SLOTS", "WORST", "TTFT p95", "KV p99", "SLO", "ALERTS")]
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
                fmt.elapsed(r.stop_in_s) + (f" ({r.stop_reason})" if r.stop_reason
                                                   else ""),
                f"{r.slots_up}/{r.slots}",
                fmt.DASH if r.worst_health is None else
                f"{r.worst_slot} {r.worst_health.upper()}",
                fmt.secs(r.ttft_p95_s), fmt.pct(r.kv_p99), r.slo_text(),
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
