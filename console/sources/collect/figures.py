"""Per-model figures from one or two scrapes of an engine, with the formulas in one place.

With one scrape the figures are lifetime values (counters as they stand);
with two, counters and histogram buckets become increases over the window
between them (a drop is a reset, series by series, as Prometheus reads it) and gauges
come from the later scrape. What each figure is comes from the catalog
(``console/model/catalog.py``); this module evaluates its sources on scrapes,
``console/sources/collect/promql.py`` turns the same sources into PromQL.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from console.model.catalog import (
    MODEL_FIGURES,
    Gauge,
    Increase,
    Quantile,
    Ratio,
    Source,
    sampled,
)
from console.model.engines import DEFAULT, ENGINES, Engine
from console.model.model_figures import CacheConfig, ModelFigures
from console.model.numbers import (
    bucket_quantile,
    counter_delta,
    cumulative_buckets,
    safe_ratio,
)
from console.sources.collect.exposition import (
    Exposition,
    Grouping,
    Labels,
    Layout,
    finite,
    label,
)


class _View:
    """Per-model access to one scrape of ``engine``: series summed across its
    data-parallel ranks (vLLM's ``engine``, SGLang's ``dp_rank``) and maxed across the
    ranks that repeat one scheduler's figures (SGLang's ``tp_rank``)."""

    def __init__(self, exp: Exposition, engine: Engine = DEFAULT) -> None:
        self.exp = exp
        self.engine = engine
        self.prefix = engine.prefix
        self.restarted_families: set[str] = set()

    def models(self) -> set[str]:
        out: set[str] = set()
        for name, fam in self.exp.samples.items():
            if name.startswith(self.prefix):
                for labels in fam:
                    m = label(labels, "model_name")
                    if m is not None:
                        out.add(m)
        return out

    def has_model(self, model: str) -> bool:
        """Whether any of the engine's families has a series of ``model`` (through the
        per-family index: no scan of every series when a slot asks for its own model)."""
        p = self.prefix
        return any(name.startswith(p) and model in self.exp.by_label(name, "model_name")
                   for name in self.exp.names())

    def parts(self, name: str, model: str, group: str | None = None,
              across: str = "sum") -> dict[str, dict[Labels, float]]:
        """``name``'s series of ``model`` by the value of label ``group``, each group's
        series reduced to one value per part: the series that differ only in a replica
        label (and, ``across="max"``, a partition label) are one part, their largest
        finite value (NaN when none is). A group's figure is the sum of its parts; a
        counter's increase is the sum of its parts' increases (a rank missing from one
        end is no decrease). Kept on the scrape, like ``by_model``."""
        drop = set(self.engine.replicas)
        if across == "max":
            drop.update(self.engine.partitions)
        k = (name, model, group, (across,))
        hit = self.exp._parts.get(k)
        if hit is not None:
            return hit
        collect: dict[str, dict[Labels, list[float]]] = {}
        for labels, v in self.exp.by_label(name, "model_name").get(model, ()):
            gv = label(labels, group) if group else ""
            if gv is None:
                continue
            key = tuple((lk, lv) for lk, lv in labels
                        if lk not in drop and lk != group and lk != "model_name")
            collect.setdefault(gv, {}).setdefault(key, []).append(v)
        out: dict[str, dict[Labels, float]] = {}
        for gv, parts in collect.items():
            red: dict[Labels, float] = {}
            for key, vals in parts.items():
                ok = [x for x in vals if finite(x) is not None]
                red[key] = max(ok) if ok else math.nan
            out[gv] = red
        self.exp._parts[k] = out
        return out

    def _reduces(self, name: str, model: str, across: str) -> bool:
        """Whether ``name``'s series of ``model`` are more than a plain sum: a usage
        maxed across ranks, or a series repeated by a replica rank."""
        if across == "max" and self.engine.partitions:
            return True
        reps = self.engine.replicas
        if not reps:
            return False
        for labels, _ in self.exp.by_label(name, "model_name").get(model, ()):
            for lk, lv in labels:
                if lk in reps and lv not in ("0", ""):
                    return True
        return False

    def by_model(self, name: str, model: str, group: str | None = None,
                 across: str = "sum") -> dict[str, float]:
        """Sum of ``name`` over all series of ``model``, grouped by label ``group``
        (across the engine's ranks as ``parts`` reduces them, where they repeat).

        Kept on the exposition: a scrape is read again as the earlier end of later
        windows, and asked the same sums each time. Callers never change the dict.
        Which series each sum takes is worked out once per layout for the scrapes read
        by one (``exposition.Layout``), and per scrape for the others."""
        if self._reduces(name, model, across):
            return {gv: math.fsum(parts.values())
                    for gv, parts in self.parts(name, model, group, across).items()}
        cache = self.exp._sums
        k = (name, model, group)
        hit = cache.get(k)
        if hit is not None:
            return hit
        lay, values = self.exp._layout, self.exp._values
        if lay is not None and values is not None:
            g = _layout_grouping(lay, name, model, group)
        else:
            series = self.exp.by_label(name, "model_name").get(model, ())
            values = [v for _, v in series]
            g = _grouping([ls for ls, _ in series], range(len(series)), group)
        res = cache[k] = _sums(g, values)
        return res

    def total(self, name: str, model: str, across: str = "sum") -> float | None:
        vals = self.by_model(name, model, across=across)
        return vals.get("") if vals else None


def _grouping(labels: Sequence[Labels], at: Sequence[int], group: str | None) -> Grouping:
    """Which values each group sums: series i, with label sets ``labels[i]``, has its
    value at ``at[i]``. Without ``group``, one group ("") of every series; with it, one
    per value of that label, and a series without the label is in none."""
    out: dict[str, list[int]] = {}
    if not group:
        if labels:
            out[""] = list(at)
    else:
        for ls, i in zip(labels, at, strict=True):
            for lk, lv in ls:
                if lk == group:
                    out.setdefault(lv, []).append(i)
                    break
    ixs = tuple(tuple(ix) for ix in out.values())
    singles = tuple(ix[0] for ix in ixs) if all(len(ix) == 1 for ix in ixs) else None
    return tuple(out), ixs, singles


def _layout_grouping(lay: Layout, name: str, model: str, group: str | None) -> Grouping:
    """``_grouping`` of a family's series of ``model`` in a layout, worked out once."""
    k = (name, model, group)
    g = lay.groupings.get(k)
    if g is None:
        labels, at = lay.by_model.get((name, model), ((), ()))
        g = lay.groupings[k] = _grouping(labels, at, group)
    return g


def _sums(g: Grouping, values: Sequence[float]) -> dict[str, float]:
    """Each group's sum: a group of one series is its value."""
    keys, ixs, singles = g
    if singles is not None:
        return {k: values[i] for k, i in zip(keys, singles)}  # noqa: B905 (made together)
    return {k: sum(map(values.__getitem__, ix)) for k, ix in zip(keys, ixs)}  # noqa: B905


def _delta_map(a: Mapping[Any, float], b: Mapping[Any, float]) -> dict[Any, float]:
    """Each series' increase as Prometheus's ``increase`` reads two samples: a drop is a
    reset, the later value counted from zero (``counter_delta``), series by series. A
    restart is told by nothing else: the ``*_created`` stamps Prometheus ignores would
    count a whole family from zero, where its series that did not drop moved less."""
    return {k: counter_delta(a.get(k, 0.0), v) for k, v in b.items()}


class _Window:
    """Counters and histograms as lifetime values (one scrape) or increases (two)."""

    def __init__(self, later: Exposition, earlier: Exposition | None, model: str,
                 engine: Engine = DEFAULT) -> None:
        self.now = _View(later, engine)
        self.before = _View(earlier, engine) if earlier is not None else None
        self.model = model
        self._counters: dict[tuple[str, str | None], dict[str, float]] = {}
        self._buckets: dict[str, list[list[float]] | None] = {}
        # Both ends read by one layout (the usual window): each series sits at the same
        # index in both, so an increase is read pairwise from the two ends' values.
        lay = later._layout
        self._pair: tuple[Layout, list[float], list[float]] | None = None
        if (earlier is not None and lay is not None and earlier._layout is lay
                and later._values is not None and earlier._values is not None):
            self._pair = (lay, earlier._values, later._values)

    def counter(self, name: str, group: str | None = None) -> dict[str, float]:
        """Reset-aware increases of ``name`` by ``group`` (callers never change it);
        asked once per window, however many figures read the family."""
        k = (name, group)
        hit = self._counters.get(k)
        if hit is not None:
            return hit
        if self._pair is not None and self.before is not None:
            lay, before, now = self._pair
            keys, _, singles = _layout_grouping(lay, name, self.model, group)
            if singles is not None:  # each group one series: the sums are the values
                pairs = zip(keys, singles)  # noqa: B905 (one _grouping made both)
                # what _delta_map makes of the two ends' sums
                b = {key: counter_delta(before[i], now[i]) for key, i in pairs}
                self._counters[k] = b
                return b
        if self.before is None:
            b = self.now.by_model(name, self.model, group)
        else:
            # Prometheus' sum(increase()): each series' (each rank's) own increase,
            # summed; a rank that left is no decrease, one that came counts from zero
            pa = self.before.parts(name, self.model, group)
            b = {gv: math.fsum(_delta_map(pa.get(gv, {}), parts).values())
                 for gv, parts in self.now.parts(name, self.model, group).items()}
        self._counters[k] = b
        return b

    def counter_total(self, name: str) -> float | None:
        vals = self.counter(name)
        return finite(vals.get("")) if vals else None

    def buckets(self, hist: str) -> list[list[float]] | None:
        """The window's bucket increases of ``hist``, prepared once for all its
        quantiles (``numbers.cumulative_buckets``); None when there are none to read."""
        if hist in self._buckets:
            return self._buckets[hist]
        b = self.counter(hist + "_bucket", "le")
        out: list[list[float]] | None = None
        if b:
            vals = list(b.values())
            out = cumulative_buckets([(bound, vals[i]) for i, bound in _bounds(tuple(b))])
        self._buckets[hist] = out
        return out

    def quantile(self, q: float, hist: str) -> float | None:
        return finite(bucket_quantile(q, self.buckets(hist)))


@functools.lru_cache(maxsize=256)
def _bounds(les: tuple[str, ...]) -> tuple[tuple[int, float], ...]:
    """(index, bound) of each ``le`` that reads as a number: an unreadable bound is no
    bucket. A histogram has the same bounds every scrape: read once, not per window."""
    out = []
    for i, le in enumerate(les):
        try:
            out.append((i, float(le)))
        except ValueError:
            continue
    return tuple(out)


def _cache_config(exp: Exposition, model: str, engine: Engine) -> CacheConfig | None:
    if engine.cache_config is None:
        return None
    for labels in exp.series(engine.cache_config):
        d = dict(labels)
        if d.get("model_name", model) == model:
            return CacheConfig.from_labels(d)
    return None


def _first(view: _View, names: tuple[str, ...], suffix: str = "") -> str | None:
    """The first family present (current name first, then the older ones)."""
    exp = view.exp
    for n in names:
        if n + suffix in exp:
            return n
    return None


def evaluate(source: Source, w: _Window, window_s: float | None) -> float | None:
    """One catalog source over one scrape (lifetime) or two (window)."""
    if isinstance(source, Gauge):
        name = _first(w.now, source.names)
        if name is None:
            return None
        if source.where is None:
            return finite(w.now.total(name, w.model, source.across))
        lab, want = source.where
        return finite(w.now.by_model(name, w.model, lab, source.across).get(want))
    if isinstance(source, Increase):
        name = _first(w.now, source.names)
        value = w.counter_total(name) if name else None
        if not source.per_second:
            return value
        return finite(safe_ratio(value, window_s)) if window_s else None
    if isinstance(source, Quantile):
        name = _first(w.now, source.names, "_bucket")
        return w.quantile(source.q, name) if name else None
    if isinstance(source, Ratio):
        num, den = _first(w.now, source.num), _first(w.now, source.den)
        r = safe_ratio(w.counter_total(num) if num else None,
                       w.counter_total(den) if den else None)
        return None if r is None else finite(source.plus + r)
    raise TypeError(f"not a model figure source: {source!r}")


def engine_of(exp: Exposition) -> Engine:
    """The engine whose families a scrape holds (vLLM when none is told)."""
    names = exp.names()
    for e in ENGINES.values():
        if any(n.startswith(e.prefix) for n in names):
            return e
    return DEFAULT


def compute(later: Exposition, earlier: Exposition | None = None,
            window_s: float | None = None, only: str | None = None,
            engine: Engine | None = None, least: bool = True) -> dict[str, ModelFigures]:
    """Figures per ``model_name`` from one scrape (lifetime) or two (window).

    ``only`` computes one model's figures (a slot polls its own ``model_name``; the
    other models in the exposition cost nothing beyond being parsed). A NaN or ±Inf
    sample never reaches a figure: it is undefined (None), like a missing one. A figure
    the engine does not export is None too (``engine``: told by the slot's profile, or
    by the scrape's families). ``least``: a ratio below its least sample is undefined
    (``catalog.sampled``); a bench reading its own requests' window turns it off."""
    eng = engine or engine_of(later)
    view = _View(later, eng)
    out: dict[str, ModelFigures] = {}
    models = (view.models() if only is None else
              {only} if view.has_model(only) else set())
    window = window_s if earlier is not None else None
    for model in sorted(models):
        w = _Window(later, earlier, model, eng)
        values: dict[str, float | None] = {}
        for fig in MODEL_FIGURES:
            src = fig.source_for(eng)
            values[fig.key] = None if src is None else evaluate(src, w, window)
        spec = values["spec_drafts"] is not None or values["spec_draft_tokens"] is not None
        per_pos: tuple[float | None, ...] = ()
        if spec and eng.per_position is not None:
            per = w.counter(*eng.per_position)
            positions = sorted(per, key=lambda p: int(p) if p.isdigit() else 1 << 30)
            per_pos = tuple(finite(safe_ratio(finite(per[p]), values["spec_drafts"]))
                            for p in positions)
        finished = w.counter(*eng.finished) if eng.finished else {}
        if least:
            values, per_pos = sampled(values, per_pos)
        slo = {}
        for kind, hist in eng.slo.items():
            got = w.buckets(hist) if hist + "_bucket" in later else None
            if got is not None:
                slo[kind] = tuple((b, c) for b, c in got)
        out[model] = ModelFigures(
            model_name=model, window_s=window, values=values,
            requests_by_reason={k: v for k, v in finished.items() if finite(v) is not None},
            per_position=per_pos, spec=spec, cache=_cache_config(later, model, eng),
            engine=eng.name, latency_buckets=slo)
    return out
