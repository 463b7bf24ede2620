"""Local figures from two direct scrapes agree with real Prometheus on real vLLM samples.

How the comparison is made exact: Prometheus extrapolates ``increase()`` to
the edges of its window, so a window that does not start and end on sample
timestamps gives a (slightly) different answer than the plain difference of
two scrapes. We therefore evaluate PromQL *at* the timestamp of a scrape
taken after the load, over a window that starts exactly at a scrape taken
before it: both edges sit on samples, the extrapolation factor is exactly 1,
and the expected tolerance is floating-point rounding only (1e-9 relative).
Our direct scrapes are taken while the server is idle, so they read the same
counter values as Prometheus's edge samples.

A second test checks our own implementation of the extrapolation against
Prometheus on windows that do *not* align, from the raw samples Prometheus
holds, again to 1e-9.
"""

from __future__ import annotations

import math
import time

import httpx
import pytest

from console.model.catalog import MODEL_FIGURES
from console.model.numbers import extrapolated_increase, histogram_quantile
from console.sources.collect.exposition import parse
from console.sources.collect.figures import compute
from console.sources.collect.http import HttpClient
from console.sources.collect.promql import PromClient, fetch_figures
from tests.support.vllm_server import load

pytestmark = [pytest.mark.vllm, pytest.mark.prometheus]

REL = 1e-9


def close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=REL, abs_tol=1e-12)


def _scrape(url: str) -> str:
    r = httpx.get(url + "/metrics", timeout=10)
    r.raise_for_status()
    return r.text


def _wait_idle(url: str, model: str, timeout_s: float = 60) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        figs = compute(parse(_scrape(url)))[model]
        if figs.running == 0 and figs.waiting == 0:
            return
        time.sleep(0.2)
    raise TimeoutError("server never went idle")


@pytest.fixture(scope="module")
async def loaded_window(real_vllm, real_prometheus):
    """Two idle scrapes around a bounded load, and the Prometheus samples at the edges."""
    srv, prom = real_vllm, real_prometheus
    _wait_idle(srv.url, srv.name)
    prom.wait_scrapes(2)
    s0 = _scrape(srv.url)
    t_load = time.time()
    ok = await load(srv.url, srv.name, requests=16, concurrency=4, max_tokens=40)
    assert ok == 16
    _wait_idle(srv.url, srv.name)
    time.sleep(0.5)
    prom.wait_scrapes(2)
    s1 = _scrape(srv.url)
    prom.wait_scrapes(1)
    res = prom.query("up[5m]")
    stamps = sorted(float(v[0]) for v in res[0]["values"])
    t1 = max(t for t in stamps if t < t_load)
    t2 = stamps[-1]
    return {"s0": s0, "s1": s1, "t1": t1, "t2": t2, "w_ms": round((t2 - t1) * 1000)}


async def test_two_scrape_figures_equal_promql_on_same_samples(real_vllm, real_prometheus,
                                                               loaded_window) -> None:
    lw = loaded_window
    local = compute(parse(lw["s1"]), parse(lw["s0"]), window_s=lw["w_ms"] / 1000)[
        real_vllm.name]
    assert local.spec_decode is not None and local.spec_decode.drafts > 0
    assert local.ttft_p95_s is not None
    client = HttpClient()
    try:
        pc = PromClient(real_prometheus.url, client, timeout=10)
        remote, _ = await fetch_figures(pc, lw["w_ms"] / 1000, at=lw["t2"])
    finally:
        await client.aclose()
    prom = remote[real_vllm.name]
    a, b = local.contract_dict(), prom.contract_dict()
    spec_a, spec_b = a.pop("spec_decode"), b.pop("spec_decode")
    for key in a:
        assert close(a[key], b[key]), (key, a[key], b[key])  # type: ignore[arg-type]
    for key in ("drafts", "draft_tokens", "accepted_tokens", "acceptance_rate",
                "mean_acceptance_length"):
        assert close(spec_a[key], spec_b[key]), (key, spec_a[key], spec_b[key])
    # every model figure of the catalog, the ones outside the JSON contract included:
    # the direct path and the generated PromQL agree on the same samples
    for fig in MODEL_FIGURES:
        assert close(local.value(fig.key), prom.value(fig.key)), (
            fig.key, local.value(fig.key), prom.value(fig.key))
    # vLLM 0.32 exports why requests wait; both paths read it through one catalog entry
    assert local.value("waiting_capacity") == prom.value("waiting_capacity") == 0.0
    assert local.value("generation_tps") and local.value("generation_tps") > 0
    assert len(spec_a["per_position"]) == len(spec_b["per_position"]) == 3
    for x, y in zip(spec_a["per_position"], spec_b["per_position"], strict=True):
        assert close(x, y)
    # the plain PromQL of the issue, same samples
    q = real_prometheus.query(
        "histogram_quantile(0.95, sum by (le) (rate("
        f"vllm:time_to_first_token_seconds_bucket[{lw['w_ms']}ms])))", at=lw["t2"])
    assert close(local.ttft_p95_s, float(q[0]["value"][1]))
    acc = real_prometheus.query(
        f"rate(vllm:spec_decode_num_accepted_tokens_total[{lw['w_ms']}ms]) / "
        f"rate(vllm:spec_decode_num_draft_tokens_total[{lw['w_ms']}ms])", at=lw["t2"])
    assert close(local.spec_decode.acceptance_rate, float(acc[0]["value"][1]))


def _matrix(prom, expr: str, at: float) -> dict[str, list[tuple[float, float]]]:
    out = {}
    for item in prom.query(expr, at=at):
        key = item["metric"].get("le", "")
        out[key] = [(float(t), float(v)) for t, v in item["values"]]
    return out


async def test_extrapolated_increase_and_quantile_match_prometheus(real_vllm, real_prometheus,
                                                                   loaded_window) -> None:
    lw = loaded_window
    # Unaligned windows: edges fall between samples, so extrapolation is exercised.
    for w_s in (2.3, 4.7, 9.1):
        at = lw["t2"] - 0.37
        start = at - w_s
        sel = f'{{model_name="{real_vllm.name}"}}'
        raw = _matrix(real_prometheus,
                      f"vllm:time_to_first_token_seconds_bucket{sel}[{int(w_s * 1000)}ms]", at)
        prom_inc = {item["metric"]["le"]: float(item["value"][1]) for item in
                    real_prometheus.query(
                        f"increase(vllm:time_to_first_token_seconds_bucket{sel}"
                        f"[{int(w_s * 1000)}ms])", at=at)}
        assert raw and set(raw) == set(prom_inc)
        ours = {le: extrapolated_increase(pts, start, at) for le, pts in raw.items()}
        for le in raw:
            if math.isnan(prom_inc[le]):
                assert math.isnan(ours[le])
            else:
                assert math.isclose(ours[le], prom_inc[le], rel_tol=REL, abs_tol=1e-12), le
        pq = real_prometheus.query(
            f"histogram_quantile(0.95, sum by (le) (increase("
            f"vllm:time_to_first_token_seconds_bucket{sel}[{int(w_s * 1000)}ms])))", at=at)
        mine = histogram_quantile(0.95, [(float(le), v) for le, v in ours.items()])
        theirs = float(pq[0]["value"][1]) if pq else math.nan
        assert (math.isnan(mine) and math.isnan(theirs)) or math.isclose(
            mine, theirs, rel_tol=REL), (w_s, mine, theirs)
