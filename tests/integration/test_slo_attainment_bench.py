"""SLO attainment equals an independent count on a recorded load (issue 45, "Done when"):
a real vLLM (CPU) started with the bucket edges its profile's ``slo:`` renders
(``--custom-histogram-buckets``, the pod agent's own rendering), the benchmark's own
requests (``console/operations/benchmark``: short and long inputs, one and four at a
time, streaming), and a real Prometheus scraping it.

The count under a target is made twice, independently:

* by the console, from the window's histogram bucket increases, on the direct path
  (two scrapes of ``/metrics``) and on the PromQL path (Prometheus at one instant);
* from the per-request timings the bench client measured with its own clock (TTFT: first
  chunk − request sent; TPOT: (last chunk − first chunk) / (tokens − 1)).

The two clocks differ by what lies between them (the HTTP round trip, the stream's
delivery): the client's TTFT is the server's plus a few milliseconds. The count is
compared at the bucket edge where no client timing lies within that margin of the edge
(so the difference of clocks cannot move a request across it), an edge that splits the
requests (some under, some over: a share of 0 or 1 would prove little)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator

import pytest

from console.config.settings import SlotThresholds
from console.model import slo
from console.operations.benchmark.measure import BenchPlan, RequestResult, run_bench
from console.sources.collect.exposition import parse
from console.sources.collect.figures import compute
from console.sources.collect.http import HttpClient
from console.sources.collect.promql import PromClient, fetch_figures
from pod_agent.engines.vllm import slo_buckets
from pod_agent.profile import Slot
from tests.support import prometheus_server, vllm_server

pytestmark = [pytest.mark.vllm, pytest.mark.prometheus, pytest.mark.realtime]

MODEL = "tiny-slo"
TTFT_TARGET, TPOT_TARGET = 0.03, 0.012
"""The profile's targets: neither is one of vLLM's default edges, so the rendering adds
both (and the exposition shows them)."""
MARGIN = {"ttft": 0.010, "tpot": 0.002}
"""How far the client's timing may stand from the server's (seconds): TTFT, one way (the
client's is later); TPOT, either way, over the request's tokens."""


def _slot() -> Slot:
    return Slot(served_model_name=MODEL, hf_repo_id="example/tiny", port=8000, gpus=[0],
                gpu_util=0.5, max_model_len=2048,
                slo={"ttft_s": TTFT_TARGET, "tpot_s": TPOT_TARGET})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[vllm_server.VllmServer, prometheus_server.PrometheusServer]]:
    if not vllm_server.available() or not prometheus_server.available():
        if os.environ.get("CI"):
            pytest.fail("the vLLM venv and prometheus are needed; .ci/run installs them")
        pytest.skip("the vLLM venv or prometheus is not installed")
    buckets = slo_buckets(_slot())
    srv = vllm_server.VllmServer(
        tmp_path_factory.mktemp("vllm-slo"), name=MODEL, speculative=False,
        model_in_engine=True,
        extra_args=["--custom-histogram-buckets",
                    json.dumps(buckets, sort_keys=True, separators=(",", ":"))])
    srv.start()
    prom = prometheus_server.PrometheusServer(tmp_path_factory.mktemp("prom-slo"),
                                              [f"127.0.0.1:{srv.port}"],
                                              scrape_interval_s=0.5)
    try:
        prom.start()
        yield srv, prom
    finally:
        prom.stop()
        srv.stop()


HISTOGRAMS = ("vllm:time_to_first_token_seconds", "vllm:request_time_per_output_token_seconds")
"""TTFT is counted at a request's first token, TPOT at its end: a scrape may hold one
count and not yet the other."""


def _count(prom: prometheus_server.PrometheusServer, want: float) -> float | None:
    """The last stored sample time at which both histograms counted ``want``."""
    times = None
    for hist in HISTOGRAMS:
        res = prom.query(f'{hist}_count{{model_name="{MODEL}"}}[1h]')
        at = {float(t) for t, v in res[0]["values"] if float(v) == want} if res else set()
        times = at if times is None else times & at
    return max(times) if times else None


def _stored(prom: prometheus_server.PrometheusServer, want: float) -> float:
    """A sample time at which Prometheus holds both counts at ``want`` (the latest):
    a window from one such sample to another is read without extrapolation."""
    for _ in range(300):
        t = _count(prom, want)
        if t is not None:
            return t
        prom.wait_scrapes(1)
    raise AssertionError(f"Prometheus never held the counts at {want}")


def _client_latency(r: RequestResult, kind: str) -> float:
    if kind == "ttft":
        assert r.ttft_s is not None
        return r.ttft_s
    # vLLM records a request of at most one output token as TPOT 0 (vllm-metrics.md)
    return 0.0 if r.tpot_s is None and r.completion_tokens <= 1 else float(r.tpot_s or 0.0)


def _clear_edge(edges: list[float], times: list[float], kind: str) -> float:
    """The edge that splits the requests with the widest clearance between it and the
    client timings on either side; its clearance must beat the clocks' margin."""
    best, room = None, -1.0
    for e in edges:
        under = [t for t in times if t <= e]
        over = [t for t in times if t > e]
        if not under or not over:
            continue
        gap = min(min(over) - e, e - max(under)) if kind == "tpot" else min(over) - e
        if gap > room:
            best, room = e, gap
    assert best is not None, (kind, edges, sorted(times))
    assert room > MARGIN[kind], (kind, best, room, sorted(times))
    return best


async def test_attainment_equals_the_bench_clients_own_count_on_both_paths(served) -> None:
    srv, prom = served
    client = HttpClient()
    try:
        before_at = _stored(prom, 0.0)
        a = (await client.get(srv.url + "/metrics", timeout=10.0)).text
        # the bench's own protocol, small: short and long inputs, 1 and 4 at a time
        res = await run_bench(BenchPlan(
            profile="slo", slot="S", served_model_name=MODEL, url=srv.url,
            slot_url=srv.url, via="direct", runs=2, warmup=0, concurrency=(1, 4),
            lengths=("short", "long"), long_tokens=500, max_tokens=12,
            task_max_tokens=8, tasks=(), timeout_s=120.0, temperature=0.0), client)
        assert res.failed_requests == 0, res.errors()
        reqs = [r for c in res.configs for run in c.runs for r in run.requests]
        n = len(reqs)
        assert n == 20
        after_at = _stored(prom, float(n))
        b = (await client.get(srv.url + "/metrics", timeout=10.0)).text
        window = round(after_at - before_at, 3)
        direct = compute(parse(b), parse(a), window_s=window)[MODEL]
        figs, _ = await fetch_figures(PromClient(prom.url, client, timeout=10), window,
                                      at=after_at)
        via = figs[MODEL]
    finally:
        await client.aclose()
    for kind, target in (("ttft", TTFT_TARGET), ("tpot", TPOT_TARGET)):
        edges = [bound for bound, _ in direct.latency_buckets[kind] if math.isfinite(bound)]
        # the profile's target is an edge of the server's histogram: vLLM took the flag
        assert target in edges, (kind, edges)
        times = [_client_latency(r, kind) for r in reqs]
        edge = _clear_edge(edges, times, kind)
        counted = sum(1 for t in times if t <= edge)
        for path, figures in (("direct", direct), ("promql", via)):
            th = SlotThresholds(**{f"{kind}_target_s": edge})
            [reading] = slo.readings(figures, th)
            assert (reading.edge_s, reading.requests) == (edge, n), (path, kind, reading)
            assert reading.under == counted, (path, kind, edge, reading, sorted(times))
            assert reading.share == counted / n
        # and at the profile's own target: the same count on both paths
        assert direct.attainment(kind, target) == via.attainment(kind, target)
        assert direct.attainment(kind, target)[1] == target
