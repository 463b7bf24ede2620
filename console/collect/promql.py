"""The PromQL twin of the catalog's sources, and a small async API client.

Each figure of ``console/catalog.py`` becomes one query that returns every model at
once (``by (model_name)``), so a refresh costs a fixed number of queries whatever the
number of slots. Older vLLM names join the current one with ``or``.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import Any

from ..catalog import (
    CATALOG,
    MODEL_FIGURES,
    SPEC_PER_POS,
    Gauge,
    Increase,
    OverTime,
    Quantile,
    Ratio,
    Source,
)
from ..numbers import safe_ratio
from .exposition import finite
from .figures import CacheConfig, ModelFigures
from .http import HttpClient, HttpError


def _w(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"


def _selector(sel: str, where: tuple[str, str] | None) -> str:
    """``{pod="abc"}`` plus ``reason="capacity"``: one selector with both matchers."""
    if where is None:
        return sel
    matcher = f'{where[0]}="{where[1]}"'
    return "{" + matcher + "}" if not sel else sel[:-1] + "," + matcher + "}"


def quantile_query(q: float, hist: str, window_s: float, sel: str = "") -> str:
    return (f"histogram_quantile({q}, sum by (model_name, le) "
            f"(rate({hist}_bucket{sel}[{_w(window_s)}])))")


def _either(exprs: list[str]) -> str:
    return exprs[0] if len(exprs) == 1 else "(" + " or ".join(exprs) + ")"


def source_query(source: Source, window_s: float, sel: str = "") -> str:
    """PromQL for one catalog source, every model at once."""
    w = _w(window_s)
    if isinstance(source, Gauge):
        return _either([f"sum by (model_name) ({n}{_selector(sel, source.where)})"
                        for n in source.names])
    if isinstance(source, Increase):
        fn = "rate" if source.per_second else "increase"
        return _either([f"sum by (model_name) ({fn}({n}{sel}[{w}]))" for n in source.names])
    if isinstance(source, Quantile):
        return _either([quantile_query(source.q, n, window_s, sel) for n in source.names])
    if isinstance(source, Ratio):
        num = source_query(Increase(source.num), window_s, sel)
        den = source_query(Increase(source.den), window_s, sel)
        # a zero denominator gives NaN or ±Inf, which read back as undefined
        expr = f"{num} / {den}"
        return f"{source.plus:g} + {expr}" if source.plus else expr
    if isinstance(source, OverTime):
        g = source.of
        return _either([f"max by (model_name) (quantile_over_time({source.q}, "
                        f"{n}{_selector(sel, g.where)}[{w}]))" for n in g.names])
    raise TypeError(f"no PromQL for {source!r}")


def figure_queries(window_s: float, sel: str = "") -> dict[str, str]:
    """Query name → PromQL: one per catalog figure (by its key), plus the vectors."""
    out = {fig.key: source_query(fig.source, window_s, sel) for fig in CATALOG}
    w = _w(window_s)
    out["requests"] = (f"sum by (model_name, finished_reason) "
                       f"(increase(vllm:request_success_total{sel}[{w}]))")
    out["spec_per_pos"] = (f"sum by (model_name, position) "
                           f"(increase({SPEC_PER_POS}{sel}[{w}]))")
    out["cache_config"] = f"vllm:cache_config_info{sel}"
    return out


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
    scalars = {fig.key: _by_model(r[fig.key]) for fig in MODEL_FIGURES}
    per_pos_all = _by_model(r["spec_per_pos"], "position")
    requests = _by_model(r["requests"], "finished_reason")

    figures: dict[str, ModelFigures] = {}
    for model in sorted(models):
        values = {k: v.get(model, {}).get("") for k, v in scalars.items()}
        spec = model in scalars["spec_drafts"] or model in scalars["spec_draft_tokens"]
        per = per_pos_all.get(model, {})
        per_pos = tuple(safe_ratio(per[p], values["spec_drafts"])
                        for p in sorted(per, key=lambda x: int(x) if x.isdigit()
                                        else math.inf)) if spec else ()
        cache = None
        for item in r["cache_config"]:
            labels = item.get("metric") or {}
            if labels.get("model_name", model) == model:
                cache = CacheConfig.from_labels(labels)
                break
        reasons = {k: v for k, v in requests.get(model, {}).items() if v is not None}
        figures[model] = ModelFigures(
            model_name=model, window_s=window_s, values=values, requests_by_reason=reasons,
            per_position=per_pos, spec=spec, cache=cache)
    kv_p99 = {m: v.get("") for m, v in _by_model(r["kv_p99"]).items()}
    return figures, kv_p99


def history_queries(rate_window_s: float, sel: str = "") -> dict[str, str]:
    """The plotted figures as range queries (by catalog key), to backfill the plots;
    ``sel`` narrows them to this pod's series, as the live queries are."""
    return {fig.key: source_query(fig.source, rate_window_s, sel)
            for fig in CATALOG if fig.plot is not None}


async def fetch_history(prom: PromClient, span_s: float, step_s: float, rate_window_s: float,
                        sel: str = "") -> dict[tuple[str, str], list[tuple[float, float]]]:
    end = time.time()
    start = end - span_s
    queries = history_queries(rate_window_s, sel)
    names = list(queries)
    results = await asyncio.gather(
        *(prom.query_range(queries[n], start, end, step_s) for n in names),
        return_exceptions=True)
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
