"""The benchmark against servers whose timing and counters the test sets: every figure is
the formula its docstring gives, acceptance equals the live figures' formula on the same
counter deltas, and a server that misbehaves costs failed requests, never a crash."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.operations.benchmark.measure import (
    BenchPlan,
    PodFacts,
    RequestResult,
    RunResult,
    run_bench,
)
from console.operations.benchmark.record import (
    P2P_HINT,
    build_record,
    compare,
    lines,
    load_history,
    save,
)
from console.operations.benchmark.runner import BenchError, baseline_of, bench_and_record, plans_for
from console.sources.collect.exposition import parse
from console.sources.collect.figures import compute
from console.sources.collect.http import HttpClient
from tests.support.waits import until_true

MODEL = "m"


class Server:
    """An OpenAI-compatible streaming server with one model and a vLLM ``/metrics``."""

    ttft_s = 0.15
    step_s = 0.02
    tokens = 5
    status = 200
    usage = True
    done = True
    hang_s = 0.0
    metrics_status = 200
    error_event: dict | None = None
    """Sent after the first token, then the stream ends (LiteLLM's way of failing one)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.served = 0
        self.bodies: list[dict] = []

    def exposition(self) -> str:
        n = self.served  # each answer: 10 drafts of 3 tokens, 18 accepted (8, 6, 4 by pos)
        m = f'engine="0",model_name="{MODEL}"'
        return "\n".join([
            "# TYPE vllm:spec_decode_num_drafts counter",
            f"vllm:spec_decode_num_drafts_total{{{m}}} {10 * n}",
            "# TYPE vllm:spec_decode_num_draft_tokens counter",
            f"vllm:spec_decode_num_draft_tokens_total{{{m}}} {30 * n}",
            "# TYPE vllm:spec_decode_num_accepted_tokens counter",
            f"vllm:spec_decode_num_accepted_tokens_total{{{m}}} {18 * n}",
            "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter",
            *(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{m},position="{i}"}} '
              f"{v * n}" for i, v in enumerate((8, 6, 4))),
            "# TYPE vllm:request_success counter",
            f'vllm:request_success_total{{engine="0",finished_reason="length",'
            f'model_name="{MODEL}"}} {n}', ""])


def _start(s: Server) -> http.server.ThreadingHTTPServer:
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/version":
                body = b'{"version": "0.32.0"}'
            elif self.path == "/metrics":
                if s.metrics_status != 200:
                    self.send_response(s.metrics_status)
                    self.end_headers()
                    return
                body = s.exposition().encode()
            else:
                body = b"{}"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            s.bodies.append(req)
            if s.status != 200:
                body = b'{"error": {"message": "upstream down"}}'
                self.send_response(s.status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            time.sleep(s.hang_s)
            # HTTP/1.0: the body runs to the connection's end, written as it is decoded
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()

            def ev(obj: dict) -> None:
                self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
                self.wfile.flush()

            time.sleep(s.ttft_s)
            ev({"choices": [{"delta": {"role": "assistant", "content": ""}}]})
            if s.error_event is not None:
                ev({"choices": [{"delta": {"content": "w0 "}}]})
                with s.lock:
                    s.served += 1  # the slot finished it; the gateway cut it off
                ev({"error": s.error_event})
                return
            for i in range(s.tokens):
                if i:
                    time.sleep(s.step_s)
                ev({"choices": [{"delta": {"content": f"w{i} "}}]})
            with s.lock:
                s.served += 1
            if s.usage:
                ev({"choices": [], "usage": {"prompt_tokens": 21,
                                             "completion_tokens": s.tokens}})
            if s.done:
                self.wfile.write(b"data: [DONE]\n\n")

        def log_message(self, *a) -> None:
            """Quiet."""

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    srv.handle_error = lambda *a: None  # type: ignore[method-assign]  # a client gone
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture
def server() -> Iterator[tuple[Server, str]]:
    s = Server()
    srv = _start(s)
    yield s, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def _plan(url: str, **kw) -> BenchPlan:
    base = {"profile": "p", "slot": "S", "served_model_name": MODEL, "url": url,
            "slot_url": url, "via": "direct", "runs": 2, "warmup": 1,
            "concurrency": (1, 2), "lengths": ("short",), "long_tokens": 200,
            "max_tokens": 16, "task_max_tokens": 8, "tasks": ("json", "ko_qa"),
            "timeout_s": 10.0}
    base.update(kw)
    return BenchPlan(**base)


async def _bench(plan: BenchPlan, progress=None):
    client = HttpClient()
    try:
        return await run_bench(plan, client, progress)
    finally:
        await client.aclose()


async def test_every_figure_follows_its_formula(server) -> None:
    s, url = server
    steps: list[tuple[str, float | None, str]] = []
    res = await _bench(_plan(url), lambda *a: steps.append(a))
    assert res.vllm_version == "0.32.0" and res.failed_requests == 0
    assert [c.name for c in res.configs] == ["short-c1", "short-c2"]
    # progress: one step per run and per task prompt, the last one at 100 %
    assert len(steps) == res.plan.steps == 2 * 3 + 4 and steps[-1][1] == pytest.approx(1.0)
    assert res.plan.requests == (1 + 2) * 3 + 4 == len(s.bodies)
    body = s.bodies[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 16 and "temperature" not in body  # the server's sampling
    c1 = res.configs[0]
    for run in c1.runs:
        [r] = run.requests
        assert r.tokens_from == "usage" and r.completion_tokens == 5 and r.prompt_tokens == 21
        # the server waits ttft_s, then 4 gaps of step_s between 5 content chunks
        assert 0.149 <= r.ttft_s < 0.15 + 0.5  # the same slack as below
        assert r.tpot_s == pytest.approx((r.last - r.first) / 4)
        # the server sleeps 20 ms between tokens; the client's stamps of their arrival
        # may sit a few µs closer than the sleeps (seen: 19.992 ms): 1 ms of slack below
        assert 0.019 <= r.tpot_s < 0.02 + 0.1
        assert r.tok_s == pytest.approx(5 / (r.end - r.start))
        assert r.decode_tok_s == pytest.approx(1 / r.tpot_s)
        assert run.tok_s == pytest.approx(r.tok_s)  # one request: the run is that request
    c2 = res.configs[1]
    for run in c2.runs:
        a, b = run.requests
        wall = max(a.end, b.end) - min(a.start, b.start)
        assert run.tok_s == pytest.approx(10 / wall)
        assert run.tok_s_per_request == pytest.approx((a.tok_s + b.tok_s) / 2)
        span = max(a.last, b.last) - min(a.first, b.first)
        assert run.decode_tok_s == pytest.approx(8 / span)
        assert run.ttft_s == pytest.approx((a.ttft_s + b.ttft_s) / 2)
    st = c1.stats("tok_s")
    vals = [run.tok_s for run in c1.runs]
    assert st.n == 2 and st.mean == pytest.approx(sum(vals) / 2)
    assert st.lo == min(vals) and st.hi == max(vals) and st.stdev >= 0


async def test_acceptance_is_the_live_formula_on_the_window_counters(server) -> None:
    s, url = server
    res = await _bench(_plan(url))
    for window, answers in ((res.configs[0].window, 2), (res.configs[1].window, 4),
                            (res.tasks[0].window, 2)):
        sp = window.spec
        assert sp is not None, window.note
        # the counters the record keeps, and the deltas they give
        d_drafts = sp.after["drafts"] - sp.before["drafts"]
        d_tokens = sp.after["draft_tokens"] - sp.before["draft_tokens"]
        d_acc = sp.after["accepted_tokens"] - sp.before["accepted_tokens"]
        assert (d_drafts, d_tokens, d_acc) == (10 * answers, 30 * answers, 18 * answers)
        assert sp.acceptance_rate == pytest.approx(d_acc / d_tokens) == pytest.approx(0.6)
        assert sp.mean_acceptance_length == pytest.approx(1 + d_acc / d_drafts) == \
            pytest.approx(2.8)
        assert sp.per_position == pytest.approx((0.8, 0.6, 0.4))
        assert sp.foreign_requests == 0
    # the same numbers as the live figures on two scrapes of the same counters
    s.served = 7
    before = parse(s.exposition())
    s.served = 9
    # (the formula alone: 60 draft tokens are under the live view's least sample)
    live = compute(parse(s.exposition()), before, 10.0, only=MODEL,
                   least=False)[MODEL].spec_decode
    assert live.acceptance_rate == res.configs[0].window.spec.acceptance_rate
    assert live.mean_acceptance_length == res.configs[0].window.spec.mean_acceptance_length


async def test_other_traffic_in_the_window_is_counted_and_said(server) -> None:
    s, url = server
    client = HttpClient()
    try:
        from console.operations.benchmark.measure import Bench

        bench = Bench(_plan(url), client)
        before, _ = await bench.scrape()
        s.served += 3  # three requests from someone else
        await bench.request("hi", 4)
        after, _ = await bench.scrape()
    finally:
        await client.aclose()
    w = bench.window(before, after, 1.0, 1, "")
    assert w.spec is not None and w.spec.foreign_requests == 3


async def test_a_gateway_that_500s_fails_every_request_and_says_why(server) -> None:
    s, url = server
    s.status = 500
    res = await _bench(_plan(url, give_up_after=0))
    assert res.failed_requests == res.plan.requests
    assert res.errors() == [f"{res.plan.requests}× HTTP 500 "
                            '{"error": {"message": "upstream down"}}']
    assert all(c.stats("tok_s").n == 0 for c in res.configs)
    rec = build_record(res, PodFacts())
    rec["comparison"] = compare(rec, [], None, 10)
    text = "\n".join(lines(rec))
    assert "FAILED requests: 13× HTTP 500" in text


async def test_a_gateway_that_never_answers_stops_the_bench_early_and_says_why(server
                                                                              ) -> None:
    s, url = server
    s.status = 500
    res = await _bench(_plan(url, give_up_after=3))
    assert res.failed_requests == 3 < res.plan.requests
    assert res.stopped is not None and res.stopped.startswith(
        "stopped after 3 failed requests in a row (last: HTTP 500")
    rec = build_record(res, PodFacts())
    rec["comparison"] = compare(rec, [], None, 10)
    assert any(ln.startswith("  STOPPED EARLY: stopped after 3 failed requests")
               for ln in lines(rec))
    # a failure in between resets the count: the run goes on
    s.status = 200
    res = await _bench(_plan(url, give_up_after=3))
    assert res.stopped is None and res.failed_requests == 0


async def test_the_gateways_error_event_is_shown_verbatim_and_not_foreign(server) -> None:
    s, url = server
    s.error_event = {"message": "The model is repeating the same chunk = w0 .",
                     "type": "litellm.InternalServerError", "code": "500"}
    res = await _bench(_plan(url, runs=1, warmup=0, concurrency=(1,), tasks=(),
                             give_up_after=0))
    assert res.errors() == ["1× the server's error event: litellm.InternalServerError: "
                            "The model is repeating the same chunk = w0 ."]
    # the slot finished the request the gateway cut off: it is the bench's own
    spec = res.configs[0].window.spec
    assert spec is not None and spec.foreign_requests == 0


async def test_a_hang_is_a_failed_request_within_its_timeout(server) -> None:
    s, url = server
    s.hang_s = 3.0
    t0 = time.monotonic()
    res = await _bench(_plan(url, timeout_s=0.5, runs=1, warmup=0, concurrency=(1,),
                             tasks=()))
    assert time.monotonic() - t0 < 2.5
    assert res.errors() == ["1× timed out"]


async def test_a_stream_without_done_or_usage(server) -> None:
    s, url = server
    s.done = False
    res = await _bench(_plan(url, runs=1, warmup=0, concurrency=(1,), tasks=()))
    assert res.errors() == ["1× the stream never said [DONE]"]
    s.done, s.usage = True, False
    res = await _bench(_plan(url, runs=1, warmup=0, concurrency=(1,), tasks=()))
    [r] = res.configs[0].runs[0].requests
    assert r.ok and r.tokens_from == "chunks" and r.completion_tokens == 5


async def test_unreadable_counters_leave_timings_and_say_so(server) -> None:
    s, url = server
    s.metrics_status = 503
    res = await _bench(_plan(url, tasks=()))
    assert res.failed_requests == 0
    c = res.configs[0]
    assert c.window.spec is None and c.window.note == \
        "counters unreadable (/metrics: HTTP 503)"
    assert c.stats("tok_s").n == 2


async def test_cancelled_keeps_nothing(server, tmp_path: Path) -> None:
    s, url = server
    s.ttft_s = 1.0
    client = HttpClient()
    task = asyncio.ensure_future(bench_and_record(
        _plan(url), client, PodFacts(), tmp_path, {}, 10.0))
    # cancelled mid-run: once a request is at the server (its first token 1 s away),
    # however long getting there takes on a loaded machine
    await until_true(lambda: bool(s.bodies), "a request reached the server")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await client.aclose()
    assert not (tmp_path / "bench").exists() or not list((tmp_path / "bench").iterdir())


# -- records ------------------------------------------------------------------------------

def _req(start: float, first: float, last: float, end: float, n: int) -> RequestResult:
    return RequestResult(True, None, 21, n, "usage", start, first, last, end)


def _record(tok_s: float, ttft_s: float, ts: float, gpu: str = "H200", p2p: str = "ok",
            **knobs) -> dict:
    from console.operations.benchmark.measure import BenchResult, ConfigResult, Window

    # one run of one request whose tok/s and TTFT are the ones asked for
    e2e = 100 / tok_s
    run = RunResult(1, (_req(0.0, ttft_s, e2e * 0.99, e2e, 100),))
    cfg = ConfigResult("short", 1, (run,), (), Window(None, 1.0, "n/a"))
    plan = _plan("http://x", **knobs)
    res = BenchResult(plan, ts, 5.0, "0.32.0", (cfg,), ())
    return build_record(res, PodFacts("pod-1", gpu, 2, p2p))


def test_a_drop_against_the_previous_run_is_flagged_with_the_p2p_hint() -> None:
    prev = _record(150.0, 0.8, 1000.0)
    cur = _record(120.0, 0.8, 2000.0)
    comp = compare(cur, [prev], None, 10.0)
    assert comp["previous"]["comparable"] is True
    assert comp["previous"]["configs"]["short-c1"]["tok_s_pct"] == pytest.approx(-20.0)
    [reg] = comp["regressions"]
    assert reg.startswith("short-c1: tok/s 120.0 is 20 % below the previous run")
    assert reg.endswith(P2P_HINT)
    # a 5 % drop is noise at 10 %
    assert compare(_record(142.5, 0.8, 2000.0), [prev], None, 10.0)["regressions"] == []
    # TTFT up 25 %
    [reg] = compare(_record(150.0, 1.0, 2000.0), [prev], None, 10.0)["regressions"]
    assert reg.startswith("short-c1: TTFT 1000 ms is 25 % above the previous run")


def test_p2p_disabled_says_so_instead() -> None:
    prev = _record(150.0, 0.8, 1000.0)
    cur = _record(125.0, 0.8, 2000.0, p2p="disabled")
    [reg] = compare(cur, [prev], None, 10.0)["regressions"]
    assert "P2P is disabled on this pod (NCCL_P2P_DISABLE=1)" in reg


def test_other_gpus_or_settings_are_not_compared() -> None:
    prev = _record(150.0, 0.8, 1000.0, gpu="A100")
    comp = compare(_record(100.0, 0.8, 2000.0), [prev], None, 10.0)
    assert comp["previous"]["comparable"] is False
    assert comp["previous"]["why_not"] == "different GPU type (A100 → H200)"
    assert comp["regressions"] == []
    prev = _record(150.0, 0.8, 1000.0, max_tokens=1024)
    comp = compare(_record(100.0, 0.8, 2000.0), [prev], None, 10.0)
    assert comp["previous"]["why_not"] == "different benchmark settings"
    text = "\n".join(lines({**_record(100.0, 0.8, 2000.0), "comparison": comp}))
    assert "not compared: different benchmark settings" in text


def test_the_last_comparable_run_is_compared_not_merely_the_last() -> None:
    full = _record(150.0, 0.8, 1000.0)
    quick = _record(90.0, 0.8, 1500.0, runs=1)  # a quick run in between
    failed = _record(150.0, 0.8, 1700.0)
    for c in failed["configs"]:
        for m in c["summary"].values():
            m["mean"] = None  # every request failed: it measured nothing
    comp = compare(_record(120.0, 0.8, 2000.0), [full, quick, failed], None, 10.0)
    assert comp["previous"]["comparable"] is True
    assert comp["previous"]["started_at"] == full["started_at"]
    assert comp["previous"]["configs"]["short-c1"]["tok_s_pct"] == pytest.approx(-20.0)
    assert len(comp["regressions"]) == 1
    # only a quick run before it: named, not compared, and no delta in the table
    cur = _record(120.0, 0.8, 2000.0)
    comp = compare(cur, [quick], None, 10.0)
    assert comp["previous"]["comparable"] is False and comp["previous"]["configs"] == {}
    text = lines({**cur, "comparison": comp})
    header = next(ln for ln in text if "vs prev" in ln)
    row = next(ln for ln in text if ln.strip().startswith("short-c1"))
    col = header.index("vs prev")
    assert row[col:col + 7].strip() in ("–", "-", "")
    assert any("not compared: different benchmark settings" in ln for ln in text)


def test_the_profile_baseline_is_compared_and_flagged() -> None:
    rec = _record(120.0, 0.9, 2000.0)
    comp = compare(rec, [], {"short-c1": {"tok_s": 151.0, "ttft_s": 0.805}}, 10.0)
    assert comp["baseline"]["configs"]["short-c1"]["tok_s_pct"] == pytest.approx(-20.5)
    assert [r.split(" — ")[0] for r in comp["regressions"]] == [
        "short-c1: tok/s 120.0 is 21 % below the baseline (151.0)",
        "short-c1: TTFT 900 ms is 12 % above the baseline (805 ms)"]


def test_baseline_comes_from_the_profile_in_seconds(tmp_path: Path) -> None:
    from pod_agent.profiles import load_profile

    p = tmp_path / "10-p.yaml"
    p.write_text("""
gpu_type_ids: [NVIDIA H200]
image: vllm/vllm-openai:v0.32.0
slots:
  MAIN:
    served_model_name: main
    hf_repo_id: org/model
    port: 8000
    gpus: [0]
    gpu_util: 0.8
    max_model_len: 8192
    bench_baseline:
      short-c1: {tok_s: 151, ttft_ms: 805}
      long-c4: {tok_s: 399}
""")
    prof = load_profile(p)
    assert baseline_of(prof, "MAIN") == {"short-c1": {"tok_s": 151.0, "ttft_s": 0.805},
                                         "long-c4": {"tok_s": 399.0, "ttft_s": None}}
    assert baseline_of(prof, "OTHER") == {}


def test_history_keeps_order_and_leaves_unreadable_files(tmp_path: Path) -> None:
    a = save(tmp_path, _record(150.0, 0.8, 2000.0))
    b = save(tmp_path, _record(140.0, 0.8, 1000.0))
    bad = tmp_path / "bench" / "20260101T000000Z-p-S.json"
    bad.write_text("{half a rec")
    recs, unreadable = load_history(tmp_path, "p", "S")
    assert [r["started_ts"] for r in recs] == [1000.0, 2000.0]
    assert len(unreadable) == 1 and str(bad) in unreadable[0] and bad.exists()
    assert {a.name, b.name} <= {p.name for p in (tmp_path / "bench").iterdir()}
    assert not list((tmp_path / "bench").glob("*.tmp"))


def test_plans_name_the_path_and_refuse_unknowns() -> None:
    from types import SimpleNamespace

    from pydantic import SecretStr

    from console.config.settings import BenchSettings
    from console.sources.collect.targets import SlotTarget

    targets = [SlotTarget("A", "a", 8000, "http://pod:8000"),
               SlotTarget("B", "b", 8001, "http://pod:8001")]
    settings = SimpleNamespace(bench=BenchSettings(), gateway_url="http://gw:4000/",
                               gateway_key=SecretStr("sk-gw"), vllm_api_key=SecretStr("sk-v"))
    plans = plans_for("prof", None, targets, settings)
    assert [(p.slot, p.url, p.slot_url, p.api_key, p.slot_key, p.via) for p in plans] == [
        ("A", "http://gw:4000", "http://pod:8000", "sk-gw", "sk-v", "gateway http://gw:4000"),
        ("B", "http://gw:4000", "http://pod:8001", "sk-gw", "sk-v", "gateway http://gw:4000")]
    assert plans[0].max_tokens == 1024 and plans[0].concurrency == (1, 4)
    assert plans[0].requests == 2 * 5 * 4 + 14
    [p] = plans_for("prof", None, targets, SimpleNamespace(
        bench=BenchSettings(), gateway_url=None, gateway_key=None, vllm_api_key=None),
        ["B"], runs=1, tasks=[], max_tokens=None)
    assert (p.url, p.via, p.runs, p.tasks, p.max_tokens) == ("http://pod:8001", "direct", 1,
                                                              (), 1024)
    with pytest.raises(BenchError, match="no slot C in profile prof"):
        plans_for("prof", None, targets, settings, ["C"])
    with pytest.raises(BenchError, match="unknown task type poetry"):
        plans_for("prof", None, targets, settings, tasks=["poetry"])


def test_read_only_refuses_the_benchmark_at_the_sender(tmp_path: Path) -> None:
    from console.operations.audit import AuditLog
    from console.operations.ops import build_registry

    ran: list[str] = []

    async def bench(slot, progress):
        ran.append(slot)
        raise AssertionError("must not run")

    reg = build_registry(AuditLog(tmp_path / "audit.jsonl"), True, agent=None,  # type: ignore[arg-type]
                         refresh=lambda: None, bench=bench)
    out = asyncio.run(reg.invoke("bench", {"slot": "A"}))
    assert out.state == "refused" and "read-only" in out.message and ran == []
    [rec] = AuditLog(tmp_path / "audit.jsonl").records()
    assert (rec["action"], rec["result"]) == ("bench", "refused")


def test_the_settings_name_every_task_set_in_order() -> None:
    from console.config.settings import BenchSettings
    from console.operations.benchmark.prompts import TASKS

    assert BenchSettings().tasks == list(TASKS)
    assert all(len(p) == 2 for p in TASKS.values())


async def test_a_record_that_cannot_be_written_is_shown_not_lost(server, tmp_path: Path
                                                                  ) -> None:
    from console.operations.audit import AuditLog
    from console.operations.benchmark.runner import RecordNotKept
    from console.operations.ops import build_registry

    _, url = server
    (tmp_path / "bench").write_text("a file where the records' directory goes")
    client = HttpClient()
    try:
        with pytest.raises(RecordNotKept) as e:
            await bench_and_record(_plan(url, runs=1, warmup=0, concurrency=(1,), tasks=()),
                                   client, PodFacts(), tmp_path, {}, 10.0)
    finally:
        await client.aclose()
    assert str(e.value).startswith("the record could not be written: ")
    assert e.value.record["configs"][0]["summary"]["tok_s"]["mean"] > 0

    async def bench(slot, progress):
        raise e.value

    shown: list[str] = []
    reg = build_registry(AuditLog(tmp_path / "audit.jsonl"), False, agent=None,  # type: ignore[arg-type]
                         refresh=lambda: None, bench=bench)
    out = await reg.invoke("bench", {"slot": "S"}, lambda s, f, m: shown.append(m))
    assert out.state == "failed" and out.message.startswith("measured, but the record could")
    assert any("tok/s by configuration" in m for m in shown)  # the numbers, on screen
