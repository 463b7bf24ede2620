"""KV capacity per slot from live data: tokens as a function of gpu_util.

vLLM gives each slot ``gpu_util × GPU memory − weights − activations`` for its
KV cache, so KV tokens grow linearly with gpu_util (the field: Flash-Next
+57 k tokens per 0.01). Two observed (util, tokens) points — from
``vllm:cache_config_info`` at two settings — fix the line; the points are
remembered in the state dir, so they survive restarts. With one point, the
profile's ``weights_gb`` and the GPU's memory give the slope instead.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from msgspec import Struct

from pod_agent.profile import Slot


class CapacityModel(Struct, frozen=True):
    slot: str
    points: tuple[tuple[float, int], ...]
    slope: float | None
    """KV tokens per 1.0 of gpu_util (None: not enough data)."""
    how: str

    def tokens_at(self, util: float) -> int | None:
        if not self.points:
            return None
        u0, t0 = self.points[-1]
        if abs(util - u0) < 1e-9:
            return t0
        if self.slope is None:
            return None
        return int(t0 + (util - u0) * self.slope)

    def util_for(self, tokens: float) -> float | None:
        """Least gpu_util that gives ``tokens`` KV tokens."""
        if not self.points or not self.slope or self.slope <= 0:
            return None
        u0, t0 = self.points[-1]
        return u0 + (tokens - t0) / self.slope


def need_for_one_request(slot: Slot, block_size: int = 16) -> int:
    """Tokens one max_model_len request needs, with draft slack for speculative decoding."""
    spec = slot.speculative.num_speculative_tokens if slot.speculative else 0
    return slot.max_model_len + spec * block_size


class PointStore:
    """Observed (util, tokens) per profile/slot in ``STATE_DIR/kv_points.json``."""

    def __init__(self, state_dir: Path, profile: str) -> None:
        self.path = state_dir / "kv_points.json"
        self.profile = profile

    def _load(self) -> dict[str, dict[str, list[list[float]]]]:
        try:
            data = json.loads(self.path.read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def points(self, slot: str) -> list[tuple[float, int]]:
        raw = self._load().get(self.profile, {}).get(slot, [])
        return [(float(u), int(t)) for u, t in raw]

    def add(self, slot: str, util: float, tokens: int) -> bool:
        data = self._load()
        pts = data.setdefault(self.profile, {}).setdefault(slot, [])
        for p in pts:
            if abs(p[0] - util) < 1e-6:
                if int(p[1]) == tokens:
                    return False
                p[1] = tokens  # same util, newer measurement
                break
        else:
            pts.append([util, tokens])
        pts.sort()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".kv_points.")
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, self.path)
        return True


def model_for(slot_name: str, slot: Slot, points: list[tuple[float, int]],
              gpu_mem_gib: float | None = None) -> CapacityModel:
    pts = sorted(points)
    if len(pts) >= 2:
        (u1, t1), (u2, t2) = pts[0], pts[-1]
        if abs(u2 - u1) > 1e-6:
            slope = (t2 - t1) / (u2 - u1)
            return CapacityModel(slot_name, tuple(pts), slope,
                                 f"2 points: {slope / 100:,.0f} tokens per 0.01")
    if len(pts) == 1 and slot.weights_gb and gpu_mem_gib:
        u, t = pts[0]
        tp = len(slot.gpus)
        kv_gib = u * gpu_mem_gib - slot.weights_gb / tp
        if kv_gib > 0:
            tokens_per_gib = t / kv_gib
            slope = gpu_mem_gib * tokens_per_gib
            return CapacityModel(slot_name, tuple(pts), slope,
                                 f"1 point + weights {slot.weights_gb:g} GB: "
                                 f"{slope / 100:,.0f} tokens per 0.01")
    return CapacityModel(slot_name, tuple(pts), None,
                         "needs one more reading (at another gpu_util) to estimate"
                         if pts else "no data yet")
