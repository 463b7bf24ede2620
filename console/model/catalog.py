"""The metric catalog: every figure the console shows, declared once.

One entry says where a figure comes from (exposition names, current first and the
older vLLM names after), how it is formatted, which table column, detail row and plot
show it, and which threshold colours it and raises its alert. The direct scrape path
(``collect/figures.py``), the PromQL path (``collect/promql.py``), the slots table,
the detail screen, the plots, the alerts and ``metrics --json`` all read this table:
adding a figure is adding an entry.

Where each figure comes from is the engine's (``console/model/engines/``: vLLM's and
SGLang's sources, by the figure's key); a figure an engine has no source for is not
exported by it (``Figure.source_for`` is None), never a zero.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

from msgspec import Struct

from console.model import fmt
from console.model.engines import (
    DEFAULT,
    ENGINES,
    Engine,
    Gauge,
    Increase,
    OverTime,
    Quantile,
    Ratio,
    Source,
)
from console.model.engines.vllm import (
    GENERATION,
    KV,
    PROMPT,
    SPEC_ACCEPTED,
    SPEC_DRAFT_TOKENS,
    SPEC_DRAFTS,
    SPEC_PER_POS,
)
from console.model.slo import MIN_REQUESTS, floor_pct


class Column(Struct, frozen=True):
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


class Plot(Struct, frozen=True):
    title: str
    order: int
    scale: float = 1.0
    unit: str = ""


class Threshold(Struct, frozen=True):
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
        limit = self.limit(thresholds)
        # the comparison is on the raw value; the text takes the digits it needs to say
        # the same (5.04 % > 5 %, never 5 % > 5 %)
        shown: Any = value if limit is None else Beyond(value, limit, self.below)
        return self.text.format(slot=slot, value=shown,
                                limit=limit if limit is None else Beyond(limit),
                                setting=getattr(thresholds, self.setting or "", None))


_FIXED = re.compile(r"\.(\d+)([f%])")
MORE_DIGITS = 6
"""The most decimals a value or a limit gets beyond its format's own."""


class Beyond(Struct, frozen=True):
    """A number in an alert's text, with as many more decimals than its format asks
    (``.0%``, ``.2f``) as it takes to say what was compared: a value beside the limit it
    crossed (``than``) shows on its side of it, a limit shows as configured (5.5 %, not
    6 %). Other formats (``g``) print as they would."""

    value: float
    than: float | None = None
    below: bool = False

    def __format__(self, spec: str) -> str:
        m = _FIXED.fullmatch(spec)
        if m is None:
            return format(self.value, spec)
        least, kind = int(m.group(1)), m.group(2)
        scale = 100.0 if kind == "%" else 1.0
        text = format(self.value, spec)
        for digits in range(least, least + MORE_DIGITS + 1):
            text = format(self.value, f".{digits}{kind}")
            shown = float(text.rstrip("%"))
            # on the scaled numbers as printed (0.29 x 100 is 28.999999999999996)
            if self.than is None:
                if shown == round(self.value * scale, 9):
                    break
            elif (shown < round(self.than * scale, 9)) if self.below else (
                    shown > round(self.than * scale, 9)):
                break
        return text


class MinSample(Struct, frozen=True):
    """The least sample a ratio is read from: below ``least`` of figure ``key`` in the
    window (draft tokens for the acceptance), the ratio is undefined (``–``), not a
    rate of a handful of probe tokens (4 of 4 accepted: 100 %)."""

    key: str
    least: float
    what: str
    """How the screen names the sample ("draft tokens")."""


class Figure(Struct, frozen=True):
    key: str
    """Attribute of ``ModelFigures``, key of ``metrics --json`` and of the plot history."""
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
    own_source: Source | None = None
    """A figure of no engine (the gateway's): its source here, not in an engine's table."""
    min_sample: MinSample | None = None
    """A ratio's least sample (``sampled``), the same on both paths."""
    words: str | None = None
    """What the figure is, for the legend, where no source says it (SLO attainment)."""

    @property
    def source(self) -> Source:
        """Where vLLM (the default engine) reads it, or the first engine that exports
        it (a figure of SGLang's alone, such as its KV pool in tokens)."""
        if self.own_source is not None:
            return self.own_source
        for eng in (DEFAULT, *ENGINES.values()):
            src = eng.sources.get(self.key)
            if src is not None:
                return src
        raise KeyError(f"no engine exports {self.key}")

    def source_for(self, engine: Engine) -> Source | None:
        """Where ``engine`` reads it, or None: that engine does not export it."""
        return engine.sources.get(self.key)


def _pct1(x: float | None) -> str:
    return fmt.pct(x, 1)


def _num2(x: float | None) -> str:
    return fmt.num(x, 2)


def _num1(x: float | None) -> str:
    return fmt.num(x, 1)


ACCEPTANCE_DROP = 0.7
"""Acceptance below 70 % of the slot's baseline counts as "far below" (a draft gone bad)."""

# The order is that of ``metrics --json`` (top-level keys, then the ``spec_decode``
# object where its first entry stands); columns and plots carry their own order.
CATALOG: tuple[Figure, ...] = (
    Figure("kv_cache_usage", "KV now", _pct1, json="top",
           column=Column("KV", 6, 20, priority=1),
           plot=Plot("KV cache usage", 20, scale=100, unit="%")),
    Figure("running", "running", fmt.num, json="top",
           column=Column("RUN/W", 5, 10, priority=3, joins="waiting")),
    Figure("waiting", "waiting", fmt.num, json="top"),
    # vLLM 0.32+: why requests wait (the two sum to ``waiting``); absent on older servers
    Figure("waiting_capacity",
           "waiting: capacity", fmt.num),
    Figure("waiting_deferred",
           "waiting: deferred", fmt.num),
    # SGLang: the KV pool in tokens (vLLM reports its size once, in the cache config)
    Figure("kv_used_tokens", "KV used tokens", fmt.num),
    Figure("kv_available_tokens", "KV free tokens", fmt.num),
    Figure("preemptions", "preemptions", fmt.num,
           json="top", column=Column("PREEMPT", 7, 90, priority=2, narrow_header="PRE",
                                     narrow_width=3),
           threshold=Threshold("preempt", "{slot} preempted {value:g} request(s)", fixed=0,
                               hint="KV cache full: revisit KV offload")),
    Figure("prompt_tokens", "prompt tokens",
           fmt.num, json="top", detail=False),
    Figure("generation_tokens", "generation tokens", fmt.num,
           json="top", detail=False),
    Figure("ttft_p50_s", "TTFT p50",
           fmt.secs, json="top"),
    Figure("ttft_p95_s", "TTFT p95",
           fmt.secs, json="top", column=Column("TTFT p95", 8, 40, priority=1),
           plot=Plot("TTFT p95", 10, unit="s"),
           threshold=Threshold("ttft", "{slot} TTFT p95 {value:.2f}s > {limit:g}s",
                               setting="ttft_p95_s")),
    Figure("ttft_p99_s", "TTFT p99",
           fmt.secs, json="top"),
    Figure("itl_p95_s",
           "ITL p95", fmt.secs, json="top", column=Column("ITL p95", 7, 50, priority=4)),
    Figure("e2e_p95_s", "e2e p95",
           fmt.secs, json="top"),
    Figure("queue_p95_s", "queue p95",
           fmt.secs, json="top"),
    Figure("prefix_cache_hit_rate",
           "prefix hit", fmt.pct, json="top",
           min_sample=MinSample("prompt_tokens", 500, "prompt tokens")),
    Figure("spec_drafts", "drafts", fmt.num, json="spec",
           detail=False),
    Figure("spec_draft_tokens", "draft tokens", fmt.num,
           json="spec", detail=False),
    Figure("spec_accepted", "accepted tokens", fmt.num,
           json="spec", detail=False),
    Figure("acceptance_rate", "acceptance",
           _pct1, json="spec", column=Column("ACCEPT", 6, 70, priority=2, show=fmt.pct),
           plot=Plot("speculative acceptance", 30, scale=100, unit="%"),
           threshold=Threshold("accept", "{slot} acceptance {value:.0%} far below "
                               "{setting:.0%}", setting="acceptance_baseline",
                               factor=ACCEPTANCE_DROP, below=True),
           min_sample=MinSample("spec_draft_tokens", 100, "draft tokens")),
    Figure("mean_acceptance_length",
           "mean accept len", _num2, json="spec", column=Column("MAL", 4, 80, priority=4),
           min_sample=MinSample("spec_drafts", 30, "drafts")),
    Figure("prefill_p95_s",
           "prefill p95", fmt.secs),
    Figure("decode_p95_s",
           "decode p95", fmt.secs),
    Figure("prompt_tps",
           "prompt tok/s", _num1),
    Figure("generation_tps", "gen tok/s", _num1,
           column=Column("GEN tok/s", 9, 60, priority=2, show=fmt.rate),
           plot=Plot("generation", 40, unit="tok/s")),
    Figure("spec_drafts_per_s", "drafts/s",
           _num1),
    # the counters as they stand (summed over the model's series): the stall detector
    # (``console/model/stall.py``) asks whether they moved since the last poll
    Figure("generation_total", "generation tokens (lifetime)", fmt.num,
           detail=False),
    Figure("prompt_total", "prompt tokens (lifetime)", fmt.num,
           detail=False),
    Figure("kv_p99", "KV p99", _pct1, per_slot=True,
           column=Column("KV p99", 6, 30, priority=1),
           threshold=Threshold("kv", "{slot} KV p99 {value:.0%} > {limit:.0%}",
                               setting="kv_p99",
                               hint="revisit KV offload (the field's trigger)")),
    # per slot from its targets (``console/model/slo.py``): the lowest share of the
    # window's requests at or under the target, TTFT and TPOT each from its histogram
    Figure("slo_attainment", "SLO attainment", floor_pct, per_slot=True,
           column=Column("SLO", 6, 45, priority=3),
           threshold=Threshold("slo", "{slot} SLO attainment {value:.1%} < {limit:.1%}",
                               setting="slo_objective_set", below=True,
                               hint="requests slower than the slot's TTFT/TPOT target"),
           min_sample=MinSample("slo_requests", MIN_REQUESTS, "requests"),
           words="share of the window's requests with TTFT (and TPOT) at or under the "
                 "slot's target, from the histograms' bucket increases, the target "
                 "snapped down to a bucket edge; the lower of the two; 'no req': none; "
                 "a column only where a slot has a target"),
)

BY_KEY = {f.key: f for f in CATALOG}
MODEL_FIGURES = tuple(f for f in CATALOG if not f.per_slot)
"""Figures of a model (from its exposition or PromQL); the rest are per slot."""
STALLED_NOW: Mapping[str, float] = {"generation_tps": 0.0, "prompt_tps": 0.0}
"""What a stalled slot's rates read now: nothing decodes (the window's rate would decay
for minutes, 360 tok/s to 66, while not one token comes)."""
PER_POSITION_FROM = "acceptance_rate"
"""Per-position acceptance (not one figure) follows that figure's least sample."""


def undersampled(values: Mapping[str, float | None]) -> set[str]:
    """The ratios whose window holds less than their least sample: their count is below
    its minimum. A count not exported (None) judges nothing: the ratio stands."""
    out = set()
    for fig in MODEL_FIGURES:
        ms = fig.min_sample
        if ms is not None and values.get(fig.key) is not None:
            n = values.get(ms.key)
            if n is not None and n < ms.least:
                out.add(fig.key)
    return out


def sampled(values: dict[str, float | None], per_position: tuple[float | None, ...]
            ) -> tuple[dict[str, float | None], tuple[float | None, ...]]:
    """``values`` and per-position acceptance with every undersampled ratio undefined:
    what both paths hand on (``collect/figures.py``, ``collect/promql.py``)."""
    low = undersampled(values)
    if not low:
        return values, per_position
    out = {k: None if k in low else v for k, v in values.items()}
    if PER_POSITION_FROM in low:
        per_position = tuple(None for _ in per_position)
    return out, per_position
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
    if fig.words is not None:
        text = fig.words
        src = None
    else:
        src = fig.source
    if src is None:
        pass
    elif isinstance(src, Gauge):
        where = f"{{{src.where[0]}={src.where[1]}}}" if src.where else ""
        text = f"{src.names[0]}{where} now"
        if src.across == "max":  # a fraction of each rank's own pool: never summed
            text += ", the fullest engine's"
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
    if fig.min_sample:
        text += f"; – below {fig.min_sample.least:g} {fig.min_sample.what} in the window"
    if fig.threshold:
        t = fig.threshold
        limit = t.setting if t.fixed is None else f"{t.fixed:g}"
        text += f"; yellow {'below' if t.below else 'above'} {limit}"
    return text


def exposition_families(engine: Engine = DEFAULT) -> frozenset[str]:
    """Every sample name the direct scrape path reads for ``engine`` (``Engine.families``)."""
    return engine.families()


__all__ = ["GENERATION", "KV", "PROMPT", "SPEC_ACCEPTED", "SPEC_DRAFTS", "SPEC_DRAFT_TOKENS",
           "SPEC_PER_POS", "Gauge", "Increase", "OverTime", "Quantile", "Ratio", "Source"]


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


def _gw(key: str, source: Source, label: str, show: Callable[[float | None], str],
        **kw: Any) -> Figure:
    """A gateway figure: its source its own (no engine exports it)."""
    return Figure(key, label, show, own_source=source, **kw)


def _rate(x: float | None) -> str:
    return fmt.rate(x)


def _usd(x: float | None) -> str:
    return fmt.money(x, 4)


GATEWAY: tuple[Figure, ...] = (
    _gw("requests_per_s", Increase((GW_REQUESTS,), per_second=True), "requests/s", _rate,
           column=Column("REQ/s", 6, 10, priority=1)),
    _gw("requests", Increase((GW_REQUESTS,)), "requests", fmt.num, detail=False),
    _gw("failures", Increase((GW_FAILURES,)), "failed calls", fmt.num, detail=False),
    _gw("errors_4xx", Increase((GW_FAILURES,), match=FOUR_XX), "4xx", fmt.num,
           column=Column("4xx", 5, 20, priority=2)),
    _gw("errors_5xx", Increase((GW_FAILURES,), match=FIVE_XX), "5xx", fmt.num,
           column=Column("5xx", 5, 30, priority=1)),
    _gw("error_rate", Ratio((GW_FAILURES,), (GW_REQUESTS,)), "error rate", fmt.pct),
    _gw("error_5xx_ratio", Ratio((GW_FAILURES,), (GW_REQUESTS,), match=FIVE_XX),
           "5xx share", fmt.pct,
           threshold=Threshold("gw-5xx", "gateway 5xx {value:.0%} of {slot} calls > "
                               "{limit:.0%}", setting="error_5xx_ratio")),
    _gw("latency_p95_s", Quantile(0.95, ("litellm_llm_api_latency_metric",)),
           "backend p95", fmt.secs, column=Column("p95", 7, 40, priority=1)),
    _gw("total_latency_p95_s", Quantile(0.95, ("litellm_request_total_latency_metric",)),
           "total p95", fmt.secs, column=Column("TOTAL p95", 9, 45, priority=3)),
    _gw("overhead_p95_s", Quantile(0.95, (GW_OVERHEAD,)), "overhead p95", fmt.secs,
           column=Column("OVERHEAD", 8, 50, priority=1),
           threshold=Threshold("gw-overhead", "gateway overhead p95 {value:.2f}s on {slot} "
                               "> {limit:g}s", setting="overhead_p95_s")),
    _gw("cooldowns", Increase((GW_COOLDOWNS,)), "cooldowns", fmt.num,
           column=Column("COOL", 4, 60, priority=1)),
    _gw("fallbacks_ok", Increase((GW_FALLBACK_OK,)), "fallbacks ok", fmt.num,
           column=Column("FB ok", 5, 70, priority=2)),
    _gw("fallbacks_failed", Increase((GW_FALLBACK_FAILED,)), "fallbacks failed", fmt.num,
           column=Column("FB fail", 7, 80, priority=2)),
    _gw("tokens", Increase((GW_USER_TOKENS,)), "tokens", fmt.num,
           column=Column("TOKENS", 7, 90, priority=3)),
    _gw("spend", Increase((GW_USER_SPEND,)), "spend", _usd,
           column=Column("SPEND", 8, 95, priority=3)),
    _gw("state", Gauge((GW_STATE,)), "deployment state (max)", fmt.num, detail=False),
)
"""A gauge here is the largest of the scope's series (the worst deployment's state)."""

GATEWAY_USAGE: tuple[Figure, ...] = (
    _gw("requests", Increase((GW_USER_REQUESTS,)), "requests", fmt.num),
    _gw("tokens", Increase((GW_USER_TOKENS,)), "tokens", fmt.num),
    _gw("spend", Increase((GW_USER_SPEND,)), "spend", _usd),
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
