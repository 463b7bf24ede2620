"""What an engine is to the console: the shapes a figure's source takes, and one engine's
table of them (``vllm.py``, ``sglang.py``).

Sources are the four shapes the engines' figures take:

- ``Gauge``: the value now over the model's series: summed across data-parallel ranks
  (``Engine.partitions``) or the largest of them (``across="max"``: the fullest KV pool);
  ``where`` keeps one label value (``reason="capacity"``).
- ``Increase``: a counter's increase over the window (reset-aware), or per second.
- ``Quantile``: ``histogram_quantile`` over the window's bucket increases.
- ``Ratio``: Δnum / Δden (+ ``plus``), undefined when Δden is 0.
- ``OverTime``: ``quantile_over_time`` of a gauge over the window (KV p99).

Whatever the source, series that differ only in a replica label (``Engine.replicas``:
SGLang's ``tp_rank`` when every scheduler exports) repeat one figure: the largest is
taken, never their sum.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from msgspec import Struct, field


class Gauge(Struct, frozen=True):
    names: tuple[str, ...]
    where: tuple[str, str] | None = None
    """(label, value) the series must carry, or None for all of the model's series."""
    across: Literal["sum", "max"] = "sum"
    """Across data-parallel ranks: their sum (requests) or the largest (a usage ratio)."""


class Increase(Struct, frozen=True):
    names: tuple[str, ...]
    per_second: bool = False
    """Divide by the window: a rate (undefined for lifetime figures)."""
    match: tuple[str, str] | None = None
    """(label, regular expression) the series must match whole, as PromQL's ``=~``:
    the gateway's 5xx (``exception_status=~"5.."``); None: every series."""


class Quantile(Struct, frozen=True):
    q: float
    names: tuple[str, ...]
    """Histogram families, without ``_bucket``."""


class Ratio(Struct, frozen=True):
    num: tuple[str, ...]
    den: tuple[str, ...]
    plus: float = 0.0
    match: tuple[str, str] | None = None
    """As ``Increase.match``, for the numerator's series only."""


class OverTime(Struct, frozen=True):
    q: float
    of: Gauge


Source = Gauge | Increase | Quantile | Ratio | OverTime


class Engine(Struct, frozen=True):
    """One serving engine as the console reads it."""

    name: str
    """The profile's ``engine:`` value."""
    title: str
    """How the screens name it (``not exported by SGLang``)."""
    prefix: str
    """Every family the console reads begins with it: the fast parse path skips the rest."""
    sources: Mapping[str, Source]
    """Catalog key → where that figure comes from; a key absent here is not exported."""
    partitions: tuple[str, ...] = ()
    """Labels of data-parallel ranks: each holds its own requests, summed across."""
    replicas: tuple[str, ...] = ()
    """Labels of ranks that repeat one scheduler's figures (tensor, pipeline): maxed."""
    finished: tuple[str, str] | None = None
    """(counter, label) of finished requests by reason."""
    per_position: tuple[str, str] | None = None
    """(counter, label) of accepted draft tokens by position, or None: not exported."""
    cache_config: str | None = None
    """The info gauge whose labels carry the applied cache config."""
    extra_families: tuple[str, ...] = field(default=())
    """Further families a slot's poll parses (start-up phases)."""
    slo: Mapping[str, str] = field(default_factory=dict)
    """Latency kind (``ttft``, ``tpot``) → the per-request histogram SLO attainment is
    counted from (``ModelFigures.attainment``); a kind absent here is not exported."""
    slo_edges: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    """Latency kind → the engine's default bucket edges of that histogram (seconds): what
    a target is snapped to where no exposition was read (the rendered Prometheus rules).
    The console itself snaps to the edges the slot exports."""
    notes: Mapping[str, str] = field(default_factory=dict)
    """Catalog key → how this engine's source counts it, where a reader would assume
    otherwise (the screens show it beside the figure's label)."""

    def families(self) -> frozenset[str]:
        """Every sample name the direct scrape path reads for this engine: its sources,
        their ``_created`` timestamps (a restart shows in them; the figures read a reset
        from a drop, as Prometheus does), the finished requests, per-position acceptance,
        the SLO histograms and the cache config. A slot's poll parses only these."""
        names: set[str] = set(self.extra_families)
        for extra in (self.finished, self.per_position):
            if extra is not None:
                names.add(extra[0])
        if self.cache_config:
            names.add(self.cache_config)
        names.update(h + "_bucket" for h in self.slo.values())
        for src in self.sources.values():
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
