"""SLO attainment: the share of a window's requests whose latency was at or under the
slot's target (issue 45, item 5), per latency kind (TTFT, TPOT), and how it is shown.

The counts are the window's bucket increases of the engine's per-request histograms
(``ModelFigures.latency_buckets``, the same on the direct and the PromQL path); the
target is snapped *down* to a bucket edge (``numbers.share_under``), so every request
counted as attained really was under the target, and the screens say which edge was
used. The targets and the objective are the slot's thresholds (``SlotThresholds``:
``ttft_target_s``, ``tpot_target_s``, ``slo_objective``).

Below ``MIN_REQUESTS`` in the window the share is undefined (``–``), with no request it
is "no requests": never a 100 % of one request, nor of none."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from msgspec import Struct

from console.model import fmt

KINDS = ("ttft", "tpot")
"""The latencies an objective is set for, in the order the screens name them."""
LABELS: Mapping[str, str] = {"ttft": "TTFT", "tpot": "TPOT"}
TARGET_SETTINGS: Mapping[str, str] = {"ttft": "ttft_target_s", "tpot": "tpot_target_s"}
"""Latency kind → the ``SlotThresholds`` field holding its target."""
MIN_REQUESTS = 10.0
"""Fewer requests than this in the window: the share is ``–`` (one slow request of
three is not a 67 % service)."""
GOOD = 0.99
"""At or above: green, as vLLM's Service Status board colours its SLO tiles."""
FAIR = 0.95
"""At or above (and under ``GOOD``): amber; below: red."""

Colour = Literal["green", "amber", "red", "none"]
STYLES: Mapping[Colour, str] = {"green": "tile.ok", "amber": "tile.warn",
                                "red": "tile.crit", "none": "dim"}
"""The wall tile's and the fleet cell's style by band: the theme's tile names (each theme
colours them; the default as vLLM's own board does)."""


class SloReading(Struct, frozen=True):
    """One latency kind of one slot over the window."""

    kind: str
    target_s: float
    edge_s: float | None
    """The bucket edge the target was snapped down to (None: no edge at or under it)."""
    under: float
    """Requests at or under the edge."""
    requests: float
    """Requests in the window (the histogram's ``+Inf`` increase)."""
    exported: bool = True
    """False where the engine exports no such histogram (SGLang's TPOT)."""

    @property
    def share(self) -> float | None:
        """under / requests, or None: not exported, no edge under the target, or fewer
        than ``MIN_REQUESTS`` requests in the window."""
        if not self.exported or self.edge_s is None or self.requests < MIN_REQUESTS:
            return None
        return self.under / self.requests

    def words(self) -> str:
        """``TTFT ≤ 0.5 s: 99.2 % of 240 requests``, with the edge where it is not the
        target (``counted at the 0.25 s edge``)."""
        name = f"{LABELS[self.kind]} ≤ {self.target_s:g} s"
        if not self.exported:
            return f"{name}: not exported by this engine"
        if self.edge_s is None:
            return f"{name}: no bucket edge at or under the target"
        edge = "" if self.edge_s == self.target_s else f" (counted at the {self.edge_s:g} s edge)"
        if self.requests == 0:
            return f"{name}{edge}: no requests"
        share = self.share
        if share is None:
            return (f"{name}{edge}: – ({self.requests:g} requests, under "
                    f"{MIN_REQUESTS:g})")
        return f"{name}{edge}: {floor_pct(share)} of {self.requests:g} requests"


def detail(r: SloReading) -> tuple[str, str]:
    """The detail screen's row: ``SLO TTFT``, ``83.3% of 18 at ≤ 0.25 s (target 0.3 s)``."""
    name = f"SLO {LABELS[r.kind]}"
    if not r.exported or r.edge_s is None:
        return name, r.words().split(": ", 1)[1]
    at = f"at ≤ {r.edge_s:g} s" + ("" if r.edge_s == r.target_s else
                                   f" (target {r.target_s:g} s)")
    if r.requests == 0:
        return name, f"no requests ({at})"
    share = r.share
    if share is None:
        return name, f"– ({r.requests:g} requests, under {MIN_REQUESTS:g}; {at})"
    return name, f"{floor_pct(share)} of {r.requests:g} {at}"


def targets(thresholds: Any) -> dict[str, float]:
    """The slot's targets by kind (only those set)."""
    out = {}
    for kind in KINDS:
        v = getattr(thresholds, TARGET_SETTINGS[kind], None)
        if isinstance(v, (int, float)) and v > 0:
            out[kind] = float(v)
    return out


def readings(figures: Any, thresholds: Any) -> tuple[SloReading, ...]:
    """Each configured kind's reading from the model's figures (``ModelFigures``; None:
    none this poll, no reading)."""
    if figures is None:
        return ()
    out = []
    for kind, target in targets(thresholds).items():
        buckets = figures.latency_buckets.get(kind)
        share, edge, n = figures.attainment(kind, target)
        under = 0.0 if share is None or not n else share * n
        if edge is not None and buckets:  # the count itself, not share × n back again
            under = next((c for b, c in buckets if b == edge), under)
        out.append(SloReading(kind, target, edge, under, n, exported=kind in
                              figures.latency_buckets))
    return tuple(out)


def attainment(figures: Any, thresholds: Any) -> float | None:
    """The slot's SLO attainment: the lowest share among its kinds (the objective holds
    only if every latency meets it). None: no target, no requests, too few."""
    shares = [s for s in (r.share for r in readings(figures, thresholds)) if s is not None]
    return min(shares) if shares else None


def no_requests(figures: Any, thresholds: Any) -> bool:
    """Targets set, the histograms read, and not one request in the window."""
    rs = [r for r in readings(figures, thresholds) if r.exported]
    return bool(rs) and all(r.requests == 0 for r in rs)


def colour(share: float | None) -> Colour:
    if share is None:
        return "none"
    return "green" if share >= GOOD else "amber" if share >= FAIR else "red"


def floor_pct(share: float | None) -> str:
    """A share as a percentage with one decimal, rounded *down*: 99.96 % reads 99.9 %,
    and 100 % means every request (a rounding never shows a met objective)."""
    if share is None:
        return fmt.DASH
    tenths = math.floor(share * 1000 + 1e-9)
    return f"{tenths / 10:.1f}%"


def cell(figures: Any, thresholds: Any, none_words: str = "no req") -> str:
    """The table's cell: the attainment, ``no req`` when there were no requests, ``–``
    otherwise undefined (no target, too few requests)."""
    if no_requests(figures, thresholds):
        return none_words
    return floor_pct(attainment(figures, thresholds))


def tile(figures: Any, thresholds: Any) -> tuple[str, Colour]:
    """The wall's tile: its words and its colour band."""
    rs = readings(figures, thresholds)
    edges = "  ".join(f"{LABELS[r.kind]}≤{(r.edge_s if r.edge_s is not None else r.target_s):g}s"
                      for r in rs if r.exported)
    if no_requests(figures, thresholds):
        return f"SLO no requests  {edges}".rstrip(), "none"
    share = attainment(figures, thresholds)
    n = max((r.requests for r in rs if r.exported), default=0.0)
    if share is None:
        few = f" ({n:g} requests)" if n else ""
        return f"SLO –{few}  {edges}".rstrip(), "none"
    return f"SLO {floor_pct(share)}  {edges}  of {n:g}", colour(share)
