"""From settings to benchmark plans, and from a finished run to its kept record: what the
CLI and the console's key share."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from console.operations.benchmark.measure import LENGTHS, BenchPlan, PodFacts, Progress, run_bench
from console.operations.benchmark.prompts import TASKS
from console.operations.benchmark.record import build_record, compare, load_history, save
from console.sources.collect.http import HttpClient


class BenchError(Exception):
    """A benchmark that cannot start (an unknown slot, a bad override)."""


class RecordNotKept(Exception):
    """The run finished but its record could not be written (a full disk): the
    measurements are in ``record``, for the caller to show rather than lose."""

    def __init__(self, record: dict[str, Any], why: str) -> None:
        super().__init__(f"the record could not be written: {why}")
        self.record = record


def plans_for(profile_name: str, profile: Any, targets: Sequence[Any], settings: Any,
              slots: Sequence[str] = (), **override: Any) -> list[BenchPlan]:
    """One plan per slot asked for (every slot when none is named), through the gateway
    when one is configured. ``override`` replaces the settings' knobs for this run
    (``runs``, ``max_tokens``, ``lengths``, ``tasks``, …); None means keep."""
    by_slot = {t.slot: t for t in targets}
    unknown = [s for s in slots if s not in by_slot]
    if unknown:
        raise BenchError(f"no slot {', '.join(unknown)} in profile {profile_name} "
                         f"(have: {', '.join(by_slot)})")
    b = settings.bench
    knobs: dict[str, Any] = {
        "runs": b.runs, "warmup": b.warmup, "concurrency": tuple(b.concurrency),
        "long_tokens": b.long_tokens, "max_tokens": b.max_tokens,
        "task_max_tokens": b.task_max_tokens, "timeout_s": b.timeout_s,
        "temperature": b.temperature,
        "lengths": tuple(b.lengths), "tasks": tuple(b.tasks)}
    for k, v in override.items():
        if v is None:
            continue
        if k not in knobs:
            raise BenchError(f"unknown benchmark setting {k!r}")
        knobs[k] = tuple(v) if isinstance(v, list) else v
    bad = [t for t in knobs["tasks"] if t not in TASKS]
    if bad:
        raise BenchError(f"unknown task type {', '.join(bad)} (have: {', '.join(TASKS)})")
    bad = [n for n in knobs["lengths"] if n not in LENGTHS]
    if bad:
        raise BenchError(f"unknown input length {', '.join(bad)} (short, long)")
    gateway = settings.gateway_url.rstrip("/") if settings.gateway_url else None
    gkey = settings.gateway_key.get_secret_value() if settings.gateway_key else None
    skey = settings.vllm_api_key.get_secret_value() if settings.vllm_api_key else None
    out = []
    for name in slots or list(by_slot):
        t = by_slot[name]
        out.append(BenchPlan(
            profile=profile_name, slot=name, served_model_name=t.served_model_name,
            url=gateway or t.base_url, slot_url=t.base_url,
            via=f"gateway {gateway}" if gateway else "direct",
            api_key=gkey if gateway else skey, slot_key=skey, **knobs))
    return out


def baseline_of(profile: Any, slot: str) -> dict[str, dict[str, float | None]]:
    """The profile's ``bench_baseline`` for a slot, in the record's units (seconds)."""
    s = profile.slots.get(slot)
    if s is None:
        return {}
    return {name: {"tok_s": f.tok_s, "ttft_s": None if f.ttft_ms is None else f.ttft_ms / 1000}
            for name, f in s.bench_baseline.items()}


async def bench_and_record(plan: BenchPlan, client: HttpClient, facts: PodFacts,
                           state_dir: Path, baseline: dict[str, dict[str, float | None]],
                           limit_pct: float, progress: Progress | None = None
                           ) -> tuple[dict[str, Any], Path]:
    """Run the protocol, compare it with what came before, keep the record. Cancelled,
    it keeps nothing (half a benchmark is not a result)."""
    res = await run_bench(plan, client, progress)
    rec = build_record(res, facts)
    history, _bad = await asyncio.to_thread(load_history, state_dir, plan.profile, plan.slot)
    rec["comparison"] = compare(rec, history, baseline, limit_pct)
    try:
        path = await asyncio.to_thread(save, state_dir, rec)
    except OSError as exc:
        raise RecordNotKept(rec, exc.strerror or str(exc)) from None
    return rec, path
