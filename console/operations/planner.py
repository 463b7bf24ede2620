"""The gpu_util planner: a split per GPU group from KV usage p99, minimums and priorities.

Rules: the slots of one GPU never sum above 0.95; no slot goes below its
``min_gpu_util`` or below the util at which one ``max_model_len`` request
fits; each slot gets its p99 KV demand with headroom; what is left goes by
priority. More demand never yields less util for that slot.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from msgspec import Struct

from console.model import fmt
from console.model.snapshot import DeploymentSnapshot
from console.operations.capacity import CapacityModel, PointStore, model_for, need_for_one_request
from console.operations.split import plan_words
from pod_agent.profile import MAX_GPU_UTIL_PER_GPU, Profile

HEADROOM = 2.0
"""Give each slot twice its p99 KV demand: bursts of long contexts come in pairs."""
STEP = 0.01


class SlotInput(Struct, frozen=True):
    name: str
    current: float
    kv_p99: float | None
    model: CapacityModel
    min_util: float
    priority: int
    gpus: tuple[int, ...]


class Plan(Struct, frozen=True):
    split: dict[str, float]
    lines: list[str]
    feasible: bool


def _ceil(x: float) -> float:
    return math.ceil(round(x / STEP, 6)) * STEP


def _floor(x: float) -> float:
    return math.floor(round(x / STEP, 6)) * STEP


def need(s: SlotInput, profile: Profile) -> tuple[float, str]:
    """The least util this slot may get, and why."""
    slot = profile.slots[s.name]
    reasons = [(s.min_util, f"its minimum in the profile is {s.min_util:.2f}")]
    one = s.model.util_for(need_for_one_request(slot))
    if one is not None:
        reasons.append((one, f"one {slot.max_model_len // 1024}K-token request needs "
                             f"{one:.3f}"))
    tokens_now = s.model.tokens_at(s.current)
    if s.kv_p99 is not None and tokens_now is not None:
        demand = s.kv_p99 * tokens_now * HEADROOM
        u = s.model.util_for(demand)
        if u is not None:
            reasons.append((u, f"its KV cache peaks at {s.kv_p99:.1%} (p99); with "
                               f"{HEADROOM:g}× headroom that is {demand:,.0f} tokens"))
    if s.model.slope is None:
        # a model needs KV readings at two gpu_util values: with one, keep what runs
        reasons.append((s.current, "its KV size was read at one gpu_util only, so it "
                                   "stays as it is"))
    best = max(reasons, key=lambda r: r[0])
    return _ceil(max(0.01, best[0])), best[1]


def plan(profile: Profile, inputs: list[SlotInput]) -> Plan:
    lines: list[str] = []
    split: dict[str, float] = {}
    feasible = True
    # Slots that share any GPU are planned together (the field: both on GPUs 0 and 1).
    groups: list[list[SlotInput]] = []
    for s in inputs:
        hit = [g for g in groups if any(set(s.gpus) & set(o.gpus) for o in g)]
        merged = [s] + [x for g in hit for x in g]
        groups = [g for g in groups if g not in hit] + [merged]
    for group in groups:
        needs = {s.name: need(s, profile) for s in group}
        total = sum(n for n, _ in needs.values())
        if total > MAX_GPU_UTIL_PER_GPU + 1e-9:
            feasible = False
            lines.append(f"✖ {' + '.join(needs)} need {total:.2f} of a GPU together, more "
                         "than 0.95: no split fits; the current values stay")
            for s in group:
                split[s.name] = s.current
            continue
        spare = _floor(MAX_GPU_UTIL_PER_GPU - total)
        weights = {s.name: max(1, s.priority) for s in group}
        wsum = sum(weights.values())
        extra = {n: _floor(spare * w / wsum) for n, w in weights.items()}
        left = round(spare - sum(extra.values()), 6)
        # hand out rounding leftovers to the highest priority
        for s in sorted(group, key=lambda x: -x.priority):
            if left < STEP - 1e-9:
                break
            extra[s.name] = round(extra[s.name] + STEP, 6)
            left = round(left - STEP, 6)
        for s in group:
            u = round(needs[s.name][0] + extra[s.name], 2)
            split[s.name] = u
            tok = s.model.tokens_at(u)
            spare_words = (f", plus {extra[s.name]:.2f} of the spare memory for priority "
                           f"{s.priority}" if extra[s.name] > 1e-9 else
                           f"; no spare memory left for priority {s.priority}")
            lines.append(f"{s.name}: {s.current:.2f} → {u:.2f} — at least "
                         f"{needs[s.name][0]:.2f} ({needs[s.name][1]}){spare_words}; "
                         f"KV {fmt.num(tok)} tokens")
    return Plan(split, lines, feasible)


class Planner:
    """Feeds the rebalance preview: remembers KV points, builds models, proposes a plan."""

    def __init__(self, profile: Profile, state_dir: Path, profile_name: str | None = None,
                 gpu_mem_gib: float | None = None) -> None:
        self.profile = profile
        self.store = PointStore(state_dir, profile_name or profile.name or "profile")
        self.gpu_mem_gib = gpu_mem_gib

    def observe(self, snap: DeploymentSnapshot | None) -> None:
        if snap is None:
            return
        for s in snap.slots:
            c = s.figures.cache if s.figures else None
            if c and c.gpu_memory_utilization and c.kv_tokens:
                self.store.add(s.slot, round(c.gpu_memory_utilization, 4), int(c.kv_tokens))

    def models(self) -> dict[str, CapacityModel]:
        return {n: model_for(n, s, self.store.points(n), self.gpu_mem_gib)
                for n, s in self.profile.slots.items()}

    def inputs(self, snap: DeploymentSnapshot | None, current: dict[str, float]
               ) -> list[SlotInput]:
        models = self.models()
        out = []
        for n, s in self.profile.slots.items():
            ss = snap.slot(n) if snap else None
            out.append(SlotInput(n, current.get(n, s.gpu_util), ss.kv_p99 if ss else None,
                                 models[n], s.min_gpu_util or 0.01, s.priority, tuple(s.gpus)))
        return out

    def preview(self, snap: DeploymentSnapshot | None, current: dict[str, float],
                agent_slots: dict[str, Any]):
        self.observe(snap)
        p = plan(self.profile, self.inputs(snap, current))
        models = self.models()

        def predict(slot: str, util: float | None) -> str:
            if util is None:
                return "–"
            m = models.get(slot)
            tok = m.tokens_at(util) if m else None
            prof_slot = self.profile.slots[slot]
            conc = f"{tok / prof_slot.max_model_len:.2f}× at {prof_slot.max_model_len // 1024}K" \
                if tok else "–"
            st = (agent_slots.get(slot) or {}).get("last_startup_s")
            down = f"down ~{fmt.duration(st)}" if st else "down: unknown"
            return f"KV {fmt.num(tok)} tok · {conc} · {down} · {m.how if m else ''}"

        # "proposed: …" says the whole move (or "no change"); the dialog redraws it as
        # its values are edited
        lines = [*p.lines, "proposed: " + plan_words(current, p.split)]
        return p.split, lines, predict
