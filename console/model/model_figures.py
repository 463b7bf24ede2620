"""What the console shows for one model: the figures' values, as immutable records.

They are computed by the collectors (``console/sources/collect/figures.py`` from scrapes,
``promql.py`` from Prometheus) and read by the snapshot, the alerts and the screens; the
types live here, in the model layer, so that nothing below the sources needs a collector.
"""

from __future__ import annotations

from collections.abc import Mapping

from msgspec import Struct, field

from console.model.catalog import BY_KEY, MODEL_FIGURES
from console.model.engines import DEFAULT, ENGINES
from console.model.numbers import share_under

RANK_FIGURES = ("running", "generation_total", "prompt_total", "kv_cache_usage")
"""The figures kept per data-parallel engine (``ModelFigures.ranks``): what the stall
detector judges."""


class SpecFigures(Struct, frozen=True):
    drafts: float | None
    draft_tokens: float | None
    """None where the engine exports no such count (SGLang), never 0."""
    accepted_tokens: float | None
    acceptance_rate: float | None
    """Δaccepted / Δdraft_tokens."""
    mean_acceptance_length: float | None
    """1 + Δaccepted / Δdrafts (includes the bonus token)."""
    per_position: tuple[float | None, ...]
    """Δaccepted_per_pos[i] / Δdrafts, position 0 first."""
    drafts_per_s: float | None = None


class CacheConfig(Struct, frozen=True):
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


class ModelFigures(Struct, frozen=True):
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
    engine: str = "vllm"
    """Which engine's exposition they were read from (``console/model/engines``)."""
    at: float | None = None
    """The instant Prometheus evaluated every query of the poll at (the window's end);
    None for figures read from the slot's own scrapes."""
    latency_buckets: Mapping[str, tuple[tuple[float, float], ...]] = field(
        default_factory=dict)
    """Latency kind (``ttft``, ``tpot``) → the window's cumulative bucket counts of the
    engine's per-request histogram (``Engine.slo``): what SLO attainment is counted from."""
    ranks: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)
    """A data-parallel slot's engines one by one (vLLM's ``engine`` label, SGLang's
    ``dp_rank``): rank → its own ``RANK_FIGURES``. Empty for one engine. The stall
    detector reads them: one engine hung freezes only its own counters."""

    def attainment(self, kind: str, target_s: float
                   ) -> tuple[float | None, float | None, float]:
        """The share of the window's requests whose ``kind`` latency was at or under
        ``target_s``: (share, the bucket edge the target was snapped down to, requests).
        The share is None with no requests ("no requests") or no edge under the target."""
        return share_under(self.latency_buckets.get(kind), target_s)

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
        eng = ENGINES.get(self.engine, DEFAULT)

        def count(key: str) -> float | None:
            # a count the engine does not export is unknown (null), not none counted
            return None if key not in eng.sources else v.get(key) or 0.0

        return SpecFigures(
            drafts=count("spec_drafts"), draft_tokens=count("spec_draft_tokens"),
            accepted_tokens=count("spec_accepted"),
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
