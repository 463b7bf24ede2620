"""Immutable snapshots handed from collectors to widgets. Nothing here does I/O."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from .collect.figures import ModelFigures

Health = Literal["up", "down", "starting", "unknown"]


@dataclass(frozen=True)
class SlotSnapshot:
    """One slot as last seen."""

    slot: str
    served_model_name: str
    port: int
    url: str
    health: Health = "unknown"
    health_detail: str = ""
    served_models: tuple[str, ...] = ()
    figures: ModelFigures | None = None
    kv_p99: float | None = None
    """KV usage p99 over the window (quantile_over_time semantics)."""
    probe_ok: bool | None = None
    """Last real chat completion probe: True, False, or None when not probed yet."""
    probe_detail: str = ""
    probe_at: float | None = None
    source: Literal["prometheus", "direct", "none"] = "none"
    fetched_at: float = 0.0
    error: str | None = None
    stale_since: float | None = None
    """When the last good data was fetched, if this snapshot failed."""

    def to_json(self) -> dict[str, object]:
        return {
            "slot": self.slot, "served_model_name": self.served_model_name, "port": self.port,
            "url": self.url, "health": self.health, "health_detail": self.health_detail,
            "served_models": list(self.served_models), "kv_p99": self.kv_p99,
            "source": self.source, "fetched_at": self.fetched_at, "error": self.error,
            "probe_ok": self.probe_ok, "probe_detail": self.probe_detail,
            "probe_at": self.probe_at,
            "stale_since": self.stale_since,
            "figures": self.figures.contract_dict() if self.figures else None,
            "rates": None if self.figures is None else {
                "window_s": self.figures.window_s,
                "prompt_tps": self.figures.prompt_tps,
                "generation_tps": self.figures.generation_tps,
                "preemptions_per_s": self.figures.preemption_rate,
                "requests_per_s": self.figures.request_rate,
                "requests_by_reason": self.figures.requests_by_reason,
            },
        }


@dataclass(frozen=True)
class DeploymentSnapshot:
    """All slots of today's profile, stamped with when and how they were fetched."""

    profile: str
    slots: tuple[SlotSnapshot, ...]
    fetched_at: float = field(default_factory=time.time)
    prometheus_url: str | None = None
    prometheus_error: str | None = None
    cycle_s: float = 0.0
    """How long the poll took (to spot a slow source)."""

    def slot(self, name: str) -> SlotSnapshot | None:
        for s in self.slots:
            if s.slot == name:
                return s
        return None

    def to_json(self) -> dict[str, object]:
        return {"profile": self.profile, "fetched_at": self.fetched_at,
                "prometheus_url": self.prometheus_url,
                "prometheus_error": self.prometheus_error, "cycle_s": self.cycle_s,
                "slots": [s.to_json() for s in self.slots]}
