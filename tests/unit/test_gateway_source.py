"""The gateway source on a real LiteLLM capture (``tests/fixtures/litellm_metrics.txt``,
LiteLLM 1.100.5 with ``callbacks: ["prometheus"]``, two users, a deployment failing into
cooldown, a fallback) and against hostile gateways on loopback: a 2 MB exposition, one
that hangs, one whose ``/metrics`` wants a key the console lacks."""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import re
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from console.config.settings import GatewaySettings
from console.model.catalog import GW_FAILURES, GW_REQUESTS
from console.model.gateway import deployment_status
from console.sources.collect import gateway as gw_mod
from console.sources.collect.exposition import parse
from console.sources.collect.gateway import FAMILIES, GatewayCollector
from tests.conftest import FIXTURES

CAPTURE = (FIXTURES / "litellm_metrics.txt").read_text()
_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$')


def _independent(text: str) -> list[tuple[str, dict[str, str], float]]:
    """The exposition read by a regular expression, nothing of the console's."""
    out = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"',
                                     m.group(2)))
            out.append((m.group(1), labels, float(m.group(3))))
    return out


def _sum(rows: list, name: str, **want: str) -> float:
    return sum(v for n, labels, v in rows if n == name and all(
        re.fullmatch(p, labels.get(k, "")) for k, p in want.items()))


def _p95(rows: list, hist: str, **want: str) -> float:
    per: dict[float, float] = {}
    for n, labels, v in rows:
        if n == hist + "_bucket" and all(labels.get(k) == w for k, w in want.items()):
            per[float(labels["le"])] = per.get(float(labels["le"]), 0.0) + v
    bounds = sorted(per)
    total = per[math.inf]
    rank = 0.95 * total
    prev_b, prev_c = 0.0, 0.0
    for b in bounds:
        if per[b] >= rank:
            if math.isinf(b):
                return prev_b
            return prev_b + (b - prev_b) * (rank - prev_c) / (per[b] - prev_c)
        prev_b, prev_c = b, per[b]
    raise AssertionError


def _taken_at(rows: list) -> float:
    """A minute after the capture's newest series was born: the moment it was taken. Read
    at today's clock instead, a capture from an earlier day holds no usage *today* (each
    user's count started before today's midnight), and the figures would depend on the
    date the suite runs (CI ran it the day after the capture: alice's 6 requests read 0)."""
    return max(v for n, _, v in rows if n.endswith("_created")) + 60.0


def test_capture_figures_equal_an_independent_reading() -> None:
    rows = _independent(CAPTURE)
    col = GatewayCollector("http://gw", GatewaySettings(), 300.0, 1.0, zone=dt.UTC)
    snap = col.read(parse(CAPTURE, FAMILIES), _taken_at(rows))
    req = "litellm_deployment_total_requests_total"
    fail = "litellm_deployment_failure_responses_total"
    assert snap.total["requests"] == _sum(rows, req)
    assert snap.groups["tiny"]["requests"] == _sum(rows, req, requested_model="tiny")
    assert snap.groups["tiny"]["errors_5xx"] == _sum(rows, fail, requested_model="tiny",
                                                     exception_status="5..")
    dep = {d.model_id: d for d in snap.deployments}
    assert dep["tiny-b"].figure("failures") == _sum(rows, fail, model_id="tiny-b") > 0
    assert dep["tiny-b"].figure("state") == 2.0
    assert dep["tiny-b"].figure("cooldowns") == _sum(
        rows, "litellm_deployment_cooled_down_total", model_id="tiny-b") == 1
    assert snap.groups["tiny"]["fallbacks_ok"] == _sum(
        rows, "litellm_deployment_successful_fallbacks_total", requested_model="tiny")
    for mid in ("tiny-a", "tiny-b", "small-c"):
        assert dep[mid].figure("overhead_p95_s") == pytest.approx(
            _p95(rows, "litellm_overhead_latency_metric", model_id=mid), rel=1e-12)
        assert dep[mid].figure("latency_p95_s") == pytest.approx(
            _p95(rows, "litellm_llm_api_latency_metric", model_id=mid), rel=1e-12)
    assert snap.groups["tiny"]["total_latency_p95_s"] == pytest.approx(
        _p95(rows, "litellm_request_total_latency_metric", model="tiny"), rel=1e-12)
    for group in ("tiny", "small"):  # spend and tokens per model too
        assert snap.groups[group]["tokens"] == _sum(rows, "litellm_total_tokens_metric_total",
                                                    model=group)
        assert snap.groups[group]["spend"] == pytest.approx(
            _sum(rows, "litellm_spend_metric_total", model=group), rel=1e-12)
    users = {u.name: u for u in snap.users}
    assert set(users) == {"alice", "bob"}
    for who in users:
        assert users[who].requests == _sum(rows, "litellm_proxy_total_requests_metric_total",
                                           end_user=who)
        assert users[who].tokens == _sum(rows, "litellm_total_tokens_metric_total",
                                         end_user=who)
        assert users[who].spend == pytest.approx(
            _sum(rows, "litellm_spend_metric_total", end_user=who), rel=1e-12)
    # no key material on any row: the master key's hash label reads "master key"
    assert "sk-" not in repr(snap.as_json())


def test_window_rates_and_the_cooldown_trap() -> None:
    col = GatewayCollector("http://gw", GatewaySettings(cooldown_s=5), 300.0, 1.0)
    t0 = 1_000_000.0
    first = CAPTURE
    col.read(parse(first, FAMILIES), t0)
    # ten more calls to tiny-a and one more cooldown of tiny-b, 10 s later
    later = re.sub(r'(litellm_deployment_total_requests_total\{[^}]*model_id="tiny-a"[^}]*\}) '
                   r'(\S+)', lambda m: f"{m.group(1)} {float(m.group(2)) + 10}", first)
    later = re.sub(r'(litellm_deployment_cooled_down_total\{[^}]*\}) (\S+)',
                   lambda m: f"{m.group(1)} {float(m.group(2)) + 1}", later)
    snap = col.read(parse(later, FAMILIES), t0 + 10)
    dep = {d.model_id: d for d in snap.deployments}
    assert snap.window_s == 10
    assert dep["tiny-a"].figure("requests_per_s") == pytest.approx(1.0)
    assert dep["tiny-b"].figure("requests_per_s") == 0.0
    assert dep["tiny-b"].status == "cooldown"
    # the same state 2, 30 s on with the counter still: not "down" any more
    snap = col.read(parse(later, FAMILIES), t0 + 40)
    assert {d.model_id: d for d in snap.deployments}["tiny-b"].status == "outage-past"
    assert deployment_status(2.0, None, 0, 5, 3, 0) == "failing"
    assert deployment_status(0.0, 0.0, 0, 5, 0, 0) == "healthy"


def test_a_cooldown_born_between_close_scrapes_is_recent() -> None:
    """The cooldown counter of a deployment first appears in a scrape seconds after the
    first one: the kept scrapes are sparse (that one was not kept), yet it is a cooldown
    now, not one from before this console watched (CI saw ``outage-past``)."""
    col = GatewayCollector("http://gw", GatewaySettings(cooldown_s=30), 300.0, 1.0)
    before = "\n".join(line for line in CAPTURE.splitlines()
                       if not line.startswith("litellm_deployment_cooled_down_total"))
    t0 = 1_000_000.0
    col.read(parse(before, FAMILIES), t0)
    col.read(parse(before, FAMILIES), t0 + 1.1)
    assert len(col.scrapes) == 1  # the premise: the second was not kept
    snap = col.read(parse(CAPTURE, FAMILIES), t0 + 2.2)
    assert {d.model_id: d for d in snap.deployments}["tiny-b"].status == "cooldown"


def test_workers_without_multiprocess_mode_are_told() -> None:
    col = GatewayCollector("http://gw", GatewaySettings(), 300.0, 1.0)
    a = CAPTURE
    b = re.sub(r"^process_start_time_seconds .*$", "process_start_time_seconds 1.5e9", a,
               flags=re.M)
    notes = [col.read(parse(x, FAMILIES), 100.0 + i).workers_note
             for i, x in enumerate([a, b, a])]
    assert notes[:2] == [None, None] and notes[2] and "multiprocess" in notes[2]


async def _serve(handler) -> tuple[asyncio.AbstractServer, str]:  # type: ignore[no-untyped-def]
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


def _reply(status: str, body: bytes) -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n"
            "Content-Type: text/plain\r\n\r\n").encode() + body


def _big_exposition(target: int = 2 * 1024 * 1024) -> bytes:
    lines = [CAPTURE]
    i = 0
    size = len(CAPTURE)
    while size < target:
        line = (f'litellm_spend_metric_total{{end_user="user-{i}",hashed_api_key="h{i}",'
                f'model="m{i % 50}",model_id="d{i % 50}",requested_model="m{i % 50}"}} '
                f'{i * 0.001}\n')
        lines.append(line)
        size += len(line)
        i += 1
    return "".join(lines).encode()


def test_hostile_gateways_are_bounded(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    big = _big_exposition()
    assert len(big) >= 2 * 1024 * 1024

    async def run() -> None:
        async def healthy(reader, writer) -> None:  # type: ignore[no-untyped-def]
            line = await reader.readline()
            while (await reader.readline()) not in (b"\r\n", b""):
                pass
            path = line.split()[1].decode()
            if path.startswith("/health"):
                writer.write(_reply("200 OK", b'{"status":"healthy","db":"Not connected"}'))
            elif path == "/metrics/":
                writer.write(_reply("200 OK", big))
            await writer.drain()
            writer.close()

        async def locked(reader, writer) -> None:  # type: ignore[no-untyped-def]
            line = await reader.readline()
            auth = b""
            while (h := await reader.readline()) not in (b"\r\n", b""):
                if h.lower().startswith(b"authorization:"):
                    auth = h
            path = line.split()[1].decode()
            if path.startswith("/health"):
                writer.write(_reply("200 OK", b'{"status":"healthy"}'))
            elif b"right-key" in auth:
                writer.write(_reply("200 OK", CAPTURE.encode()))
            else:
                writer.write(_reply("401 Unauthorized", b'"Unauthorized access"'))
            await writer.drain()
            writer.close()

        async def hang(reader, writer) -> None:  # type: ignore[no-untyped-def]
            await asyncio.sleep(60)

        # 2 MB exposition: parsed within a bound, memory bounded
        server, url = await _serve(healthy)
        col = GatewayCollector(url, GatewaySettings(), 300.0, 5.0)
        lag = [0.0]

        async def ticker() -> None:  # the event loop's longest gap during the poll
            last = time.monotonic()
            while True:
                await asyncio.sleep(0.005)
                now = time.monotonic()
                lag[0] = max(lag[0], now - last)
                last = now

        # memory first, under tracemalloc (which slows everything several times over)
        tracemalloc.start()
        snap = await col.poll(time.time())
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert snap.metrics_error is None and snap.total["requests"] == 22
        assert len(snap.users) > 1000
        assert peak < 64 * 1024 * 1024, peak
        # then time and the loop's longest gap, on a poll nothing slows down (a collector
        # of its own: a second poll of the first one would count since the first)
        await col.aclose()
        col = GatewayCollector(url, GatewaySettings(), 300.0, 5.0)
        # where the parse and the read ran: off the loop's thread (~0.1 s of work each;
        # keys and paints go on meanwhile). The loop's longest gap is printed, not judged:
        # on a machine twice as busy it measures the machine (a run read 0.62 s)
        threads: dict[str, set[int]] = {"parse": set(), "read": set()}
        real_parse, real_read = gw_mod.parse, col.read

        def parse_where(*a, **kw):  # type: ignore[no-untyped-def]
            threads["parse"].add(threading.get_ident())
            return real_parse(*a, **kw)

        def read_where(*a, **kw):  # type: ignore[no-untyped-def]
            threads["read"].add(threading.get_ident())
            return real_read(*a, **kw)

        monkeypatch.setattr(gw_mod, "parse", parse_where)
        monkeypatch.setattr(col, "read", read_where)
        tick = asyncio.ensure_future(ticker())
        t = time.monotonic()
        snap = await col.poll(time.time())
        took = time.monotonic() - t
        tick.cancel()
        server.close()
        await col.aclose()
        monkeypatch.setattr(gw_mod, "parse", real_parse)
        assert snap.metrics_error is None and snap.total["requests"] == 22
        assert took < 5.0, took
        loop_thread = threading.get_ident()
        assert threads["parse"] and loop_thread not in threads["parse"], threads
        assert threads["read"] and loop_thread not in threads["read"], threads
        print(f"2 MB exposition: {took:.2f} s, peak {peak / 1e6:.1f} MB, "
              f"longest loop gap {lag[0] * 1000:.0f} ms")

        # a gateway that hangs: the poll ends within its timeout, saying so
        server, url = await _serve(hang)
        col = GatewayCollector(url, GatewaySettings(), 300.0, 0.5)
        t = time.monotonic()
        snap = await col.poll(time.time())
        assert time.monotonic() - t < 2.0
        assert snap.live is False and "timed out" in (snap.metrics_error or "")
        server.close()
        await col.aclose()

        # /metrics wants a key the console lacks: the message names the setting
        server, url = await _serve(locked)
        monkeypatch.delenv("GW_TEST_KEY", raising=False)
        col = GatewayCollector(url, GatewaySettings(key_env="GW_TEST_KEY"), 300.0, 2.0)
        snap = await col.poll(time.time())
        assert snap.live and snap.metrics_error is not None
        assert "GW_TEST_KEY" in snap.metrics_error and "gateway.key_env" in snap.metrics_error
        assert "require_auth_for_metrics_endpoint" in snap.metrics_error
        keyfile = tmp_path / "gw.key"
        keyfile.write_text("wrong-key\n")
        col = GatewayCollector(url, GatewaySettings(key_file=keyfile), 300.0, 2.0)
        snap = await col.poll(time.time())
        assert "refused the key" in (snap.metrics_error or "")
        assert "gateway.key_file" in (snap.metrics_error or "")
        assert "wrong-key" not in (snap.metrics_error or "")
        keyfile.write_text("right-key\n")  # read at each poll: a rotated key is picked up
        snap = await col.poll(time.time())
        assert snap.metrics_error is None and snap.total["requests"] == 22
        server.close()

    asyncio.run(run())


def test_a_readiness_body_over_the_cap_is_read_by_its_status() -> None:
    """A big proxy's /health/readiness lists every callback and model: over 64 KB it
    still says ready by its 200 (issue 44: it read as NOT READY), and a 503 says not."""
    big = b'{"status":"healthy","callbacks":["' + b"x" * 100_000 + b'"]}'

    async def run(status: str) -> tuple[bool | None, str]:
        async def handler(reader, writer) -> None:  # type: ignore[no-untyped-def]
            line = await reader.readline()
            while (await reader.readline()) not in (b"\r\n", b""):
                pass
            path = line.split()[1].decode()
            body = big if path == "/health/readiness" else b"ok"
            writer.write(_reply(status if path == "/health/readiness" else "200 OK", body))
            await writer.drain()
            writer.close()

        server, url = await _serve(handler)
        col = GatewayCollector(url, GatewaySettings(), 300.0, 5.0)
        try:
            snap = await col.poll(time.time())
        finally:
            server.close()
            await col.aclose()
        return snap.ready, snap.ready_detail

    ready, detail = asyncio.run(run("200 OK"))
    assert ready is True, detail
    ready, detail = asyncio.run(run("503 Service Unavailable"))
    assert ready is False and "503" in detail, detail


def test_a_large_exposition_is_kept_a_few_times_with_its_labels_shared() -> None:
    """A 6 MB exposition (under the 8 MB cap: 47k user series) polled every 2 s: the
    collector keeps a few scrapes across its window, not every one, and a series' label
    set is one tuple in all of them (issue 44: 20 polls held 1.1 GB, each scrape its own
    labels, and each poll parsed every label set again)."""
    from console.sources.collect.gateway import KEEP_SPACING

    big = _big_exposition(6 * 1024 * 1024).decode()
    assert 6 * 1024 * 1024 <= len(big) < 8 * 1024 * 1024
    col = GatewayCollector("http://gw", GatewaySettings(), 300.0, 1.0, zone=dt.UTC)
    exps = []
    for k in range(6):
        text = big.replace("0.001\n", f"0.00{k + 2}\n")  # the values move, not the series
        exps.append(parse(text, FAMILIES, label_memo=col._labels))
        col.read(exps[-1], 1000.0 + 2 * k)
    assert len(col.scrapes) <= 2 + 2 * KEEP_SPACING and len(col.scrapes) < 6
    first, last = (list(e.series("litellm_spend_metric_total")) for e in (exps[0], exps[-1]))
    assert len(first) > 40_000 and first == last
    assert all(a is b for a, b in zip(first, last, strict=True))  # one tuple per series


def test_a_window_that_starts_at_the_runs_start_leaves_the_stops_failures_out() -> None:
    """After a planned stop and a resume, the gateway's figures count from the new run's
    start (``since``): the calls that failed while the pod was stopped on purpose are
    the stop's (a resumed pod showed ``gw err 88 %`` for the window's 5 minutes)."""
    def bump(text: str, name: str, by: float) -> str:
        return re.sub(rf'^({name}\{{[^}}]*\}}) (\S+)$',
                      lambda m: f"{m.group(1)} {float(m.group(2)) + by}", text, flags=re.M)

    t0 = 1_000_000.0
    stopped = bump(bump(CAPTURE, GW_FAILURES, 40), GW_REQUESTS, 40)
    served = bump(stopped, GW_REQUESTS, 20)
    reads = [(t0, CAPTURE), (t0 + 60, stopped), (t0 + 120, served)]
    whole = GatewayCollector("http://gw", GatewaySettings(), 300.0, 1.0)
    run = GatewayCollector("http://gw", GatewaySettings(), 300.0, 1.0)
    for t, text in reads:
        snap_whole = whole.read(parse(text, FAMILIES), t)
        snap_run = run.read(parse(text, FAMILIES), t, since=t0 + 60)
    # the premise: over the whole window the stop's failures are there
    assert snap_whole.window_s == 120
    assert snap_whole.total["failures"] == 40 * _count(CAPTURE, GW_FAILURES) > 0
    # from the run's start: 20 more calls, none failed, over the 60 s the run has had
    assert snap_run.window_s == 60
    assert snap_run.total["failures"] == 0.0
    assert snap_run.total["error_rate"] == 0.0
    # a run that began under a second ago has no window yet: rates wait, none is old
    fresh = GatewayCollector("http://gw", GatewaySettings(), 300.0, 1.0)
    fresh.read(parse(CAPTURE, FAMILIES), t0)
    assert fresh.read(parse(stopped, FAMILIES), t0 + 60, since=t0 + 59.5).window_s is None


def _count(text: str, name: str) -> int:
    """How many series of ``name`` a capture holds (each was bumped once)."""
    return sum(1 for line in text.splitlines() if line.startswith(name + "{"))


def test_through_prometheus_the_windows_far_end_is_the_runs_start() -> None:
    """``gateway.via: prometheus`` reads the far end at ``since`` when the run began
    inside the window, and asks for no far end at all in the run's first second."""
    asked: list[float | None] = []

    class Prom:
        async def query(self, expr: str, at: float | None = None) -> list[dict]:
            asked.append(at)
            return [{"metric": {"__name__": GW_REQUESTS, "model_id": "a"},
                     "value": [at, "1"]}]

    col = GatewayCollector("http://gw", GatewaySettings(via="prometheus"), 300.0, 1.0,
                           prom=Prom())  # type: ignore[arg-type]
    got, err = asyncio.run(col.via_prometheus(1000.0, since=900.0))
    assert err is None and got is not None and sorted(asked) == [900.0, 1000.0]
    assert got[1] is not None and got[1][0] == 900.0
    asked.clear()
    got, err = asyncio.run(col.via_prometheus(1000.0))
    assert sorted(asked) == [700.0, 1000.0]
    asked.clear()
    got, err = asyncio.run(col.via_prometheus(1000.0, since=999.5))
    assert asked == [1000.0] and got is not None and got[1] is None
