"""The PromQL twin of every figure in ``figures.py``, and a small async API client.

One query per figure *family* returns all models at once (``by (model_name)``),
so a refresh costs a fixed number of queries whatever the number of slots.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import Any

from ..numbers import safe_ratio
from .exposition import finite
from .figures import (
    DECODE,
    E2E,
    PREFILL,
    QUEUE,
    SPEC_ACCEPTED,
    SPEC_DRAFT_TOKENS,
    SPEC_DRAFTS,
    SPEC_PER_POS,
    TTFT,
    CacheConfig,
    ModelFigures,
    SpecFigures,
)
from .http import HttpClient, HttpError


def _w(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"


def quantile_query(q: float, hist: str, window_s: float, sel: str = "") -> str:
    return (f"histogram_quantile({q}, sum by (model_name, le) "
            f"(rate({hist}_bucket{sel}[{_w(window_s)}])))")


def figure_queries(window_s: float, sel: str = "") -> dict[str, str]:
    """Name → PromQL; ``sel`` is a label selector such as ``{pod="abc"}``."""
    w = _w(window_s)

    def inc(metric: str, by: str = "model_name") -> str:
        return f"sum by ({by}) (increase({metric}{sel}[{w}]))"

    def gauge(metric: str) -> str:
        return f"sum by (model_name) ({metric}{sel})"

    itl = (f"{quantile_query(0.95, 'vllm:inter_token_latency_seconds', window_s, sel)} or "
           f"{quantile_query(0.95, 'vllm:time_per_output_token_seconds', window_s, sel)}")
    return {
        "kv": f"{gauge('vllm:kv_cache_usage_perc')} or {gauge('vllm:gpu_cache_usage_perc')}",
        "kv_p99": (f"max by (model_name) (quantile_over_time(0.99, "
                   f"vllm:kv_cache_usage_perc{sel}[{w}]))"),
        "running": gauge("vllm:num_requests_running"),
        "waiting": gauge("vllm:num_requests_waiting"),
        "preemptions": inc("vllm:num_preemptions_total"),
        "prompt_tokens": inc("vllm:prompt_tokens_total"),
        "generation_tokens": inc("vllm:generation_tokens_total"),
        "requests": inc("vllm:request_success_total", "model_name, finished_reason"),
        "ttft_p50": quantile_query(0.5, TTFT, window_s, sel),
        "ttft_p95": quantile_query(0.95, TTFT, window_s, sel),
        "ttft_p99": quantile_query(0.99, TTFT, window_s, sel),
        "itl_p95": itl,
        "e2e_p95": quantile_query(0.95, E2E, window_s, sel),
        "queue_p95": quantile_query(0.95, QUEUE, window_s, sel),
        "prefill_p95": quantile_query(0.95, PREFILL, window_s, sel),
        "decode_p95": quantile_query(0.95, DECODE, window_s, sel),
        "prefix_hits": inc("vllm:prefix_cache_hits_total"),
        "prefix_queries": inc("vllm:prefix_cache_queries_total"),
        "spec_drafts": inc(SPEC_DRAFTS),
        "spec_draft_tokens": inc(SPEC_DRAFT_TOKENS),
        "spec_accepted": inc(SPEC_ACCEPTED),
        "spec_per_pos": inc(SPEC_PER_POS, "model_name, position"),
        "cache_config": f"vllm:cache_config_info{sel}",
    }


class PromError(Exception):
    pass


@dataclass(frozen=True)
class PromClient:
    """Minimal Prometheus HTTP API client (instant and range queries)."""

    base_url: str
    client: HttpClient
    timeout: float = 2.0

    async def _get(self, path: str, params: dict[str, str]) -> Any:
        try:
            r = await self.client.get(self.base_url.rstrip("/") + path, params=params,
                                      timeout=self.timeout)
        except HttpError as exc:
            raise PromError(exc.describe()[:200]) from None
        try:
            body = r.json()
        except ValueError:
            raise PromError(f"HTTP {r.status_code}: not JSON") from None
        if not isinstance(body, dict) or body.get("status") != "success":
            err = body.get("error") if isinstance(body, dict) else None
            raise PromError(f"HTTP {r.status_code}: {err or 'bad answer'}"[:200])
        data = body.get("data")
        if not isinstance(data, dict) or "result" not in data:
            raise PromError("answer without data.result")
        return data

    async def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = await self._get("/api/v1/query", params)
        res = data["result"]
        return res if isinstance(res, list) else []

    async def query_range(self, expr: str, start: float, end: float,
                          step: float) -> list[dict[str, Any]]:
        data = await self._get("/api/v1/query_range", {
            "query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"})
        res = data["result"]
        return res if isinstance(res, list) else []


def _value(item: dict[str, Any]) -> float | None:
    try:
        return finite(float(item["value"][1]))
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def _by_model(result: list[dict[str, Any]], extra: str | None = None
              ) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for item in result:
        metric = item.get("metric") or {}
        model = metric.get("model_name")
        if model is None:
            continue
        key = metric.get(extra, "") if extra else ""
        out.setdefault(model, {})[key] = _value(item)
    return out


async def fetch_figures(prom: PromClient, window_s: float, sel: str = "",
                        at: float | None = None) -> tuple[dict[str, ModelFigures],
                                                          dict[str, float | None]]:
    """All figures per model from Prometheus, plus KV p99 per model."""
    queries = figure_queries(window_s, sel)
    names = list(queries)
    results = await asyncio.gather(*(prom.query(queries[n], at) for n in names))
    r = dict(zip(names, results, strict=True))
    models: set[str] = set()
    for res in results:
        for item in res:
            m = (item.get("metric") or {}).get("model_name")
            if m:
                models.add(m)

    def one(name: str, model: str) -> float | None:
        return _by_model(r[name]).get(model, {}).get("")

    def zero_if_missing(name: str, model: str) -> float | None:
        v = one(name, model)
        return 0.0 if v is None and model in _by_model(r[name]) else v

    figures: dict[str, ModelFigures] = {}
    kv_p99: dict[str, float | None] = {}
    for model in sorted(models):
        per = _by_model(r["spec_per_pos"], "position").get(model, {})
        spec = None
        if model in _by_model(r["spec_drafts"]) or model in _by_model(r["spec_draft_tokens"]):
            drafts = one("spec_drafts", model)
            dtoks = one("spec_draft_tokens", model)
            acc = one("spec_accepted", model)
            mean = safe_ratio(acc, drafts)
            spec = SpecFigures(
                drafts=drafts or 0.0, draft_tokens=dtoks or 0.0, accepted_tokens=acc or 0.0,
                acceptance_rate=safe_ratio(acc, dtoks),
                mean_acceptance_length=None if mean is None else 1 + mean,
                per_position=tuple(safe_ratio(per[p], drafts)
                                   for p in sorted(per, key=lambda x: int(x) if x.isdigit()
                                                   else math.inf)),
                drafts_per_s=safe_ratio(drafts, window_s))
        cache = None
        for item in r["cache_config"]:
            labels = item.get("metric") or {}
            if labels.get("model_name", model) == model:
                cache = CacheConfig.from_labels(labels)
                break
        reasons = {k: v for k, v in _by_model(r["requests"], "finished_reason")
                   .get(model, {}).items() if v is not None}
        figures[model] = ModelFigures(
            model_name=model, window_s=window_s,
            kv_cache_usage=one("kv", model), running=one("running", model),
            waiting=one("waiting", model), preemptions=one("preemptions", model),
            prompt_tokens=one("prompt_tokens", model),
            generation_tokens=one("generation_tokens", model),
            ttft_p50_s=one("ttft_p50", model), ttft_p95_s=one("ttft_p95", model),
            ttft_p99_s=one("ttft_p99", model), itl_p95_s=one("itl_p95", model),
            e2e_p95_s=one("e2e_p95", model), queue_p95_s=one("queue_p95", model),
            prefill_p95_s=one("prefill_p95", model), decode_p95_s=one("decode_p95", model),
            prefix_cache_hit_rate=safe_ratio(one("prefix_hits", model),
                                             one("prefix_queries", model)),
            requests_by_reason=reasons, spec_decode=spec, cache=cache)
        kv_p99[model] = one("kv_p99", model)
    return figures, kv_p99


HISTORY_QUERIES = {
    "ttft_p95": lambda w: quantile_query(0.95, TTFT, w),
    "kv": lambda w: "sum by (model_name) (vllm:kv_cache_usage_perc)",
    "acceptance": lambda w: (f"sum by (model_name) (rate({SPEC_ACCEPTED}[{_w(w)}])) / "
                             f"sum by (model_name) (rate({SPEC_DRAFT_TOKENS}[{_w(w)}]))"),
    "gen_tps": lambda w: f"sum by (model_name) (rate(vllm:generation_tokens_total[{_w(w)}]))",
}
"""Series the plots show, backfilled from range queries at start-up."""


async def fetch_history(prom: PromClient, span_s: float, step_s: float, rate_window_s: float
                        ) -> dict[tuple[str, str], list[tuple[float, float]]]:
    end = time.time()
    start = end - span_s
    names = list(HISTORY_QUERIES)
    results = await asyncio.gather(
        *(prom.query_range(HISTORY_QUERIES[n](rate_window_s), start, end, step_s)
          for n in names), return_exceptions=True)
    out: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for name, res in zip(names, results, strict=True):
        if isinstance(res, BaseException):
            continue
        for item in res:
            model = (item.get("metric") or {}).get("model_name")
            pts = []
            for pair in item.get("values") or []:
                try:
                    v = finite(float(pair[1]))
                    if v is not None:
                        pts.append((float(pair[0]), v))
                except (TypeError, ValueError, IndexError):
                    continue
            if model:
                out[(model, name)] = pts
    return out
