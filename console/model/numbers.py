"""Counter increases, rates and histogram quantiles, computed the way Prometheus does.

These functions are the single place where numbers on screen are derived from
raw counters; each follows Prometheus 2.x (``promql/functions.go``
``extrapolatedRate`` and ``promql/quantile.go`` ``bucketQuantile``) step by step
so that our figures and a PromQL query over the same samples agree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from operator import itemgetter

NAN = float("nan")


def counter_delta(earlier: float, later: float) -> float:
    """Increase between two samples of one counter; a drop means it restarted from zero."""
    return later if later < earlier else later - earlier


def raw_increase(values: Sequence[float]) -> float:
    """Sum of increases along consecutive samples with counter-reset correction."""
    if len(values) < 2:
        return NAN
    total = values[-1] - values[0]
    prev = values[0]
    for v in values[1:]:
        if v < prev:
            total += prev
        prev = v
    return total


def extrapolated_increase(samples: Sequence[tuple[float, float]], range_start: float,
                          range_end: float, is_counter: bool = True) -> float:
    """Prometheus ``increase()`` over ``[range_start, range_end]`` (seconds).

    ``samples`` are (timestamp, value) inside the range, oldest first. Follows
    Prometheus's extrapolation: extend to the range edges when the first/last
    sample is within 1.1 average intervals of them (else half an interval), but
    never extrapolate a counter below zero.
    """
    if len(samples) < 2:
        return NAN
    # Work in integer milliseconds like Prometheus: at epoch magnitudes a float of
    # seconds carries only ~0.2 µs, enough to move the result in the 8th digit.
    first_ms, first_v = round(samples[0][0] * 1000), samples[0][1]
    last_ms = round(samples[-1][0] * 1000)
    start_ms, end_ms = round(range_start * 1000), round(range_end * 1000)
    result = raw_increase([v for _, v in samples]) if is_counter else samples[-1][1] - first_v
    duration_to_start = (first_ms - start_ms) / 1000
    duration_to_end = (end_ms - last_ms) / 1000
    sampled = (last_ms - first_ms) / 1000
    if sampled <= 0:
        return NAN
    avg = sampled / (len(samples) - 1)
    if is_counter and result > 0 and first_v >= 0:
        duration_to_zero = sampled * (first_v / result)
        if duration_to_zero < duration_to_start:
            duration_to_start = duration_to_zero
    threshold = avg * 1.1
    interval = sampled
    interval += duration_to_start if duration_to_start < threshold else avg / 2
    interval += duration_to_end if duration_to_end < threshold else avg / 2
    return result * (interval / sampled)


def histogram_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float:
    """Prometheus ``histogram_quantile`` over classic buckets ``(upper_bound, cumulative)``.

    Returns NaN where Prometheus would: fewer than two buckets, no ``+Inf``
    bucket, or no observations. A rank that falls in the ``+Inf`` bucket
    returns the highest finite bound; the first bucket starts at 0.
    """
    return bucket_quantile(q, cumulative_buckets(buckets))


def cumulative_buckets(buckets: Iterable[tuple[float, float]]) -> list[list[float]] | None:
    """Classic buckets as ``bucket_quantile`` reads them: sorted by bound, equal bounds
    summed, counts made monotonic. None where every quantile is NaN (fewer than two
    buckets, no ``+Inf`` bucket). Several quantiles of one histogram share one."""
    bs = sorted(buckets, key=itemgetter(0))
    if len(bs) < 2 or not math.isinf(bs[-1][0]) or bs[-1][0] < 0:
        return None
    # Coalesce equal bounds (e.g. "1" and "1.0" from two sources) by summing.
    merged: list[list[float]] = []
    for ub, c in bs:
        if merged and merged[-1][0] == ub:
            merged[-1][1] += c
        else:
            merged.append([ub, c])
    # Make cumulative counts monotonic: scrapes of buckets are not atomic.
    top = -math.inf
    for b in merged:
        if b[1] > top:
            top = b[1]
        else:
            b[1] = top
    return merged if len(merged) >= 2 else None


def bucket_quantile(q: float, merged: list[list[float]] | None) -> float:
    """The ``q`` quantile of buckets prepared by ``cumulative_buckets`` (Prometheus's
    ``bucketQuantile`` from there on); it does not change them."""
    if math.isnan(q):
        return NAN
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    if merged is None:
        return NAN
    observations = merged[-1][1]
    if observations == 0 or math.isnan(observations):
        return NAN
    rank = q * observations
    # sort.Search over all but the +Inf bucket
    b = len(merged) - 1
    for i in range(len(merged) - 1):
        if merged[i][1] >= rank:
            b = i
            break
    if b == len(merged) - 1:
        return merged[-2][0]
    if b == 0 and merged[0][0] <= 0:
        return merged[0][0]
    bucket_start = 0.0
    bucket_end = merged[b][0]
    count = merged[b][1]
    if b > 0:
        bucket_start = merged[b - 1][0]
        count -= merged[b - 1][1]
        rank -= merged[b - 1][1]
    if count == 0:
        return NAN
    return bucket_start + (bucket_end - bucket_start) * (rank / count)


def share_under(merged: Sequence[Sequence[float]] | None,
                target: float) -> tuple[float | None, float | None, float]:
    """The share of a window's observations at or under ``target``, from its cumulative
    bucket counts (``cumulative_buckets``): (share, the bucket edge it was counted at,
    observations). The target is snapped down to an edge, so every request counted was
    under it; None for the share when there were no observations or no edge is at or
    under the target."""
    if not merged:
        return None, None, 0.0
    n = merged[-1][1]
    edge, under = None, 0.0
    for bound, count in merged:
        if math.isinf(bound) or bound > target:
            break
        edge, under = bound, count
    if edge is None or not n or math.isnan(n):
        return None, edge, 0.0 if not n or math.isnan(n) else n
    return under / n, edge, n


def safe_ratio(num: float | None, den: float | None) -> float | None:
    """num/den, or None when undefined (missing input or zero denominator)."""
    if num is None or den is None or den == 0 or math.isnan(num) or math.isnan(den):
        return None
    return num / den
