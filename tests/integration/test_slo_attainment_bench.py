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

The console's count is first checked exactly against the server's own bucket, read raw
from the two expositions. Against the client's clock it can be checked only as far as the
two clocks agree, and how far that is depends on the machine (the HTTP round trip, the
stream's delivery, and on a busy machine the scheduler), so the test measures it during
the run, from totals the server exports, as bounds that hold for every single request.
TTFT: the client's is the server's plus a delay that is never negative; the client's total
minus the server's (the histogram's ``_sum`` increase) bounds every request's delay, since
none exceeds their sum. TPOT: vLLM times a request's tokens in its engine (a monotonic
clock; TTFT and end-to-end latency are its front end's), so a request's client TPOT is the
server's plus (its last token's delay − its first's) / (tokens − 1), each delay from the
engine's token to the client's chunk, never negative. The first token's delay is bounded by
the client's TTFT total minus the engine's queue and prefill totals (every request's own
term — its delay plus its wait from the client's send to the engine's queue — is never
negative, so none exceeds their sum); the last token's, by the client's totals to the
last token minus the engine's queue and inference totals. The server's count at an edge is
then pinned between two client counts, equal to the client's own where no client timing
lies within its margin of the edge (the edge chosen is the one that leaves fewest requests
in doubt; on an idle machine, often none). A loaded machine widens the margins, never the
checks: the server's own bucket, read raw, is the console's count exactly."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator

import pytest

from console.config.settings import SlotThresholds
from console.model import slo
from console.operations.benchmark.measure import BenchPlan, RequestResult, run_bench
from console.sources.collect.exposition import Exposition, label, parse
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
SUMS = {"ttft": "vllm:time_to_first_token_seconds_sum",
        "tpot": "vllm:request_time_per_output_token_seconds_sum"}
"""The server's totals over the window: the client's TTFT total minus the server's bounds
each request's delay; the TPOT totals are compared within the engine's bounds (see the
module's text)."""
ENGINE = {"queue": "vllm:request_queue_time_seconds_sum",
          "prefill": "vllm:request_prefill_time_seconds_sum",
          "inference": "vllm:request_inference_time_seconds_sum"}
"""The engine's own intervals (its monotonic clock): queued → scheduled, scheduled → first
token, scheduled → last token. Observed at a request's end, as its TPOT."""


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


def _total(before: Exposition, after: Exposition, name: str) -> float:
    """The increase of ``name`` (a histogram's ``_sum``) for this model over the window."""
    def value(exp: Exposition) -> float:
        return sum(v for labels, v in exp.series(name).items()
                   if label(labels, "model_name") == MODEL)
    return value(after) - value(before)


def _bucket(before: Exposition, after: Exposition, kind: str, edge: float) -> float:
    """The server's own count at or under ``edge`` over the window: the increase of that
    bucket in the raw exposition (no figure, no console code between)."""
    name = HISTOGRAMS[0 if kind == "ttft" else 1] + "_bucket"

    def value(exp: Exposition) -> float:
        return sum(v for labels, v in exp.series(name).items()
                   if label(labels, "model_name") == MODEL
                   and float(label(labels, "le") or "nan") == edge)
    return value(after) - value(before)


Bounds = list[tuple[float, float, float]]
"""Per request: its client timing, and how far the server's may lie above and below it."""


def _doubt(bounds: Bounds, edge: float) -> tuple[int, int]:
    """The least and the most requests the server can count at or under ``edge``."""
    return (sum(1 for t, above, _ in bounds if t + above <= edge),
            sum(1 for t, _, below in bounds if t - below <= edge))


def _edge(edges: list[float], bounds: Bounds, kind: str) -> float:
    """Of the edges that split the requests (some under, some over: a share of 0 or 1
    would prove little), the one that leaves fewest requests in doubt."""
    times = [t for t, _, _ in bounds]
    split = [e for e in edges if 0 < sum(1 for t in times if t <= e) < len(times)]
    assert split, (kind, edges, sorted(times))
    return min(split, key=lambda e: (_doubt(bounds, e)[1] - _doubt(bounds, e)[0], e))


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
        before, after = parse(a), parse(b)
        direct = compute(after, before, window_s=window)[MODEL]
        figs, _ = await fetch_figures(PromClient(prom.url, client, timeout=10), window,
                                      at=after_at)
        via = figs[MODEL]
    finally:
        await client.aclose()
    # the delays between the clocks, measured in this run: the client's total minus the
    # server's (request sent to first token)
    ttft_delay = sum(_client_latency(r, "ttft") for r in reqs) \
        - _total(before, after, SUMS["ttft"])
    # none is negative (the client sends before the server reads, and reads after the
    # server writes): a negative total would mean the clocks are not what this test knows
    assert ttft_delay >= -1e-3, ttft_delay
    # TPOT (the module's text): the engine's token to the client's chunk, the first and
    # the last, each bounded by a total of terms that are never negative
    queue = _total(before, after, ENGINE["queue"])
    first_delay = sum(_client_latency(r, "ttft") for r in reqs) \
        - queue - _total(before, after, ENGINE["prefill"])
    last_delay = sum(r.last - r.start for r in reqs if r.last is not None) \
        - queue - _total(before, after, ENGINE["inference"])
    assert min(first_delay, last_delay) >= -1e-3, (first_delay, last_delay)

    def bounds(kind: str) -> Bounds:
        """TTFT: the server's is the client's less a delay in [0, ttft_delay]. TPOT: the
        server's is the client's plus (first delay − last delay) / (tokens − 1)."""
        if kind == "ttft":
            return [(_client_latency(r, kind), 0.0, max(ttft_delay, 0.0)) for r in reqs]
        out = []
        for r in reqs:
            steps = r.completion_tokens - 1
            t = _client_latency(r, kind)
            # a request of one token: TPOT 0 on both sides (vllm-metrics.md)
            out.append((t, max(first_delay, 0.0) / steps, max(last_delay, 0.0) / steps)
                       if steps > 0 else (t, 0.0, 0.0))
        return out

    # per request the TPOT bound is loose (a sum's worth of delay over its tokens), but
    # over all of them it binds: the server's TPOT total is the client's plus the sum of
    # (first delay − last delay) / (tokens − 1), within the same two totals
    steps = min(r.completion_tokens - 1 for r in reqs if r.completion_tokens > 1)
    gap = _total(before, after, SUMS["tpot"]) - sum(_client_latency(r, "tpot") for r in reqs)
    assert -last_delay / steps - 1e-3 <= gap <= first_delay / steps + 1e-3, \
        (gap, first_delay, last_delay, steps)
    for kind, target in (("ttft", TTFT_TARGET), ("tpot", TPOT_TARGET)):
        edges = [bound for bound, _ in direct.latency_buckets[kind] if math.isfinite(bound)]
        # the profile's target is an edge of the server's histogram: vLLM took the flag
        assert target in edges, (kind, edges)
        spans = bounds(kind)
        edge = _edge(edges, spans, kind)
        least, most = _doubt(spans, edge)
        print(f"{kind}: the server's timing within +{max(a for _, a, _ in spans) * 1000:.1f}"
              f"/-{max(b for _, _, b in spans) * 1000:.1f} ms of the client's; at the "
              f"{edge:g} s edge the server may count {least}..{most} of {n}")
        for path, figures in (("direct", direct), ("promql", via)):
            th = SlotThresholds(**{f"{kind}_target_s": edge})
            [reading] = slo.readings(figures, th)
            why = (path, kind, edge, reading, sorted(spans))
            assert (reading.edge_s, reading.requests) == (edge, n), why
            # the server's own bucket, read raw: the same count, exactly
            assert reading.under == _bucket(before, after, kind, edge), why
            # and the client's own count, up to the requests its clock leaves in doubt
            # (equal where none is)
            assert least <= reading.under <= most, why
            assert reading.share == reading.under / n
        # the two paths read the same samples: the same count at every edge
        assert direct.attainment(kind, edge) == via.attainment(kind, edge)
        # and at the profile's own target: the same count on both paths
        assert direct.attainment(kind, target) == via.attainment(kind, target)
        assert direct.attainment(kind, target)[1] == target
