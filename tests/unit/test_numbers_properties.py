"""Rate and quantile against references written from Prometheus's documented algorithm.

The references below are deliberately written differently from
``console.model.numbers`` (bisect over arrays, explicit reset lists) so that a
shared mistake is unlikely.
"""

from __future__ import annotations

import bisect
import math

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from console.model.numbers import (
    counter_delta,
    extrapolated_increase,
    histogram_quantile,
    raw_increase,
)


def ref_quantile(q: float, bounds: list[float], cumulative: list[float]) -> float:
    """histogram_quantile as the Prometheus docs describe it.

    Buckets sorted by upper bound, last one +Inf; counts forced monotonic; rank
    q*total; linear interpolation inside the bucket holding the rank, the first
    bucket starting at 0; rank in +Inf returns the highest finite bound.
    """
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    counts = list(cumulative)
    for i in range(1, len(counts)):
        counts[i] = max(counts[i], counts[i - 1])
    total = counts[-1]
    if len(bounds) < 2 or not math.isinf(bounds[-1]) or total == 0:
        return math.nan
    rank = q * total
    idx = bisect.bisect_left(counts[:-1], rank)
    if idx == len(bounds) - 1:
        return bounds[-2]
    if idx == 0 and bounds[0] <= 0:
        return bounds[0]
    lo = 0.0 if idx == 0 else bounds[idx - 1]
    below = 0.0 if idx == 0 else counts[idx - 1]
    inside = counts[idx] - below
    if inside == 0:
        return math.nan
    return lo + (bounds[idx] - lo) * (rank - below) / inside


bounds_st = st.lists(st.floats(min_value=0.001, max_value=1e4, allow_nan=False),
                     min_size=1, max_size=12, unique=True).map(sorted)


@st.composite
def histograms(draw):
    bounds = [*draw(bounds_st), math.inf]
    incs = draw(st.lists(st.integers(0, 1000), min_size=len(bounds), max_size=len(bounds)))
    cum, total = [], 0
    for x in incs:
        total += x
        cum.append(float(total))
    # occasionally break monotonicity, as a non-atomic scrape can
    if draw(st.booleans()) and len(cum) > 2:
        i = draw(st.integers(1, len(cum) - 2))
        cum[i] = max(0.0, cum[i] - draw(st.integers(0, 5)))
    return bounds, cum


@settings(max_examples=400, deadline=None)
@given(histograms(), st.floats(min_value=0, max_value=1))
def test_quantile_matches_reference(h, q) -> None:
    bounds, cum = h
    ours = histogram_quantile(q, list(zip(bounds, cum, strict=True)))
    ref = ref_quantile(q, bounds, cum)
    # abs_tol: with subnormal ranks the order of * and / may round differently
    assert (math.isnan(ours) and math.isnan(ref)) or math.isclose(ours, ref, rel_tol=1e-12,
                                                                  abs_tol=1e-300)


@settings(max_examples=200, deadline=None)
@given(histograms(), st.floats(min_value=0.01, max_value=0.99),
       st.floats(min_value=0.01, max_value=0.99))
def test_quantile_is_monotonic_in_q_and_bounded(h, q1, q2) -> None:
    bounds, cum = h
    assume(cum[-1] > 0)
    lo, hi = sorted((q1, q2))
    b = list(zip(bounds, cum, strict=True))
    a, c = histogram_quantile(lo, b), histogram_quantile(hi, b)
    assume(not math.isnan(a) and not math.isnan(c))
    assert a <= c + 1e-9
    assert 0 <= c <= bounds[-2]


def test_quantile_edge_cases() -> None:
    inf = math.inf
    assert math.isnan(histogram_quantile(0.5, [(1.0, 0), (inf, 0)]))  # no observations
    assert math.isnan(histogram_quantile(0.5, [(1.0, 3), (2.0, 4)]))  # no +Inf bucket
    assert math.isnan(histogram_quantile(0.5, [(inf, 4)]))            # fewer than 2 buckets
    assert histogram_quantile(0.99, [(1.0, 1), (2.5, 1), (inf, 10)]) == 2.5  # rank in +Inf
    assert histogram_quantile(0.5, [(1.0, 10), (inf, 10)]) == 0.5     # first bucket from 0
    assert histogram_quantile(1.5, [(1.0, 1), (inf, 1)]) == inf
    assert histogram_quantile(-0.1, [(1.0, 1), (inf, 1)]) == -inf
    # "1" and "1.0" from two sources coalesce
    assert histogram_quantile(0.5, [(1.0, 2), (1.0, 2), (inf, 4)]) == 0.5


def ref_increase(values: list[float]) -> float:
    resets = [values[i - 1] for i in range(1, len(values)) if values[i] < values[i - 1]]
    return values[-1] - values[0] + sum(resets)


counters = st.lists(st.integers(0, 10_000).map(float), min_size=2, max_size=30)


@settings(max_examples=300, deadline=None)
@given(counters)
def test_raw_increase_with_resets(values) -> None:
    assert raw_increase(values) == ref_increase(values)
    assert raw_increase(values) >= 0


def ref_extrapolated(ts: list[float], vs: list[float], start: float, end: float) -> float:
    """Prometheus extrapolatedRate (counter, isRate=false), written from its docs."""
    delta = ref_increase(vs)
    span = ts[-1] - ts[0]
    avg = span / (len(ts) - 1)
    to_start, to_end = ts[0] - start, end - ts[-1]
    if delta > 0 and vs[0] >= 0:
        to_start = min(to_start, span * vs[0] / delta) if span * vs[0] / delta < to_start \
            else to_start
    ext = span
    ext += to_start if to_start < 1.1 * avg else avg / 2
    ext += to_end if to_end < 1.1 * avg else avg / 2
    return delta * ext / span


@settings(max_examples=300, deadline=None)
@given(counters, st.integers(1, 30), st.integers(0, 40), st.integers(0, 40))
def test_extrapolated_increase_matches_reference(values, step, pre, post) -> None:
    ts = [1_700_000_000.0 + i * step for i in range(len(values))]
    start, end = ts[0] - pre, ts[-1] + post
    ours = extrapolated_increase(list(zip(ts, values, strict=True)), start, end)
    ref = ref_extrapolated(ts, values, start, end)
    assert math.isclose(ours, ref, rel_tol=1e-9, abs_tol=1e-9)


def test_counter_delta_reset() -> None:
    assert counter_delta(10, 15) == 5
    assert counter_delta(100, 7) == 7  # restarted from zero
    assert counter_delta(5, 5) == 0
