"""Per-model figures from one or two vLLM scrapes, with the formulas in one place.

With one scrape the figures are lifetime values (counters as they stand);
with two, counters and histogram buckets become increases over the window
between them (reset-aware) and gauges come from the later scrape. What each figure
is comes from the catalog (``console/catalog.py``); this module evaluates its sources
on scrapes, ``console/collect/promql.py`` turns the same sources into PromQL.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..catalog import BY_KEY, MODEL_FIGURES, SPEC_PER_POS, Gauge, Increase, Quantile, Ratio, Source
from ..numbers import counter_delta, histogram_quantile, safe_ratio
from .exposition import Exposition, Labels, finite, label


@dataclass(frozen=True)
class SpecFigures:
    drafts: float
    draft_tokens: float
    accepted_tokens: float
    acceptance_rate: float | None
    """Δaccepted / Δdraft_tokens."""
    mean_acceptance_length: float | None
    """1 + Δaccepted / Δdrafts (includes the bonus token)."""
    per_position: tuple[float | None, ...]
    """Δaccepted_per_pos[i] / Δdrafts, position 0 first."""
    drafts_per_s: float | None = None


@dataclass(frozen=True)
class CacheConfig:
    num_gpu_blocks: int | None
    block_size: int | None
    gpu_memory_utilization: float | None
    kv_cache_size_tokens: int | None = None

    @classmethod
    def from_labels(cls, labels: dict[str, str]) -> CacheConfig:
        """Read the applied cache config from ``vllm:cache_config_info``'s labels."""
        def num(key: str) -> float | None:
            try:
                return float(labels[key])
            except (KeyError, ValueError):
                return None

        def whole(key: str) -> int | None:
            v = num(key)
            return None if v is None else int(v)

        return cls(num_gpu_blocks=whole("num_gpu_blocks"), block_size=whole("block_size"),
                   gpu_memory_utilization=num("gpu_memory_utilization"),
                   kv_cache_size_tokens=whole("kv_cache_size_tokens"))

    @property
    def kv_tokens(self) -> int | None:
        if self.kv_cache_size_tokens is not None:
            return self.kv_cache_size_tokens
        if self.num_gpu_blocks is not None and self.block_size is not None:
            return self.num_gpu_blocks * self.block_size
        return None


@dataclass(frozen=True)
class ModelFigures:
    """Everything the console shows for one ``model_name``; None means undefined.

    ``values`` holds one number per model figure of the catalog, under its key;
    ``f.ttft_p95_s`` reads ``values["ttft_p95_s"]``."""

    model_name: str
    window_s: float | None
    """Seconds between the two scrapes; None for lifetime figures."""
    values: Mapping[str, float | None]
    requests_by_reason: dict[str, float] = field(default_factory=dict)
    per_position: tuple[float | None, ...] = ()
    """Δaccepted_per_pos[i] / Δdrafts, position 0 first."""
    spec: bool = False
    """The model exports speculative-decoding counters."""
    cache: CacheConfig | None = None

    def __getattr__(self, key: str) -> float | None:
        # only reached for names that are not fields: the catalog's figures
        if key in BY_KEY and not key.startswith("__"):
            return self.values.get(key)
        raise AttributeError(key)

    def value(self, key: str) -> float | None:
        return self.values.get(key)

    @property
    def spec_decode(self) -> SpecFigures | None:
        if not self.spec:
            return None
        v = self.values
        return SpecFigures(
            drafts=v.get("spec_drafts") or 0.0, draft_tokens=v.get("spec_draft_tokens") or 0.0,
            accepted_tokens=v.get("spec_accepted") or 0.0,
            acceptance_rate=v.get("acceptance_rate"),
            mean_acceptance_length=v.get("mean_acceptance_length"),
            per_position=self.per_position, drafts_per_s=v.get("spec_drafts_per_s"))

    @property
    def preemption_rate(self) -> float | None:
        if self.preemptions is None or not self.window_s:
            return None
        return self.preemptions / self.window_s

    @property
    def request_rate(self) -> float | None:
        if not self.requests_by_reason or not self.window_s:
            return None
        return sum(self.requests_by_reason.values()) / self.window_s

    def contract_dict(self) -> dict[str, object]:
        """The exact JSON object of ``pod-console metrics --json`` for this model, in
        catalog order; the speculative figures nest under ``spec_decode``."""
        out: dict[str, object] = {}
        for fig in MODEL_FIGURES:
            if fig.json == "top":
                out[fig.key] = self.values.get(fig.key)
            elif fig.json == "spec" and "spec_decode" not in out:
                s = self.spec_decode
                out["spec_decode"] = None if s is None else {
                    "drafts": s.drafts, "draft_tokens": s.draft_tokens,
                    "accepted_tokens": s.accepted_tokens,
                    "acceptance_rate": s.acceptance_rate,
                    "mean_acceptance_length": s.mean_acceptance_length,
                    "per_position": list(s.per_position)}
        return out


class _View:
    """Per-model access to one scrape (summing over ``engine`` for data parallelism)."""

    def __init__(self, exp: Exposition) -> None:
        self.exp = exp
        self.restarted_families: set[str] = set()

    def models(self) -> set[str]:
        out: set[str] = set()
        for name, fam in self.exp.samples.items():
            if name.startswith("vllm:"):
                for labels in fam:
                    m = label(labels, "model_name")
                    if m is not None:
                        out.add(m)
        return out

    def has_model(self, model: str) -> bool:
        """Whether any ``vllm:`` family has a series of ``model`` (through the per-family
        index: no scan of every series when a slot asks for its own model)."""
        return any(name.startswith("vllm:") and model in self.exp.by_label(name, "model_name")
                   for name in self.exp.samples)

    def by_model(self, name: str, model: str, group: str | None = None) -> dict[str, float]:
        """Sum of ``name`` over all series of ``model``, grouped by label ``group``.

        Kept on the exposition: a scrape is read again as the earlier end of later
        windows, and asked the same sums each time. Callers never change the dict."""
        cache = self.exp._sums
        k = (name, model, group)
        hit = cache.get(k)
        if hit is not None:
            return hit
        series = self.exp.by_label(name, "model_name").get(model, ())
        res: dict[str, float]
        if not group:
            res = {"": sum(v for _, v in series)} if series else {}
        else:
            out: dict[str, float] = defaultdict(float)
            for labels, v in series:
                for lk, lv in labels:  # label(), inlined: a poll asks this ~200 times
                    if lk == group:
                        out[lv] += v
                        break
            res = dict(out)
        cache[k] = res
        return res

    def total(self, name: str, model: str) -> float | None:
        vals = self.by_model(name, model)
        return vals.get("") if vals else None


def _delta_map(a: dict[str, float], b: dict[str, float], reset: bool) -> dict[str, float]:
    if reset:
        return dict(b)
    return {k: counter_delta(a.get(k, 0.0), v) for k, v in b.items()}


def _family_reset(before: Exposition, after: Exposition, family: str, model: str) -> bool:
    """True when a counter family was re-created (the server restarted) between scrapes.

    Prometheus only sees a reset on series whose value dropped; a bucket that
    refilled past its old count after a restart would be under-counted. vLLM
    exports ``*_created`` timestamps, so we can tell a restart for certain.
    """
    base = family
    for suffix in ("_total", "_bucket"):
        if base.endswith(suffix):
            base = base[:-len(suffix)]
    created = base + "_created"
    a = _created(before, created, model)
    b = _created(after, created, model)
    return a != b and any(lab in a and b[lab] != a[lab] for lab in b)


def _created(exp: Exposition, created: str, model: str) -> dict[Labels, float]:
    """``created``'s series of ``model``, kept on the scrape (asked again as the earlier
    end of later windows)."""
    hit = exp._created.get((created, model))
    if hit is None:
        hit = exp._created[(created, model)] = dict(
            exp.by_label(created, "model_name").get(model, ()))
    return hit


class _Window:
    """Counters and histograms as lifetime values (one scrape) or increases (two)."""

    def __init__(self, later: Exposition, earlier: Exposition | None, model: str) -> None:
        self.now = _View(later)
        self.before = _View(earlier) if earlier is not None else None
        self.model = model
        self._counters: dict[tuple[str, str | None], dict[str, float]] = {}
        self._buckets: dict[str, list[tuple[float, float]] | None] = {}

    def counter(self, name: str, group: str | None = None) -> dict[str, float]:
        """Reset-aware increases of ``name`` by ``group`` (callers never change it);
        asked once per window, however many figures read the family."""
        k = (name, group)
        hit = self._counters.get(k)
        if hit is not None:
            return hit
        b = self.now.by_model(name, self.model, group)
        if self.before is not None:
            a = self.before.by_model(name, self.model, group)
            reset = _family_reset(self.before.exp, self.now.exp, name, self.model)
            b = _delta_map(a, b, reset)
        self._counters[k] = b
        return b

    def counter_total(self, name: str) -> float | None:
        vals = self.counter(name)
        return finite(vals.get("")) if vals else None

    def buckets(self, hist: str) -> list[tuple[float, float]] | None:
        if hist in self._buckets:
            return self._buckets[hist]
        b = self.counter(hist + "_bucket", "le")
        out: list[tuple[float, float]] | None = None
        if b:
            out = []
            for le, v in b.items():
                try:
                    out.append((float(le), v))
                except ValueError:  # an unreadable bound is no bucket
                    continue
        self._buckets[hist] = out
        return out

    def quantile(self, q: float, hist: str) -> float | None:
        bs = self.buckets(hist)
        if bs is None:
            return None
        return finite(histogram_quantile(q, bs))


def _cache_config(exp: Exposition, model: str) -> CacheConfig | None:
    for labels in exp.series("vllm:cache_config_info"):
        d = dict(labels)
        if d.get("model_name", model) == model:
            return CacheConfig.from_labels(d)
    return None


def _first(view: _View, names: tuple[str, ...], suffix: str = "") -> str | None:
    """The first family present (current name first, then the older ones)."""
    samples = view.exp.samples
    for n in names:
        if n + suffix in samples:
            return n
    return None


def evaluate(source: Source, w: _Window, window_s: float | None) -> float | None:
    """One catalog source over one scrape (lifetime) or two (window)."""
    if isinstance(source, Gauge):
        name = _first(w.now, source.names)
        if name is None:
            return None
        if source.where is None:
            return finite(w.now.total(name, w.model))
        lab, want = source.where
        return finite(w.now.by_model(name, w.model, lab).get(want))
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


def compute(later: Exposition, earlier: Exposition | None = None,
            window_s: float | None = None, only: str | None = None
            ) -> dict[str, ModelFigures]:
    """Figures per ``model_name`` from one scrape (lifetime) or two (window).

    ``only`` computes one model's figures (a slot polls its own ``model_name``; the
    other models in the exposition cost nothing beyond being parsed). A NaN or ±Inf
    sample never reaches a figure: it is undefined (None), like a missing one."""
    view = _View(later)
    out: dict[str, ModelFigures] = {}
    models = (view.models() if only is None else
              {only} if view.has_model(only) else set())
    window = window_s if earlier is not None else None
    for model in sorted(models):
        w = _Window(later, earlier, model)
        values = {fig.key: evaluate(fig.source, w, window) for fig in MODEL_FIGURES}
        spec = values["spec_drafts"] is not None or values["spec_draft_tokens"] is not None
        per_pos: tuple[float | None, ...] = ()
        if spec:
            per = w.counter(SPEC_PER_POS, "position")
            positions = sorted(per, key=lambda p: int(p) if p.isdigit() else 1 << 30)
            per_pos = tuple(finite(safe_ratio(finite(per[p]), values["spec_drafts"]))
                            for p in positions)
        out[model] = ModelFigures(
            model_name=model, window_s=window, values=values,
            requests_by_reason={k: v for k, v in w.counter(
                "vllm:request_success_total", "finished_reason").items()
                if finite(v) is not None},
            per_position=per_pos, spec=spec, cache=_cache_config(later, model))
    return out
