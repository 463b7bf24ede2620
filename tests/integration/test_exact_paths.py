"""The figures agree between the two paths and between the queries of one poll, on real
samples: a real Prometheus scrapes a loopback ``/metrics`` serving real vLLM captures
(``tests/fixtures/vllm-0.32.0-cpu``), changed the way data parallelism and a restart
change them, so the direct path reads exactly the texts Prometheus stored.

How the comparison is exact (as in ``test_prometheus_agreement``): PromQL is evaluated
at the timestamp of a sample, over a window that starts exactly at an earlier sample's,
so Prometheus extrapolates by a factor of exactly 1."""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.model.catalog import MODEL_FIGURES
from console.model.numbers import extrapolated_increase
from console.sources.collect import promql
from console.sources.collect.exposition import parse
from console.sources.collect.figures import compute
from console.sources.collect.http import HttpClient
from console.sources.collect.promql import PromClient, fetch_figures, figure_queries
from console.sources.collect.slot import ScrapeWindow
from tests.conftest import FIXTURES
from tests.support import prometheus_server
from tests.support.exposition_server import ExpositionServer

pytestmark = [pytest.mark.prometheus]

PLAIN = FIXTURES / "vllm-0.32.0-cpu" / "plain"
MODEL = "tiny-main"
REL = 1e-9


def close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=REL, abs_tol=1e-12)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ExpositionServer, prometheus_server.PrometheusServer]]:
    if not prometheus_server.available():
        pytest.skip("prometheus (Debian package) not installed")
    exp = ExpositionServer().start()
    prom = prometheus_server.PrometheusServer(tmp_path / "prom", [f"127.0.0.1:{exp.port}"],
                                              scrape_interval_s=0.5)
    try:
        yield exp, prom
    finally:
        prom.stop()
        exp.stop()


def _edge_stamps(prom: prometheus_server.PrometheusServer, series: str, before: float
                 ) -> tuple[float, float]:
    """The last sample of ``series`` at its earlier value ``before``, and the last one."""
    [item] = prom.query(f"{series}[1h]")
    pts = [(float(t), float(v)) for t, v in item["values"]]
    t1 = max(t for t, v in pts if v == before)
    assert pts[-1][1] != before and pts[-1][0] > t1
    return t1, pts[-1][0]


def _wait_value(prom: prometheus_server.PrometheusServer, series: str, want: float) -> None:
    """Until Prometheus holds two samples of ``series`` at ``want`` (both ends settled)."""
    for _ in range(300):
        res = prom.query(f"{series}[1h]")
        if res and sum(float(v) == want for _, v in res[0]["values"]) >= 2:
            return
        prom.wait_scrapes(1)
    raise AssertionError(f"{series} never read {want} twice")


async def _both_paths(prom: prometheus_server.PrometheusServer, a: str, b: str,
                      t1: float, t2: float):
    w = round((t2 - t1) * 1000) / 1000
    direct = compute(parse(b), parse(a), window_s=w)[MODEL]
    win = ScrapeWindow(3600.0)
    win.add(t1, parse(a), MODEL)
    win.add(t2, parse(b), MODEL)
    client = HttpClient()
    try:
        figs, kv = await fetch_figures(PromClient(prom.url, client, timeout=10), w, at=t2)
    finally:
        await client.aclose()
    return direct, win.kv_p99(), figs[MODEL], kv[MODEL]


def _two_engines(text: str, kv0: float, kv1: float, idle: str) -> str:
    """``text`` as engine 0 and the idle capture as engine 1 (a second data-parallel
    engine that does nothing), each engine's KV usage set."""
    out = []
    idle_lines = {ln.rpartition(" ")[0]: ln for ln in idle.splitlines()}
    for line in text.splitlines():
        out.append(line)
        if 'engine="0"' in line and not line.startswith("#"):
            head = line.rpartition(" ")[0]
            out.append(idle_lines.get(head, line).replace('engine="0"', 'engine="1"'))
    joined = "\n".join(out) + "\n"
    kv = 'vllm:kv_cache_usage_perc{engine="%s",model_name="tiny-main"} '
    joined = re.sub(re.escape(kv % "0") + r"\S+", kv % "0" + repr(kv0), joined)
    return re.sub(re.escape(kv % "1") + r"\S+", kv % "1" + repr(kv1), joined)


async def test_two_engines_read_alike_on_both_paths(served) -> None:
    """vLLM data parallel: engine 0 serves, engine 1 is hung (its counters stand still).
    The KV usage is the fullest engine's (60 %, not 60 + 25), now and as its p99, and
    the counters are summed: equal on the direct path and through Prometheus."""
    exp, prom = served
    idle = (PLAIN / "metrics-idle.txt").read_text()
    a = _two_engines(idle, 0.6, 0.25, idle)
    b = _two_engines((PLAIN / "metrics-after-load.txt").read_text(), 0.6, 0.25, idle)
    exp.set(a)
    prom.start()
    gen0 = f'vllm:generation_tokens_total{{engine="0",model_name="{MODEL}"}}'
    _wait_value(prom, gen0, 0.0)
    exp.set(b)
    _wait_value(prom, gen0, 3060.0)
    t1, t2 = _edge_stamps(prom, gen0, 0.0)
    direct, direct_p99, via, via_p99 = await _both_paths(prom, a, b, t1, t2)
    assert direct.kv_cache_usage == via.kv_cache_usage == 0.6
    assert direct_p99 == via_p99 == 0.6
    assert direct.generation_tokens == via.generation_tokens == 3060.0
    assert close(direct.generation_tps, via.generation_tps) and direct.generation_tps
    for fig in MODEL_FIGURES:
        assert close(direct.value(fig.key), via.value(fig.key)), (
            fig.key, direct.value(fig.key), via.value(fig.key))
    # SLO attainment counted from the same bucket increases on both paths, and as a
    # plain PromQL ratio of the two buckets over the same window
    w = round((t2 - t1) * 1000)
    for kind, hist, target in (("ttft", "vllm:time_to_first_token_seconds", 0.015),
                               ("tpot", "vllm:request_time_per_output_token_seconds", 0.12)):
        share, edge, n = direct.attainment(kind, target)
        assert (share, edge, n) == via.attainment(kind, target) and n == 18
        assert edge == {"ttft": 0.01, "tpot": 0.1}[kind]
        [plain] = prom.query(
            f'sum(increase({hist}_bucket{{le="{edge}"}}[{w}ms])) / '
            f'sum(increase({hist}_bucket{{le="+Inf"}}[{w}ms]))', at=t2)
        assert share is not None and close(share, float(plain["value"][1]))


async def test_a_restart_in_the_window_is_read_as_prometheus_reads_it(served) -> None:
    """The engine restarts between the window's ends: generation tokens drop (a reset:
    the new count from 0), prompt tokens already count past the old total (Prometheus
    sees a rise: the difference), every ``*_created`` moves. Equal on both paths."""
    exp, prom = served
    a = (PLAIN / "metrics-after-load.txt").read_text()
    prompt = f'vllm:prompt_tokens_total{{engine="0",model_name="{MODEL}"}}'
    gen = f'vllm:generation_tokens_total{{engine="0",model_name="{MODEL}"}}'
    b = a.replace(f"{prompt} 611.0", f"{prompt} 700.0").replace(f"{gen} 3060.0", f"{gen} 40.0")
    b = re.sub(r"(_created\{[^}]*\}) (\S+)",
               lambda m: f"{m[1]} {float(m[2]) + 100.0!r}", b)
    assert b.count("700.0") and b != a
    exp.set(a)
    prom.start()
    _wait_value(prom, prompt, 611.0)
    exp.set(b)
    _wait_value(prom, prompt, 700.0)
    t1, t2 = _edge_stamps(prom, prompt, 611.0)
    direct, _, via, _ = await _both_paths(prom, a, b, t1, t2)
    assert direct.prompt_tokens == via.prompt_tokens == 89.0
    assert direct.generation_tokens == via.generation_tokens == 40.0
    for fig in MODEL_FIGURES:
        assert close(direct.value(fig.key), via.value(fig.key)), (
            fig.key, direct.value(fig.key), via.value(fig.key))


SPEC = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} 1.0
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {d}
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {dt}
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {acc}
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="0"}} {p0}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="1"}} {p1}
"""


def _spec(n: int) -> str:
    """The n-th scrape: every draft accepted at position 0 (100 % exactly), half of them
    at position 1; the counts grow with n², so two instants' windows differ."""
    d = 10 * n * n
    return SPEC.format(d=float(d), dt=float(2 * d), acc=float(d + d // 2), p0=float(d),
                       p1=float(d // 2))


async def test_one_poll_is_one_instant_though_samples_land_between_its_queries(
        served) -> None:
    """A scrape lands after the poll's drafts query answered and before its per-position
    query is asked: every ratio still reads one set of samples, within [0, 1], equal to
    the reference computed from Prometheus's raw samples at the poll's recorded instant."""
    exp, prom = served
    exp.render = _spec
    prom.start()
    prom.wait_scrapes(4)
    window = 60.0
    queries = figure_queries(window)
    drafts_answered = asyncio.Event()
    last_stamp = "timestamp(vllm:spec_decode_num_drafts_total)"

    def stamp() -> float:
        return float(prom.query(last_stamp)[0]["value"][1])

    class SlowPerPosition(PromClient):
        """Asks the per-position query only once a newer scrape is in Prometheus."""

        async def query(self, expr: str, at: float | None = None) -> list[dict]:
            if expr == queries["spec_per_pos"]:
                await drafts_answered.wait()
                before = await asyncio.to_thread(stamp)
                for _ in range(200):
                    if await asyncio.to_thread(stamp) > before:
                        break
                    await asyncio.to_thread(prom.wait_scrapes, 1)
                else:
                    raise AssertionError("no scrape landed")
            res = await super().query(expr, at)
            if expr == queries["spec_drafts"]:
                drafts_answered.set()
            return res

    client = HttpClient()
    try:
        figs, _ = await fetch_figures(SlowPerPosition(prom.url, client, timeout=10), window)
    finally:
        await client.aclose()
    f = figs["m"]
    assert f.at is not None  # the poll's one instant, kept with its figures
    # settled back by the scrape timeout Prometheus itself reports (0.5 s: its interval)
    assert promql._settle[prom.url] == 0.5

    def increase(series: str) -> float:
        [item] = prom.query(f"{series}[{int(window)}s]", at=f.at)
        pts = [(float(t), float(v)) for t, v in item["values"]]
        return extrapolated_increase(pts, f.at - window, f.at)

    drafts = increase("vllm:spec_decode_num_drafts_total")
    pos = [increase(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{p}"}}')
           for p in "01"]
    accepted = increase("vllm:spec_decode_num_accepted_tokens_total")
    draft_tokens = increase("vllm:spec_decode_num_draft_tokens_total")
    assert f.spec_decode is not None
    got = f.spec_decode.per_position
    assert len(got) == 2 and all(x is not None and 0 <= x <= 1 for x in got), got
    assert close(got[0], pos[0] / drafts) and close(got[0], 1.0)
    assert close(got[1], pos[1] / drafts)
    assert close(f.acceptance_rate, accepted / draft_tokens)
    assert close(f.mean_acceptance_length, 1 + accepted / drafts)
    assert close(f.spec_drafts, drafts)
