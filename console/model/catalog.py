"""The metric catalog: every figure the console shows, declared once.

One entry says where a figure comes from (exposition names, current first and the
older vLLM names after), how it is formatted, which table column, detail row and plot
show it, and which threshold colours it and raises its alert. The direct scrape path
(``collect/figures.py``), the PromQL path (``collect/promql.py``), the slots table,
the detail screen, the plots, the alerts and ``metrics --json`` all read this table:
adding a figure is adding an entry.

Sources are the four shapes vLLM's figures take:

- ``Gauge``: the value now, summed over the model's series (data-parallel engines);
  ``where`` keeps one label value (``reason="capacity"``).
- ``Increase``: a counter's increase over the window (reset-aware), or per second.
- ``Quantile``: ``histogram_quantile`` over the window's bucket increases.
- ``Ratio``: Δnum / Δden (+ ``plus``), undefined when Δden is 0.
- ``OverTime``: ``quantile_over_time`` of a gauge over the window (KV p99).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from console.model import fmt


@dataclass(frozen=True)
class Gauge:
    names: tuple[str, ...]
    where: tuple[str, str] | None = None
    """(label, value) the series must carry, or None for all of the model's series."""


@dataclass(frozen=True)
class Increase:
    names: tuple[str, ...]
    per_second: bool = False
    """Divide by the window: a rate (undefined for lifetime figures)."""
    match: tuple[str, str] | None = None
    """(label, regular expression) the series must match whole, as PromQL's ``=~``:
    the gateway's 5xx (``exception_status=~"5.."``); None: every series."""


@dataclass(frozen=True)
class Quantile:
    q: float
    names: tuple[str, ...]
    """Histogram families, without ``_bucket``."""


@dataclass(frozen=True)
class Ratio:
    num: tuple[str, ...]
    den: tuple[str, ...]
    plus: float = 0.0
    match: tuple[str, str] | None = None
    """As ``Increase.match``, for the numerator's series only."""


@dataclass(frozen=True)
class OverTime:
    q: float
    of: Gauge


Source = Gauge | Increase | Quantile | Ratio | OverTime


@dataclass(frozen=True)
class Column:
    header: str
    width: int
    order: int
    """Left to right among the figure columns (after slot, model, port, GPU, util, health)."""
    priority: int = 2
    """Which columns a narrow terminal keeps: 1 first, then 2, … while they fit whole
    (a phone over SSH shows the priority-1 figures beside slot and health)."""
    joins: str | None = None
    """Another figure shown in the same cell after a slash (running/waiting)."""
    narrow_header: str | None = None
    narrow_width: int | None = None
    show: Callable[[float | None], str] | None = None
    """The cell's own format when it differs from the detail row's: a table cell keeps
    two significant digits, so a number moves on screen when it really moves (and a
    repainted line is bytes over SSH)."""


@dataclass(frozen=True)
class Plot:
    title: str
    order: int
    scale: float = 1.0
    unit: str = ""


@dataclass(frozen=True)
class Threshold:
    """When a figure is bad enough to colour its cell and raise a warning.

    The limit is a ``SlotThresholds`` field (per slot in ``config.yaml``) times
    ``factor``, or ``fixed``. ``text`` is the alert's title, formatted with ``slot``,
    ``value``, ``limit`` and ``setting`` (the configured value before ``factor``)."""

    alert: str
    text: str
    setting: str | None = None
    fixed: float | None = None
    factor: float = 1.0
    below: bool = False
    hint: str = ""

    def limit(self, thresholds: Any) -> float | None:
        if self.fixed is not None:
            return self.fixed
        configured = getattr(thresholds, self.setting or "", None)
        return None if configured is None else configured * self.factor

    def breached(self, value: float | None, thresholds: Any) -> bool:
        limit = self.limit(thresholds)
        if value is None or limit is None:
            return False
        return value < limit if self.below else value > limit

    def title(self, slot: str, value: float, thresholds: Any) -> str:
        return self.text.format(slot=slot, value=value, limit=self.limit(thresholds),
                                setting=getattr(thresholds, self.setting or "", None))


@dataclass(frozen=True)
class Figure:
    key: str
    """Attribute of ``ModelFigures``, key of ``metrics --json`` and of the plot history."""
    source: Source
    label: str
    """Name on the detail screen."""
    show: Callable[[float | None], str]
    """Screen formatting (the JSON carries the raw value)."""
    json: Literal["top", "spec"] | None = None
    """Where the ``metrics --json`` contract carries it: top level, inside ``spec_decode``,
    or not at all (that contract is fixed; ``metrics --all`` prints every figure)."""
    column: Column | None = None
    plot: Plot | None = None
    threshold: Threshold | None = None
    detail: bool = True
    per_slot: bool = False
    """Computed per slot from its own history (``OverTime``), not per model."""


def _pct1(x: float | None) -> str:
    return fmt.pct(x, 1)


def _num2(x: float | None) -> str:
    return fmt.num(x, 2)


def _num1(x: float | None) -> str:
    return fmt.num(x, 1)


ACCEPTANCE_DROP = 0.7
"""Acceptance below 70 % of the slot's baseline counts as "far below" (a draft gone bad)."""

KV = Gauge(("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"))
SPEC_DRAFTS = "vllm:spec_decode_num_drafts_total"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
SPEC_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
GENERATION = ("vllm:generation_tokens_total",)
PROMPT = ("vllm:prompt_tokens_total",)

# The order is that of ``metrics --json`` (top-level keys, then the ``spec_decode``
# object where its first entry stands); columns and plots carry their own order.
CATALOG: tuple[Figure, ...] = (
    Figure("kv_cache_usage", KV, "KV now", _pct1, json="top",
           column=Column("KV", 6, 20, priority=1),
           plot=Plot("KV cache usage", 20, scale=100, unit="%")),
    Figure("running", Gauge(("vllm:num_requests_running",)), "running", fmt.num, json="top",
           column=Column("RUN/W", 5, 10, priority=3, joins="waiting")),
    Figure("waiting", Gauge(("vllm:num_requests_waiting",)), "waiting", fmt.num, json="top"),
    # vLLM 0.32+: why requests wait (the two sum to ``waiting``); absent on older servers
    Figure("waiting_capacity", Gauge(("vllm:num_requests_waiting_by_reason",),
                                     where=("reason", "capacity")),
           "waiting: capacity", fmt.num),
    Figure("waiting_deferred", Gauge(("vllm:num_requests_waiting_by_reason",),
                                     where=("reason", "deferred")),
           "waiting: deferred", fmt.num),
    Figure("preemptions", Increase(("vllm:num_preemptions_total",)), "preemptions", fmt.num,
           json="top", column=Column("PREEMPT", 7, 90, priority=2, narrow_header="PRE",
                                     narrow_width=3),
           threshold=Threshold("preempt", "{slot} preempted {value:g} request(s)", fixed=0,
                               hint="KV cache full: revisit KV offload")),
    Figure("prompt_tokens", Increase(PROMPT), "prompt tokens",
           fmt.num, json="top", detail=False),
    Figure("generation_tokens", Increase(GENERATION), "generation tokens", fmt.num,
           json="top", detail=False),
    Figure("ttft_p50_s", Quantile(0.5, ("vllm:time_to_first_token_seconds",)), "TTFT p50",
           fmt.secs, json="top"),
    Figure("ttft_p95_s", Quantile(0.95, ("vllm:time_to_first_token_seconds",)), "TTFT p95",
           fmt.secs, json="top", column=Column("TTFT p95", 8, 40, priority=1),
           plot=Plot("TTFT p95", 10, unit="s"),
           threshold=Threshold("ttft", "{slot} TTFT p95 {value:.2f}s > {limit:g}s",
                               setting="ttft_p95_s")),
    Figure("ttft_p99_s", Quantile(0.99, ("vllm:time_to_first_token_seconds",)), "TTFT p99",
           fmt.secs, json="top"),
    Figure("itl_p95_s", Quantile(0.95, ("vllm:inter_token_latency_seconds",
                                        "vllm:time_per_output_token_seconds")),
           "ITL p95", fmt.secs, json="top", column=Column("ITL p95", 7, 50, priority=4)),
    Figure("e2e_p95_s", Quantile(0.95, ("vllm:e2e_request_latency_seconds",)), "e2e p95",
           fmt.secs, json="top"),
    Figure("queue_p95_s", Quantile(0.95, ("vllm:request_queue_time_seconds",)), "queue p95",
           fmt.secs, json="top"),
    Figure("prefix_cache_hit_rate", Ratio(
        ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")),
           "prefix hit", fmt.pct, json="top"),
    Figure("spec_drafts", Increase((SPEC_DRAFTS,)), "drafts", fmt.num, json="spec",
           detail=False),
    Figure("spec_draft_tokens", Increase((SPEC_DRAFT_TOKENS,)), "draft tokens", fmt.num,
           json="spec", detail=False),
    Figure("spec_accepted", Increase((SPEC_ACCEPTED,)), "accepted tokens", fmt.num,
           json="spec", detail=False),
    Figure("acceptance_rate", Ratio((SPEC_ACCEPTED,), (SPEC_DRAFT_TOKENS,)), "acceptance",
           _pct1, json="spec", column=Column("ACCEPT", 6, 70, priority=2, show=fmt.pct),
           plot=Plot("speculative acceptance", 30, scale=100, unit="%"),
           threshold=Threshold("accept", "{slot} acceptance {value:.0%} far below "
                               "{setting:.0%}", setting="acceptance_baseline",
                               factor=ACCEPTANCE_DROP, below=True)),
    Figure("mean_acceptance_length", Ratio((SPEC_ACCEPTED,), (SPEC_DRAFTS,), plus=1.0),
           "mean accept len", _num2, json="spec", column=Column("MAL", 4, 80, priority=4)),
    Figure("prefill_p95_s", Quantile(0.95, ("vllm:request_prefill_time_seconds",)),
           "prefill p95", fmt.secs),
    Figure("decode_p95_s", Quantile(0.95, ("vllm:request_decode_time_seconds",)),
           "decode p95", fmt.secs),
    Figure("prompt_tps", Increase(PROMPT, per_second=True),
           "prompt tok/s", _num1),
    Figure("generation_tps", Increase(GENERATION, per_second=True), "gen tok/s", _num1,
           column=Column("GEN tok/s", 9, 60, priority=2, show=fmt.rate),
           plot=Plot("generation", 40, unit="tok/s")),
    Figure("spec_drafts_per_s", Increase((SPEC_DRAFTS,), per_second=True), "drafts/s",
           _num1),
    # the counters as they stand (summed over the model's series): the stall detector
    # (``console/model/stall.py``) asks whether they moved since the last poll
    Figure("generation_total", Gauge(GENERATION), "generation tokens (lifetime)", fmt.num,
           detail=False),
    Figure("prompt_total", Gauge(PROMPT), "prompt tokens (lifetime)", fmt.num,
           detail=False),
    Figure("kv_p99", OverTime(0.99, KV), "KV p99", _pct1, per_slot=True,
           column=Column("KV p99", 6, 30, priority=1),
           threshold=Threshold("kv", "{slot} KV p99 {value:.0%} > {limit:.0%}",
                               setting="kv_p99",
                               hint="revisit KV offload (the field's trigger)")),
)

BY_KEY = {f.key: f for f in CATALOG}
MODEL_FIGURES = tuple(f for f in CATALOG if not f.per_slot)
"""Figures of a model (from its exposition or PromQL); the rest are per slot."""
SPEC_KEYS = tuple(f.key for f in CATALOG if f.json == "spec")


def columns() -> list[tuple[Figure, Column]]:
    """Figures with a table column, left to right."""
    return sorted(((f, f.column) for f in CATALOG if f.column), key=lambda fc: fc[1].order)


def plots() -> list[tuple[Figure, Plot]]:
    """Figures plotted over time, in grid order."""
    return sorted(((f, f.plot) for f in CATALOG if f.plot), key=lambda fp: fp[1].order)


def thresholds() -> Iterator[tuple[Figure, Threshold]]:
    """Figures that colour their cell and raise an alert past a limit."""
    return ((f, f.threshold) for f in CATALOG if f.threshold)


def cell_text(fig: Figure, value: Callable[[str], float | None]) -> str:
    """A figure as its table cell shows it (with the figure it joins, if any)."""
    show = fig.column.show if fig.column and fig.column.show else fig.show
    text = show(value(fig.key))
    if fig.column and fig.column.joins:
        text += "/" + BY_KEY[fig.column.joins].show(value(fig.column.joins))
    return text


def describe(fig: Figure) -> str:
    """One line saying what a figure is, for the help's column legend."""
    src = fig.source
    if isinstance(src, Gauge):
        where = f"{{{src.where[0]}={src.where[1]}}}" if src.where else ""
        text = f"{src.names[0]}{where} now"
    elif isinstance(src, Increase):
        text = f"{'rate' if src.per_second else 'increase'} of {src.names[0]} over the window"
    elif isinstance(src, Quantile):
        text = f"p{src.q * 100:g} of {src.names[0]} over the window"
    elif isinstance(src, Ratio):
        text = f"{'1 + ' if src.plus else ''}Δ{src.num[0]} / Δ{src.den[0]}"
    else:
        text = f"p{src.q * 100:g} over time of {src.of.names[0]} over the window"
    if fig.column and fig.column.joins:
        text += f" / {BY_KEY[fig.column.joins].label}"
    if fig.threshold:
        t = fig.threshold
        limit = t.setting if t.fixed is None else f"{t.fixed:g}"
        text += f"; yellow {'below' if t.below else 'above'} {limit}"
    return text


def exposition_families() -> frozenset[str]:
    """Every sample name the direct scrape path reads: the catalog's sources, their
    ``_created`` timestamps (restarts are told by them), per-position acceptance, the
    finished requests by reason and the cache config. A slot's poll parses only these."""
    names: set[str] = {SPEC_PER_POS, "vllm:request_success_total", "vllm:cache_config_info"}
    for fig in CATALOG:
        src = fig.source
        if isinstance(src, OverTime):
            src = src.of
        if isinstance(src, Gauge | Increase):
            names.update(src.names)
        elif isinstance(src, Ratio):
            names.update(src.num + src.den)
        elif isinstance(src, Quantile):
            names.update(n + "_bucket" for n in src.names)
    for n in list(names):
        for suffix in ("_total", "_bucket"):
            if n.endswith(suffix):
                names.add(n[:-len(suffix)] + "_created")
    return frozenset(names)


# -- the gateway (LiteLLM's ``callbacks: ["prometheus"]``) ---------------------------------
# One family of figures like the slots': each is computed per deployment (``model_id``),
# per model group and for the whole gateway by ``console/sources/collect/gateway.py``,
# over two scrapes of the proxy's ``/metrics`` or through PromQL, with the maths above
# (``numbers.py``). The names are LiteLLM 1.100's (``integrations/prometheus.py``);
# ``tests/fixtures/litellm_metrics.txt`` is a capture of the real proxy.
GW_REQUESTS = "litellm_deployment_total_requests_total"
GW_FAILURES = "litellm_deployment_failure_responses_total"
GW_STATE = "litellm_deployment_state"
GW_COOLDOWNS = "litellm_deployment_cooled_down_total"
GW_FALLBACK_OK = "litellm_deployment_successful_fallbacks_total"
GW_FALLBACK_FAILED = "litellm_deployment_failed_fallbacks_total"
GW_OVERHEAD = "litellm_overhead_latency_metric"
"""Its help says milliseconds; LiteLLM observes seconds (``total_time_seconds``)."""
GW_USER_REQUESTS = "litellm_proxy_total_requests_metric_total"
GW_USER_TOKENS = "litellm_total_tokens_metric_total"
GW_USER_SPEND = "litellm_spend_metric_total"
FIVE_XX = ("exception_status", "5..")
FOUR_XX = ("exception_status", "4..")


def _rate(x: float | None) -> str:
    return fmt.rate(x)


def _usd(x: float | None) -> str:
    return fmt.money(x, 4)


GATEWAY: tuple[Figure, ...] = (
    Figure("requests_per_s", Increase((GW_REQUESTS,), per_second=True), "requests/s", _rate,
           column=Column("REQ/s", 6, 10)),
    Figure("requests", Increase((GW_REQUESTS,)), "requests", fmt.num, detail=False),
    Figure("failures", Increase((GW_FAILURES,)), "failed calls", fmt.num, detail=False),
    Figure("errors_4xx", Increase((GW_FAILURES,), match=FOUR_XX), "4xx", fmt.num,
           column=Column("4xx", 5, 20)),
    Figure("errors_5xx", Increase((GW_FAILURES,), match=FIVE_XX), "5xx", fmt.num,
           column=Column("5xx", 5, 30)),
    Figure("error_rate", Ratio((GW_FAILURES,), (GW_REQUESTS,)), "error rate", fmt.pct),
    Figure("error_5xx_ratio", Ratio((GW_FAILURES,), (GW_REQUESTS,), match=FIVE_XX),
           "5xx share", fmt.pct,
           threshold=Threshold("gw-5xx", "gateway 5xx {value:.0%} of {slot} calls > "
                               "{limit:.0%}", setting="error_5xx_ratio")),
    Figure("latency_p95_s", Quantile(0.95, ("litellm_llm_api_latency_metric",)),
           "backend p95", fmt.secs, column=Column("p95", 7, 40)),
    Figure("total_latency_p95_s", Quantile(0.95, ("litellm_request_total_latency_metric",)),
           "total p95", fmt.secs, column=Column("TOTAL p95", 9, 45)),
    Figure("overhead_p95_s", Quantile(0.95, (GW_OVERHEAD,)), "overhead p95", fmt.secs,
           column=Column("OVERHEAD", 8, 50),
           threshold=Threshold("gw-overhead", "gateway overhead p95 {value:.2f}s on {slot} "
                               "> {limit:g}s", setting="overhead_p95_s")),
    Figure("cooldowns", Increase((GW_COOLDOWNS,)), "cooldowns", fmt.num,
           column=Column("COOL", 4, 60)),
    Figure("fallbacks_ok", Increase((GW_FALLBACK_OK,)), "fallbacks ok", fmt.num,
           column=Column("FB ok", 5, 70)),
    Figure("fallbacks_failed", Increase((GW_FALLBACK_FAILED,)), "fallbacks failed", fmt.num,
           column=Column("FB fail", 7, 80)),
    Figure("tokens", Increase((GW_USER_TOKENS,)), "tokens", fmt.num,
           column=Column("TOKENS", 7, 90)),
    Figure("spend", Increase((GW_USER_SPEND,)), "spend", _usd, column=Column("SPEND", 8, 95)),
    Figure("state", Gauge((GW_STATE,)), "deployment state (max)", fmt.num, detail=False),
)
"""A gauge here is the largest of the scope's series (the worst deployment's state)."""

GATEWAY_USAGE: tuple[Figure, ...] = (
    Figure("requests", Increase((GW_USER_REQUESTS,)), "requests", fmt.num),
    Figure("tokens", Increase((GW_USER_TOKENS,)), "tokens", fmt.num),
    Figure("spend", Increase((GW_USER_SPEND,)), "spend", _usd),
)
"""Per user/key counters (the proxy's ``end_user``, ``user``, key alias labels)."""
GATEWAY_BY_KEY = {f.key: f for f in GATEWAY}


def gateway_families() -> frozenset[str]:
    """Every sample name the gateway's scrape reads (the rest of a 2 MB exposition is
    skipped unread), with the ``process_start_time_seconds`` that tells workers apart."""
    names: set[str] = {"process_start_time_seconds"}
    for fig in GATEWAY + GATEWAY_USAGE:
        src = fig.source
        if isinstance(src, Gauge | Increase):
            names.update(src.names)
        elif isinstance(src, Ratio):
            names.update(src.num + src.den)
        elif isinstance(src, Quantile):
            names.update(n + "_bucket" for n in src.names)
    for fig in GATEWAY_USAGE:  # a user's series born today is counted whole
        if isinstance(fig.source, Increase):
            names.update(n[:-len("_total")] + "_created" for n in fig.source.names)
    return frozenset(names)
