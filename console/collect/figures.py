"""Per-model figures from one or two vLLM scrapes, with the formulas in one place.

With one scrape the figures are lifetime values (counters as they stand);
with two, counters and histogram buckets become increases over the window
between them (reset-aware) and gauges come from the later scrape. The
PromQL twin of every figure is in ``console/collect/promql.py``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ..numbers import counter_delta, histogram_quantile, safe_ratio
from .exposition import Exposition, finite, label

# Current names first; older vLLM (<= 0.10) names as fallbacks.
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
ITL = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
PREFIX_QUERIES = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
PREFIX_HITS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
TTFT = "vllm:time_to_first_token_seconds"
E2E = "vllm:e2e_request_latency_seconds"
QUEUE = "vllm:request_queue_time_seconds"
PREFILL = "vllm:request_prefill_time_seconds"
DECODE = "vllm:request_decode_time_seconds"
SPEC_DRAFTS = "vllm:spec_decode_num_drafts_total"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
SPEC_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


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
    """Everything the console shows for one ``model_name``; None means undefined."""

    model_name: str
    window_s: float | None
    """Seconds between the two scrapes; None for lifetime figures."""
    kv_cache_usage: float | None
    running: float | None
    waiting: float | None
    preemptions: float | None
    prompt_tokens: float | None
    generation_tokens: float | None
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    ttft_p99_s: float | None
    itl_p95_s: float | None
    e2e_p95_s: float | None
    queue_p95_s: float | None
    prefill_p95_s: float | None
    decode_p95_s: float | None
    prefix_cache_hit_rate: float | None
    requests_by_reason: dict[str, float] = field(default_factory=dict)
    spec_decode: SpecFigures | None = None
    cache: CacheConfig | None = None

    def per_second(self, value: float | None) -> float | None:
        if value is None or not self.window_s:
            return None
        return value / self.window_s

    @property
    def prompt_tps(self) -> float | None:
        return self.per_second(self.prompt_tokens)

    @property
    def generation_tps(self) -> float | None:
        return self.per_second(self.generation_tokens)

    @property
    def preemption_rate(self) -> float | None:
        return self.per_second(self.preemptions)

    @property
    def request_rate(self) -> float | None:
        return self.per_second(sum(self.requests_by_reason.values())
                               if self.requests_by_reason else None)

    def contract_dict(self) -> dict[str, object]:
        """The exact JSON object of ``pod-console metrics --json`` for this model."""
        spec = None
        if self.spec_decode is not None:
            s = self.spec_decode
            spec = {"drafts": s.drafts, "draft_tokens": s.draft_tokens,
                    "accepted_tokens": s.accepted_tokens, "acceptance_rate": s.acceptance_rate,
                    "mean_acceptance_length": s.mean_acceptance_length,
                    "per_position": list(s.per_position)}
        return {
            "kv_cache_usage": self.kv_cache_usage, "running": self.running,
            "waiting": self.waiting, "preemptions": self.preemptions,
            "prompt_tokens": self.prompt_tokens, "generation_tokens": self.generation_tokens,
            "ttft_p50_s": self.ttft_p50_s, "ttft_p95_s": self.ttft_p95_s,
            "ttft_p99_s": self.ttft_p99_s, "itl_p95_s": self.itl_p95_s,
            "e2e_p95_s": self.e2e_p95_s, "queue_p95_s": self.queue_p95_s,
            "prefix_cache_hit_rate": self.prefix_cache_hit_rate, "spec_decode": spec,
        }


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

    def first_present(self, names: tuple[str, ...]) -> str | None:
        for n in names:
            if n in self.exp:
                return n
        return None

    def by_model(self, name: str, model: str, group: str | None = None) -> dict[str, float]:
        """Sum of ``name`` over all series of ``model``, grouped by label ``group``."""
        out: dict[str, float] = defaultdict(float)
        for labels, v in self.exp.by_label(name, "model_name").get(model, ()):
            key = label(labels, group) if group else ""
            if key is None:
                continue
            out[key] += v
        return dict(out)

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
    a = dict(before.by_label(created, "model_name").get(model, ()))
    b = dict(after.by_label(created, "model_name").get(model, ()))
    return any(lab in a and b[lab] != a[lab] for lab in b)


class _Window:
    """Counters and histograms as lifetime values (one scrape) or increases (two)."""

    def __init__(self, later: Exposition, earlier: Exposition | None, model: str) -> None:
        self.now = _View(later)
        self.before = _View(earlier) if earlier is not None else None
        self.model = model

    def counter(self, name: str, group: str | None = None) -> dict[str, float]:
        b = self.now.by_model(name, self.model, group)
        if self.before is None:
            return b
        a = self.before.by_model(name, self.model, group)
        reset = _family_reset(self.before.exp, self.now.exp, name, self.model)
        return _delta_map(a, b, reset)

    def counter_total(self, name: str) -> float | None:
        vals = self.counter(name)
        return finite(vals.get("")) if vals else None

    def buckets(self, hist: str) -> list[tuple[float, float]] | None:
        b = self.counter(hist + "_bucket", "le")
        if not b:
            return None
        out = []
        for le, v in b.items():
            try:
                out.append((float(le), v))
            except ValueError:
                continue
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


def compute(later: Exposition, earlier: Exposition | None = None,
            window_s: float | None = None, only: str | None = None
            ) -> dict[str, ModelFigures]:
    """Figures per ``model_name`` from one scrape (lifetime) or two (window).

    ``only`` computes one model's figures (a slot polls its own ``model_name``; the
    other models in the exposition cost nothing beyond being parsed). A NaN or ±Inf
    sample never reaches a figure: it is undefined (None), like a missing one."""
    view = _View(later)
    out: dict[str, ModelFigures] = {}
    models = view.models()
    if only is not None:
        models &= {only}
    for model in sorted(models):
        w = _Window(later, earlier, model)
        kv_name = view.first_present(KV_USAGE)
        itl_name = view.first_present(tuple(n + "_bucket" for n in ITL))
        itl = itl_name[:-len("_bucket")] if itl_name else ITL[0]
        pq = view.first_present(PREFIX_QUERIES)
        ph = view.first_present(PREFIX_HITS)
        spec = None
        if SPEC_DRAFTS in later or SPEC_DRAFT_TOKENS in later:
            drafts = w.counter_total(SPEC_DRAFTS)
            dtoks = w.counter_total(SPEC_DRAFT_TOKENS)
            acc = w.counter_total(SPEC_ACCEPTED)
            per = w.counter(SPEC_PER_POS, "position")
            positions = sorted(per, key=lambda p: int(p) if p.isdigit() else 1 << 30)
            mean_len = safe_ratio(acc, drafts)
            spec = SpecFigures(
                drafts=drafts or 0.0, draft_tokens=dtoks or 0.0, accepted_tokens=acc or 0.0,
                acceptance_rate=finite(safe_ratio(acc, dtoks)),
                mean_acceptance_length=None if mean_len is None else finite(1 + mean_len),
                per_position=tuple(finite(safe_ratio(finite(per[p]), drafts))
                                   for p in positions),
                drafts_per_s=finite(safe_ratio(drafts, window_s)) if window_s else None,
            )
        hit_q = w.counter_total(pq) if pq else None
        hit_h = w.counter_total(ph) if ph else None
        out[model] = ModelFigures(
            model_name=model,
            window_s=window_s if earlier is not None else None,
            kv_cache_usage=finite(view.total(kv_name, model)) if kv_name else None,
            running=finite(view.total("vllm:num_requests_running", model)),
            waiting=finite(view.total("vllm:num_requests_waiting", model)),
            preemptions=w.counter_total("vllm:num_preemptions_total"),
            prompt_tokens=w.counter_total("vllm:prompt_tokens_total"),
            generation_tokens=w.counter_total("vllm:generation_tokens_total"),
            ttft_p50_s=w.quantile(0.50, TTFT),
            ttft_p95_s=w.quantile(0.95, TTFT),
            ttft_p99_s=w.quantile(0.99, TTFT),
            itl_p95_s=w.quantile(0.95, itl),
            e2e_p95_s=w.quantile(0.95, E2E),
            queue_p95_s=w.quantile(0.95, QUEUE),
            prefill_p95_s=w.quantile(0.95, PREFILL),
            decode_p95_s=w.quantile(0.95, DECODE),
            prefix_cache_hit_rate=finite(safe_ratio(hit_h, hit_q)),
            requests_by_reason={k: v for k, v in w.counter(
                "vllm:request_success_total", "finished_reason").items()
                if finite(v) is not None},
            spec_decode=spec,
            cache=_cache_config(later, model),
        )
    return out


