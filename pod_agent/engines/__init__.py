"""The serving engines a slot can run (the profile's ``engine:``), one module each:
command line, start-up log phases, traffic families, the package patches apply to.
The console's side of an engine is ``console/model/engines/``."""

from __future__ import annotations

from typing import Dict

from .base import Phase, PodEngine
from .sglang import SGLANG
from .vllm import VLLM

ENGINES: Dict[str, PodEngine] = {e.name: e for e in (VLLM, SGLANG)}


def pod_engine(name: str) -> PodEngine:
    return ENGINES[name]


__all__ = ["ENGINES", "SGLANG", "VLLM", "Phase", "PodEngine", "pod_engine"]
