"""The serving engines a slot can run (the profile's ``engine:``), one module each.

A new engine is one module here (its catalog sources, family prefix and ranks), one
module in ``pod_agent/engines/`` (its command line, start-up log and traffic), and an
entry in each side's ``ENGINES``."""

from __future__ import annotations

from console.model.engines.base import (
    Engine,
    Gauge,
    Increase,
    OverTime,
    Quantile,
    Ratio,
    Source,
)
from console.model.engines.sglang import SGLANG
from console.model.engines.vllm import VLLM

ENGINES: dict[str, Engine] = {e.name: e for e in (VLLM, SGLANG)}
DEFAULT = VLLM


def engine(name: str | None) -> Engine:
    """The engine of that name (vLLM for None or a name not known here)."""
    return ENGINES.get(name or DEFAULT.name, DEFAULT)


__all__ = ["DEFAULT", "ENGINES", "SGLANG", "VLLM", "Engine", "Gauge", "Increase", "OverTime",
           "Quantile", "Ratio", "Source", "engine"]
