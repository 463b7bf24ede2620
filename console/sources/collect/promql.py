"""The PromQL twin of the catalog's sources, and a small async API client.

Each figure of ``console/model/catalog.py`` becomes one query that returns every model at
once (``by (model_name)``), so a refresh costs a fixed number of queries whatever the
number of slots; grouped ``by (pod, slot, model_name)`` it returns every slot of every
pod at once (``fetch_fleet``), the same number of queries for one pod or fifty. Older
vLLM names join the current one with ``or``, and so do the engines: a figure's query
is vLLM's ``or`` SGLang's (their families differ, so each model answers from its own).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from typing import Any

from msgspec import Struct

from console.model.catalog import (
    CATALOG,
    MODEL_FIGURES,
    SPEC_PER_POS,
    Gauge,
    Increase,
    OverTime,
    Quantile,
    Ratio,
    Source,
    sampled,
)
from console.model.engines import DEFAULT, ENGINES, Engine
from console.model.model_figures import RANK_FIGURES, CacheConfig, ModelFigures
from console.model.numbers import cumulative_buckets, safe_ratio
from console.sources.collect.exposition import finite
from console.sources.collect.http import HttpClient, HttpError


def _w(seconds: float) -> str:
    """A PromQL range as a person writes it: ``5m``, ``90s``, ``1h``; milliseconds only
    for a window that is not whole seconds."""
    ms = round(seconds * 1000)
    if ms % 1000:
        return f"{ms}ms"
    s = ms // 1000
    for unit, size in (("h", 3600), ("m", 60)):
        if s and s % size == 0:
            return f"{s // size}{unit}"
    return f"{s}s"


def _selector(sel: str, where: tuple[str, str] | None) -> str:
    """``{pod="abc"}`` plus ``reason="capacity"``: one selector with both matchers."""
    if where is None:
        return sel
    matcher = f'{where[0]}="{where[1]}"'
    return "{" + matcher + "}" if not sel else sel[:-1] + "," + matcher + "}"


def _match_selector(sel: str, match: tuple[str, str] | None) -> str:
    """``sel`` plus a source's ``match`` (label, regular expression) as PromQL's ``=~``:
    the gateway's 5xx are ``exception_status=~"5.."``."""
    if match is None:
        return sel
    matcher = f'{match[0]}=~"{match[1]}"'
    return "{" + matcher + "}" if not sel else sel[:-1] + "," + matcher + "}"


SLO_KINDS = ("ttft", "tpot")
"""The latencies SLO attainment is counted for (``Engine.slo``)."""
MODEL_BY = ("model_name",)
FLEET_BY = ("pod", "slot", "model_name")
GATEWAY_BY = ("model_id",)
"""The gateway's figures per deployment (LiteLLM's ``model_id``)."""
USERS_BY = ("end_user",)
"""The gateway's usage per user (the request's ``user``; a key's alias with keys)."""
"""The labels ``profile render`` gives each slot's target (pod, slot) and vLLM gives
each series (model_name): one series per slot of every pod."""


def quantile_query(q: float, hist: str, window_s: float, sel: str = "",
                   by: tuple[str, ...] = MODEL_BY) -> str:
    return (f"histogram_quantile({q}, sum by ({', '.join(by)}, le) "
            f"(rate({hist}_bucket{sel}[{_w(window_s)}])))")


def _either(exprs: list[str]) -> str:
    return exprs[0] if len(exprs) == 1 else "(" + " or ".join(exprs) + ")"


def _one(expr: str, engine: Engine) -> str:
    """``expr`` with the engine's replica ranks (one scheduler's figures repeated) maxed
    away, so the sum around it counts each once."""
    if not engine.replicas:
        return expr
    return f"max without ({', '.join(engine.replicas)}) ({expr})"


def source_query(source: Source, window_s: float, sel: str = "",
                 by: tuple[str, ...] = MODEL_BY, engine: Engine = DEFAULT,
                 gauge: str | None = None) -> str:
    """PromQL for one catalog source, every model (or every slot, every gateway
    deployment: ``by``) at once; ``gauge``: how a gauge's series are joined (else as
    the source says)."""
    w = _w(window_s)
    g = ", ".join(by)
    if isinstance(source, Gauge):
        agg = gauge or ("max" if source.across == "max" else "sum")
        return _either([f"{agg} by ({g}) ({_one(n + _selector(sel, source.where), engine)})"
                        for n in source.names])
    if isinstance(source, Increase):
        fn = "rate" if source.per_second else "increase"
        m = _match_selector(sel, source.match)
        return _either([f"sum by ({g}) ({_one(f'{fn}({n}{m}[{w}])', engine)})"
                        for n in source.names])
    if isinstance(source, Quantile):
        if engine.replicas:
            return _either([f"histogram_quantile({source.q}, sum by ({g}, le) "
                            f"({_one(f'rate({n}_bucket{sel}[{w}])', engine)}))"
                            for n in source.names])
        return _either([quantile_query(source.q, n, window_s, sel, by) for n in source.names])
    if isinstance(source, Ratio):
        num = source_query(Increase(source.num, match=source.match), window_s, sel, by,
                           engine)
        den = source_query(Increase(source.den), window_s, sel, by, engine)
        # a zero denominator gives NaN or ±Inf, which read back as undefined
        expr = f"{num} / {den}"
        return f"{source.plus:g} + {expr}" if source.plus else expr
    if isinstance(source, OverTime):
        og = source.of
        return _either([f"max by ({g}) (quantile_over_time({source.q}, "
                        f"{n}{_selector(sel, og.where)}[{w}]))" for n in og.names])
    raise TypeError(f"no PromQL for {source!r}")


def le_matcher(edge: float) -> str:
    """``le=~"…"`` matching a bucket edge however the exposition spells it: vLLM writes
    ``0.5`` and ``1.0``, Prometheus 3 normalises ``1.0`` to ``1``."""
    text = f"{edge:g}"
    if "e" in text:
        text = repr(float(edge))
    pattern = text.replace(".", "\\\\.") + ("0*" if "." in text else "(\\\\.0+)?")
    return f'le=~"{pattern}"'


def slo_share_query(engine: Engine, kind: str, edge: float, window_s: float,
                    sel: str = "", by: tuple[str, ...] = MODEL_BY) -> tuple[str, str]:
    """(share, requests): the window's requests at or under ``edge`` over all of them,
    from the bucket increases of the engine's ``kind`` histogram (``Engine.slo``), and
    their count (the ``+Inf`` bucket): SLO attainment (``console/model/slo.py``)."""
    hist, w, g = engine.slo[kind] + "_bucket", _w(window_s), ", ".join(by)
    inner = sel[1:-1] + "," if sel else ""

    def increase(le: str) -> str:
        return f"sum by ({g}) ({_one(f'increase({hist}{{{inner}{le}}}[{w}])', engine)})"

    every = increase('le="+Inf"')
    return f"{increase(le_matcher(edge))} / {every}", every


def engines_query(key: str, window_s: float, sel: str = "",
                  by: tuple[str, ...] = MODEL_BY) -> str | None:
    """One figure's query across the engines that export it: vLLM's ``or`` SGLang's."""
    exprs = []
    for eng in ENGINES.values():
        src = eng.sources.get(key)
        if src is not None:
            exprs.append(source_query(src, window_s, sel, by, eng))
    if not exprs:
        return None
    return exprs[0] if len(exprs) == 1 else "(" + ") or (".join(exprs) + ")"


def figure_queries(window_s: float, sel: str = "", by: tuple[str, ...] = MODEL_BY
                   ) -> dict[str, str]:
    """Query name → PromQL: one per catalog figure (by its key), plus the vectors."""
    out = {}
    for fig in CATALOG:
        q = engines_query(fig.key, window_s, sel, by)
        if q is not None:
            out[fig.key] = q
    w = _w(window_s)
    g = ", ".join(by)
    out["requests"] = (f"sum by ({g}, finished_reason) "
                       f"(increase(vllm:request_success_total{sel}[{w}]))")
    out["spec_per_pos"] = (f"sum by ({g}, position) "
                           f"(increase({SPEC_PER_POS}{sel}[{w}]))")
    out["cache_config"] = f"vllm:cache_config_info{sel}"
    # the per-request latency histograms' bucket increases: SLO attainment's counts
    for kind in SLO_KINDS:
        per_engine = [f"sum by ({g}, le) (increase({eng.slo[kind]}_bucket{sel}[{w}]))"
                      for eng in ENGINES.values() if kind in eng.slo]
        if per_engine:
            out[f"slo:{kind}"] = _either(per_engine)
    out.update(rank_queries(sel, by))
    for eng in ENGINES.values():
        if eng is not DEFAULT:  # which models are this engine's (the rest are vLLM's)
            gauge = next(n for n in eng.families() if n.endswith("running_reqs"))
            out[f"engine:{eng.name}"] = f"group by ({g}) ({gauge}{sel})"
    return out


def rank_queries(sel: str = "", by: tuple[str, ...] = MODEL_BY) -> dict[str, str]:
    """``ranks:<engine>:<figure>`` → each data-parallel engine's own ``RANK_FIGURES``
    (``ModelFigures.ranks``), grouped by the engine's partition label as well."""
    out = {}
    for eng in ENGINES.values():
        if not eng.partitions:
            continue
        for key in RANK_FIGURES:
            src = eng.sources.get(key)
            if isinstance(src, Gauge) and src.where is None:
                out[f"ranks:{eng.name}:{key}"] = source_query(
                    src, 60.0, sel, (*by, eng.partitions[0]), eng, gauge="sum")
    return out


def _ranks(r: dict[str, list[dict[str, Any]]], by: tuple[str, ...], engine: str,
           key: tuple[str, ...]) -> dict[str, dict[str, float | None]]:
    """One group's engines (``rank_queries``' answers); empty for one engine, or for
    answers without them (a recording made before they were asked)."""
    eng = ENGINES.get(engine)
    if eng is None or not eng.partitions:
        return {}
    out: dict[str, dict[str, float | None]] = {}
    for fig in RANK_FIGURES:
        res = r.get(f"ranks:{engine}:{fig}")
        if not res:
            continue
        for rank, v in _grouped(res, by, eng.partitions[0]).get(key, {}).items():
            if rank:
                out.setdefault(rank, {})[fig] = v
    return out if len(out) > 1 else {}


class PromError(Exception):
    pass


class PromClient(Struct, frozen=True):
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
        if not isinstance(data, dict) or ("result" not in data and "yaml" not in data):
            raise PromError("answer without data.result")
        return data

    async def config_text(self) -> str:
        """Prometheus's loaded configuration (``/api/v1/status/config``), as YAML text."""
        data = await self._get("/api/v1/status/config", {})
        text = data.get("yaml") if isinstance(data, dict) else None
        if not isinstance(text, str):
            raise PromError("answer without data.yaml")
        return text

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


_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0,
           "y": 31536000.0}


def prom_duration(text: str) -> float | None:
    """A Prometheus duration (``15s``, ``1m30s``, ``500ms``) in seconds; None when it is
    not one."""
    text = text.strip().strip("'\"")
    if not text or _DURATION.sub("", text):
        return None
    return sum(int(n) * _UNIT_S[u] for n, u in _DURATION.findall(text))


def scrape_settle_s(config_yaml: str) -> float | None:
    """How long after a sample's timestamp Prometheus may still be appending it: the
    global ``scrape_timeout`` (a scrape stamped at t is in the TSDB, or failed, by
    t + timeout). Read from the ``global:`` block of the loaded config, which Prometheus
    writes out whole (defaults filled in); None when it does not say."""
    block = re.search(r"^global:\n((?:[ \t]+.*\n?)*)", config_yaml, re.M)
    if block is None:
        return None
    got = re.search(r"^[ \t]+scrape_timeout:[ \t]*(\S+)", block[1], re.M)
    return prom_duration(got[1]) if got else None


_settle: dict[str, float] = {}
"""Per Prometheus URL: its ``scrape_settle_s`` (0.0 where it would not say)."""


async def poll_instant(prom: PromClient, now: float | None = None) -> float:
    """The one instant every query of a poll is evaluated at (``time=``, and the end of
    every range in them): now, less the time a scrape under way may take to land, so a
    sample stamped at or before it cannot arrive between two queries of the poll (the
    ratio of two queries then reads one set of samples: never 100.1 %). Whole
    milliseconds, as Prometheus keeps time. The settle is asked once per Prometheus."""
    settle = _settle.get(prom.base_url)
    if settle is None:
        try:
            settle = scrape_settle_s(await prom.config_text()) or 0.0
        except PromError as exc:
            if str(exc).startswith("HTTP "):  # it answered: it will not say (a proxy, Thanos)
                _settle[prom.base_url] = 0.0
            settle = 0.0
        else:
            _settle[prom.base_url] = settle
    t = time.time() if now is None else now
    return math.floor((t - settle) * 1000) / 1000


def _value(item: dict[str, Any]) -> float | None:
    try:
        return finite(float(item["value"][1]))
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def _is_bound(le: str) -> bool:
    try:
        float(le)
    except ValueError:
        return False
    return True


def _grouped(result: list[dict[str, Any]], by: tuple[str, ...], extra: str | None = None
             ) -> dict[tuple[str, ...], dict[str, float | None]]:
    out: dict[tuple[str, ...], dict[str, float | None]] = {}
    for item in result:
        metric = item.get("metric") or {}
        if any(metric.get(b) is None for b in by):
            continue  # a series without one of the group's labels belongs to no group
        key = tuple(str(metric[b]) for b in by)
        sub = str(metric.get(extra, "")) if extra else ""
        out.setdefault(key, {})[sub] = _value(item)
    return out


async def _fetch(prom: PromClient, window_s: float, sel: str, at: float | None,
                 by: tuple[str, ...], answers: dict[str, Any] | None = None
                 ) -> tuple[dict[tuple[str, ...], ModelFigures],
                            dict[tuple[str, ...], float | None]]:
    """Every figure per group (``by``'s label values) from one query per figure, every
    query at one instant (``at``, else ``poll_instant``'s)."""
    queries = figure_queries(window_s, sel, by)
    names = list(queries)
    when = await poll_instant(prom) if at is None else at
    results = await asyncio.gather(*(prom.query(queries[n], when) for n in names))
    r = dict(zip(names, results, strict=True))
    if answers is not None:
        answers.update(r)
    return figures_from_answers(r, window_s, by, when)


def figures_from_answers(r: dict[str, list[dict[str, Any]]], window_s: float,
                         by: tuple[str, ...] = MODEL_BY, at: float | None = None
                         ) -> tuple[dict[tuple[str, ...], ModelFigures],
                                    dict[tuple[str, ...], float | None]]:
    """Every figure per group from Prometheus's answers to ``figure_queries`` (what a
    live poll got, or a recording of it), evaluated at ``at``."""
    results = list(r.values())
    keys: set[tuple[str, ...]] = set()
    for res in results:
        keys.update(_grouped(res, by))
    scalars = {fig.key: _grouped(r[fig.key], by) if fig.key in r else {}
               for fig in MODEL_FIGURES}
    engine_of = {key: name.split(":", 1)[1] for name in r if name.startswith("engine:")
                 for key in _grouped(r[name], by)}
    per_pos_all = _grouped(r["spec_per_pos"], by, "position")
    slo_all = {kind: _grouped(r[f"slo:{kind}"], by, "le") for kind in SLO_KINDS
               if f"slo:{kind}" in r}
    requests = _grouped(r["requests"], by, "finished_reason")
    model_at = by.index("model_name")

    figures: dict[tuple[str, ...], ModelFigures] = {}
    for key in sorted(keys):
        values = {k: v.get(key, {}).get("") for k, v in scalars.items()}
        spec = key in scalars["spec_drafts"] or key in scalars["spec_draft_tokens"]
        per = per_pos_all.get(key, {})
        per_pos = tuple(safe_ratio(per[p], values["spec_drafts"])
                        for p in sorted(per, key=lambda x: int(x) if x.isdigit()
                                        else math.inf)) if spec else ()
        cache = None
        for item in r["cache_config"]:
            labels = item.get("metric") or {}
            if all(labels.get(b, k) == k for b, k in zip(by, key, strict=True)):
                cache = CacheConfig.from_labels(labels)
                break
        reasons = {k: v for k, v in requests.get(key, {}).items() if v is not None}
        values, per_pos = sampled(values, per_pos)
        slo = {}
        for kind, grouped in slo_all.items():
            got = cumulative_buckets([(float(le), v) for le, v in grouped.get(key, {}).items()
                                      if v is not None and _is_bound(le)])
            if got is not None:
                slo[kind] = tuple((b, c) for b, c in got)
        figures[key] = ModelFigures(
            model_name=key[model_at], window_s=window_s, values=values,
            requests_by_reason=reasons, per_position=per_pos, spec=spec, cache=cache,
            engine=engine_of.get(key, DEFAULT.name), at=at, latency_buckets=slo,
            ranks=_ranks(r, by, engine_of.get(key, DEFAULT.name), key))
    kv_p99 = {k: v.get("") for k, v in _grouped(r["kv_p99"], by).items()}
    return figures, kv_p99


async def fetch_figures(prom: PromClient, window_s: float, sel: str = "",
                        at: float | None = None, answers: dict[str, Any] | None = None
                        ) -> tuple[dict[str, ModelFigures], dict[str, float | None]]:
    """All figures per model from Prometheus, plus KV p99 per model. ``answers``: filled
    with Prometheus's answers, by query name (what a recording keeps)."""
    figs, kv = await _fetch(prom, window_s, sel, at, MODEL_BY, answers)
    return by_model(figs, kv)


def by_model(figs: dict[tuple[str, ...], ModelFigures], kv: dict[tuple[str, ...], float | None]
             ) -> tuple[dict[str, ModelFigures], dict[str, float | None]]:
    return {k[0]: f for k, f in figs.items()}, {k[0]: v for k, v in kv.items()}


def pods_selector(pods: list[str] | tuple[str, ...] | None) -> str:
    """``{pod=~"a|b"}`` for those pods (regex-quoted), ``{pod!=""}`` for every pod."""
    if not pods:
        return '{pod!=""}'
    import re

    alts = "|".join(re.escape(p).replace("\\", "\\\\").replace('"', '\\"')
                    for p in pods)
    return '{pod=~"' + alts + '"}'


async def fetch_fleet(prom: PromClient, window_s: float,
                      pods: list[str] | tuple[str, ...] | None = None,
                      at: float | None = None
                      ) -> tuple[dict[tuple[str, str], ModelFigures],
                                 dict[tuple[str, str], float | None]]:
    """Every slot of every pod (or of ``pods``), keyed ``(pod, slot)``: the same fixed
    number of queries as one pod's refresh, grouped by the labels the rendered targets
    carry. Through a global Prometheus federating per-site ones it reads the same."""
    figs, kv = await _fetch(prom, window_s, pods_selector(pods), at, FLEET_BY)
    return ({(k[0], k[1]): f for k, f in figs.items()},
            {(k[0], k[1]): v for k, v in kv.items()})


def history_queries(rate_window_s: float, sel: str = "") -> dict[str, str]:
    """The plotted figures as range queries (by catalog key), to backfill the plots;
    ``sel`` narrows them to this pod's series, as the live queries are."""
    out = {}
    for fig in CATALOG:
        q = engines_query(fig.key, rate_window_s, sel) if fig.plot is not None else None
        if q is not None:
            out[fig.key] = q
    return out


async def fetch_history(prom: PromClient, span_s: float, step_s: float, rate_window_s: float,
                        sel: str = "", end: float | None = None
                        ) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """The last ``span_s`` up to ``end`` (now), per (model, catalog key)."""
    end = time.time() if end is None else end
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
