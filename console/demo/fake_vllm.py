"""A simulated ``vllm serve`` for the demo: same argv, same log lines, same exposition.
Started as SGLang (``-m sglang.launch_server …``: ``console/demo/bin/sglang-python`` is
the agent's SGLang Python) it speaks SGLang 0.5.23's argv, log lines and exposition
(``Engine.sglang_exposition``), the same traffic behind it.

The pod agent launches it exactly as it launches vLLM (``console/demo/bin/vllm``
is on the agent's ``--vllm``). It prints vLLM's start-up milestones (so the
agent's progress parser sees them), refuses to start when gpu_util leaves no
room for one ``max_model_len`` request (like the field's 27B at 0.15), then
serves ``/health``, ``/v1/models``, ``/version``, ``/metrics`` and
``/v1/chat/completions`` over loopback, with traffic whose numbers follow the
field report: TTFT up to 0.8–1.1 s on long documents (one prefill model for the
simulated traffic and for real requests: ``Engine.first_token_s``), acceptance
52–71 %, per-position acceptance 78–82 % falling to 48–54 %, KV usage a few percent.

Environment (set by the demo deployment per slot):
  DEMO_KV        "TOKENS@UTIL/SLOPE": KV tokens at a gpu_util and tokens per 1.0 util
  DEMO_SEED      random seed;  DEMO_RATE  requests/s;  DEMO_STARTUP_S  start-up time
  DEMO_FAULTS    directory; a file ``kill-<served name>`` makes the engine die, a file
                 ``stall-<served name>`` makes it hang (``/health`` still 200, its requests
                 stay running, no token moves, completions wait; a restart ends it), a
                 file ``quiet`` stops the traffic (nobody uses the pod: the idle stop's case)
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import math
import os
import random
import sys
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from msgspec import Struct, field

from console.demo.http_serve import Reply, Request, Streamed, start

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
               7.5, 10.0, 20.0, 40.0, 80.0)
LAT_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
               60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
REASONS = ("stop", "length", "abort", "error", "repetition")
BLOCK = 16


def _num(x: float) -> str:
    if math.isinf(x):
        return "+Inf"
    return repr(float(x))


class Hist(Struct):
    bounds: tuple[float, ...]
    counts: list[float] = field(default_factory=list)
    total: float = 0.0
    n: float = 0.0

    def __post_init__(self) -> None:
        self.counts = [0.0] * (len(self.bounds) + 1)

    def observe(self, v: float) -> None:
        for i, b in enumerate(self.bounds):
            if v <= b:
                self.counts[i] += 1
                break
        else:
            self.counts[-1] += 1
        self.total += v
        self.n += 1


class Answer(Struct, frozen=True):
    ttft: float
    tpot: float
    """Seconds per decoding step (a step yields 1 + the accepted draft tokens)."""
    prompt_tokens: int
    steps: list[int]
    drafts: int
    accepted: int
    per_pos: list[float]


WORDS = ("the", "slot", "pod", "cache", "token", "draft", "model", "GPU", "answer", "is",
         "fast", "because", "each", "step", "accepts", "more", "of", "and", "{", "}", ":")


class Engine:
    """Counters and gauges of one simulated engine, advanced by a traffic model."""

    def __init__(self, name: str, kv_tokens: int, spec_tokens: int, seed: int,
                 rate: float, kind: str = "vllm") -> None:
        self.name = name
        self.kind = kind
        """Whose exposition it speaks: ``vllm`` or ``sglang``."""
        self.kv_tokens = kv_tokens
        self.spec_tokens = spec_tokens
        self.rng = random.Random(seed)
        self.rate = rate
        self.created = time.time()
        self.c: dict[str, float] = {k: 0.0 for k in (
            "prompt_tokens", "generation_tokens", "preemptions", "prefix_q", "prefix_h",
            "drafts", "draft_tokens", "accepted")}
        self.per_pos = [0.0] * spec_tokens
        self.reasons = dict.fromkeys(REASONS, 0.0)
        self.h = {"ttft": Hist(TTFT_BUCKETS), "itl": Hist(ITL_BUCKETS),
                  "tpot": Hist(ITL_BUCKETS), "e2e": Hist(LAT_BUCKETS),
                  "queue": Hist(LAT_BUCKETS), "prefill": Hist(LAT_BUCKETS),
                  "decode": Hist(LAT_BUCKETS), "inference": Hist(LAT_BUCKETS)}
        self.inflight: list[tuple[float, int]] = []  # (ends at, tokens held)
        self.startup: dict[str, float] = {}
        """SGLang's ``startup_time_seconds`` by phase (the start-up the fake went through)."""
        self.phase = self.rng.random() * 6.28

    def tick(self, now: float, dt: float) -> None:
        self.inflight = [(e, t) for e, t in self.inflight if e > now]
        arrivals = self._poisson(self.rate * dt)
        # long documents come in waves: acceptance is higher on them (the field: 70 % vs 52 %)
        longness = 0.5 + 0.5 * math.sin(now / 90.0 + self.phase)
        for _ in range(arrivals):
            long_doc = self.rng.random() < longness * 0.8
            prompt = int(self.rng.uniform(2500, 3500) if long_doc else self.rng.uniform(15, 60))
            out = int(self.rng.uniform(300, 1024))
            ttft = self.first_token_s(prompt, self.rng)
            if self.rng.random() < 0.001:
                # a prefill collision now and then: one in a window is not its p95
                ttft = self.rng.uniform(1.8, 2.4)
            queue = max(0.0, self.rng.gauss(0.02, 0.02))
            tpot = self.rng.uniform(0.0048, 0.0060)
            decode = tpot * out
            self.h["ttft"].observe(ttft)
            self.h["queue"].observe(queue)
            self.h["prefill"].observe(max(ttft - queue, 0.01))
            self.h["decode"].observe(decode)
            self.h["inference"].observe(ttft - queue + decode)
            self.h["e2e"].observe(ttft + decode)
            self.h["tpot"].observe(tpot)
            if self.spec_tokens:
                p0 = self.rng.uniform(0.80, 0.84) if long_doc else self.rng.uniform(0.76, 0.80)
                probs = [p0]
                for i in range(1, self.spec_tokens):
                    floor = 0.50 + (0.04 if long_doc else 0.0)
                    probs.append(p0 - (p0 - floor) * i / max(1, self.spec_tokens - 1))
                drafts = out / (1 + sum(probs))
                self.c["drafts"] += round(drafts)
                self.c["draft_tokens"] += round(drafts) * self.spec_tokens
                acc = 0.0
                for i, p in enumerate(probs):
                    got = round(drafts * p)
                    self.per_pos[i] += got
                    acc += got
                self.c["accepted"] += acc
                steps = max(1, round(drafts))
            else:
                steps = out
            for _ in range(min(steps, 40)):
                self.h["itl"].observe(decode / steps * self.rng.uniform(0.8, 1.2))
            self.c["prompt_tokens"] += prompt
            self.c["generation_tokens"] += out
            self.c["prefix_q"] += prompt
            self.c["prefix_h"] += int(prompt * self.rng.uniform(0.1, 0.5))
            self.reasons["stop" if self.rng.random() < 0.93 else "length"] += 1
            self.inflight.append((now + ttft + decode, prompt + out))

    def first_token_s(self, prompt_tokens: int, rng: random.Random) -> float:
        """How long this engine takes to a prompt's first token now: prefill grows with
        the prompt, and with the requests sharing the engine. The one model of it, for
        the simulated traffic (what ``/metrics`` counts) and for a real request (what a
        benchmark measures) alike, so the two agree. A healthy engine stays below the
        console's 2 s TTFT threshold: a 3,500-token document under the demo's load takes
        about 0.9 s (the field saw 0.8-1.1 s), a short question well under 0.1 s."""
        busy = 1 + 0.025 * min(len(self.inflight), 4)
        return (0.06 + prompt_tokens * 0.00022) * busy * rng.uniform(0.95, 1.05)

    def answer(self, prompt: str, max_tokens: int) -> Answer:
        """One chat completion as this engine would serve it: its timing, its text in
        decoding steps, and its mark on the counters (the benchmark reads them back).

        Acceptance follows what the field saw: formatted output (braces, quotes, code)
        is drafted well, free prose less, Korean prose least, and a long document to
        summarise raises it (the answer repeats the input)."""
        rng = random.Random(zlib.crc32(prompt.encode()) ^ max_tokens ^ len(self.inflight))
        prompt_tokens = max(1, round(len(prompt.encode()) / 4))
        long_doc = prompt_tokens > 1000
        formatted = sum(prompt.count(ch) for ch in '{}[]":=()_') / max(1, len(prompt))
        hangul = sum(1 for ch in prompt if "\uac00" <= ch <= "\ud7a3") / max(1, len(prompt))
        p0 = max(0.2, min(0.95, 0.76 + 5 * formatted + (0.10 if long_doc else 0.0)
                          - (0.25 if hangul > 0.2 else 0.0)))
        busy = 1 + 0.2 * len(self.inflight)  # decoding slows as requests share the engine
        ttft = self.first_token_s(prompt_tokens, rng)
        tpot = 0.0125 * busy * rng.uniform(0.95, 1.05)
        out = min(max_tokens, rng.randint(160, 320))
        steps: list[int] = []
        produced = 0
        drafts = accepted = 0
        per_pos = [0.0] * self.spec_tokens
        while produced < out:
            got = 1  # the target model's own token
            if self.spec_tokens:
                drafts += 1
                for i in range(self.spec_tokens):
                    p = p0 - 0.02 * i  # given the ones before it were accepted
                    if rng.random() >= p:
                        break
                    per_pos[i] += 1
                    got += 1
                accepted += got - 1
            got = min(got, out - produced)
            steps.append(got)
            produced += got
        return Answer(ttft, tpot, prompt_tokens, steps, drafts, accepted, per_pos)

    @contextlib.contextmanager
    def holding(self, a: Answer) -> Iterator[None]:
        """A real request in flight: running, its tokens held in the KV cache, until it
        ends, however it ends (a client that goes away mid-stream ends it too)."""
        held = (time.time() + 3600, a.prompt_tokens + sum(a.steps))
        self.inflight.append(held)
        try:
            yield
        finally:
            self.inflight.remove(held)

    def served(self, a: Answer, now: float) -> None:
        """Count a finished answer as vLLM does when the request ends."""
        out = sum(a.steps)
        self.c["prompt_tokens"] += a.prompt_tokens
        self.c["generation_tokens"] += out
        self.c["prefix_q"] += a.prompt_tokens
        self.c["drafts"] += a.drafts
        self.c["draft_tokens"] += a.drafts * self.spec_tokens
        self.c["accepted"] += a.accepted
        for i, v in enumerate(a.per_pos):
            self.per_pos[i] += v
        decode = a.tpot * len(a.steps)
        self.h["ttft"].observe(a.ttft)
        self.h["e2e"].observe(a.ttft + decode)
        self.h["decode"].observe(decode)
        self.h["prefill"].observe(a.ttft)
        self.h["inference"].observe(a.ttft + decode)
        self.h["queue"].observe(0.0)
        self.h["tpot"].observe(decode / max(1, out))
        self.reasons["length"] += 1

    def _poisson(self, lam: float) -> int:
        k, p, limit = 0, 1.0, math.exp(-lam)
        while True:
            p *= self.rng.random()
            if p <= limit:
                return k
            k += 1

    def exposition(self, util: float, block_size: int = BLOCK) -> str:
        if self.kind == "sglang":
            return self.sglang_exposition()
        m = f'engine="0",model_name="{self.name}"'
        out: list[str] = []

        def fam(name: str, kind: str, help_: str) -> None:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} {kind}")

        def counter(base: str, value: float, help_: str, extra: str = "") -> None:
            lab = f"{extra},{m}" if extra and extra < "engine" else (
                f"{m},{extra}" if extra else m)
            fam(f"{base}_total", "counter", help_)
            out.append(f"{base}_total{{{lab}}} {_num(value)}")
            fam(f"{base}_created", "gauge", help_)
            out.append(f"{base}_created{{{lab}}} {_num(self.created)}")

        def hist(base: str, h: Hist, help_: str) -> None:
            fam(base, "histogram", help_)
            cum = 0.0
            for b, c in zip((*h.bounds, math.inf), h.counts, strict=True):
                cum += c
                out.append(f'{base}_bucket{{engine="0",le="{_num(b)}",model_name="{self.name}"}}'
                           f" {_num(cum)}")
            out.append(f"{base}_count{{{m}}} {_num(h.n)}")
            out.append(f"{base}_sum{{{m}}} {_num(h.total)}")
            fam(f"{base}_created", "gauge", help_)
            out.append(f"{base}_created{{{m}}} {_num(self.created)}")

        running = len(self.inflight)
        held = sum(t for _, t in self.inflight)
        fam("vllm:num_requests_running", "gauge", "Number of requests in model execution "
                                                  "batches.")
        out.append(f"vllm:num_requests_running{{{m}}} {_num(running)}")
        fam("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.")
        out.append(f"vllm:num_requests_waiting{{{m}}} {_num(0)}")
        fam("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.")
        out.append(f"vllm:kv_cache_usage_perc{{{m}}} "
                   f"{_num(min(1.0, held / max(1, self.kv_tokens)))}")
        counter("vllm:prefix_cache_queries", self.c["prefix_q"], "Prefix cache queries.")
        counter("vllm:prefix_cache_hits", self.c["prefix_h"], "Prefix cache hits.")
        counter("vllm:num_preemptions", self.c["preemptions"], "Cumulative preemptions.")
        counter("vllm:prompt_tokens", self.c["prompt_tokens"], "Number of prefill tokens.")
        counter("vllm:generation_tokens", self.c["generation_tokens"],
                "Number of generation tokens.")
        fam("vllm:request_success_total", "counter", "Count of successfully processed requests.")
        for r in REASONS:
            out.append(f'vllm:request_success_total{{engine="0",finished_reason="{r}",'
                       f'model_name="{self.name}"}} {_num(self.reasons[r])}')
        hist("vllm:time_to_first_token_seconds", self.h["ttft"], "Time to first token.")
        hist("vllm:inter_token_latency_seconds", self.h["itl"], "Inter-token latency.")
        hist("vllm:request_time_per_output_token_seconds", self.h["tpot"], "TPOT per request.")
        hist("vllm:e2e_request_latency_seconds", self.h["e2e"], "End-to-end latency.")
        hist("vllm:request_queue_time_seconds", self.h["queue"], "Time in WAITING.")
        hist("vllm:request_inference_time_seconds", self.h["inference"], "Time in RUNNING.")
        hist("vllm:request_prefill_time_seconds", self.h["prefill"], "Prefill phase.")
        hist("vllm:request_decode_time_seconds", self.h["decode"], "Decode phase.")
        if self.spec_tokens:
            counter("vllm:spec_decode_num_drafts", self.c["drafts"], "Number of spec drafts.")
            counter("vllm:spec_decode_num_draft_tokens", self.c["draft_tokens"],
                    "Number of draft tokens.")
            counter("vllm:spec_decode_num_accepted_tokens", self.c["accepted"],
                    "Number of accepted tokens.")
            fam("vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter",
                "Accepted tokens per draft position.")
            for i, v in enumerate(self.per_pos):
                out.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{m},'
                           f'position="{i}"}} {_num(v)}')
        blocks = self.kv_tokens // block_size
        fam("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig")
        out.append(f'vllm:cache_config_info{{block_size="{block_size}",cache_dtype="auto",'
                   f'enable_prefix_caching="True",engine="0",gpu_memory_utilization="{util}",'
                   f'kv_cache_size_tokens="{blocks * block_size}",model_name="{self.name}",'
                   f'num_gpu_blocks="{blocks}"}} 1.0')
        return "\n".join(out) + "\n"


    def sglang_exposition(self) -> str:
        """The same engine as SGLang 0.5.23 exports it (``--enable-metrics``; names,
        help and labels of ``sglang/srt/observability/metrics_collector.py``, as
        ``tests/fixtures/sglang-0.5.23`` holds them): the rank-0 scheduler's gauges with
        its rank labels, the tokenizer's counters and histograms without, no
        ``_created`` series (prometheus_client's multiprocess mode)."""
        sched = (f'engine_type="unified",model_name="{self.name}",moe_ep_rank="0",'
                 f'pp_rank="0",tp_rank="0"')
        tok = f'engine_type="unified",model_name="{self.name}"'
        stream = f'engine_type="unified",is_streaming="true",model_name="{self.name}"'
        out: list[str] = []

        def fam(name: str, kind: str, help_: str) -> None:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} {kind}")

        def gauge(name: str, value: float, help_: str) -> None:
            fam(name, "gauge", help_)
            out.append(f"{name}{{{sched}}} {_num(value)}")

        def hist(base: str, h: Hist, help_: str, lab: str) -> None:
            fam(base, "histogram", help_)
            cum = 0.0
            for b, c in zip((*h.bounds, math.inf), h.counts, strict=True):
                cum += c
                le = "+Inf" if b == math.inf else _num(b)
                head, _, tail = lab.partition("model_name=")
                out.append(f'{base}_bucket{{{head}le="{le}",model_name={tail}}} {_num(cum)}')
            out.append(f"{base}_count{{{lab}}} {_num(h.n)}")
            out.append(f"{base}_sum{{{lab}}} {_num(h.total)}")

        running = len(self.inflight)
        held = sum(t for _, t in self.inflight)
        used = min(held, self.kv_tokens)
        gauge("sglang:num_running_reqs", running, "The number of running requests.")
        gauge("sglang:num_queue_reqs", 0, "The number of requests in the waiting queue.")
        gauge("sglang:token_usage", used / max(self.kv_tokens, 1), "The token usage.")
        gauge("sglang:num_used_tokens", used, "The number of used tokens.")
        gauge("sglang:kv_available_tokens", self.kv_tokens - used,
              "The number of available KV tokens.")
        gauge("sglang:kv_used_tokens", used, "The number of used KV tokens.")
        fam("sglang:num_retracted_requests_total", "counter",
            "Total number of retracted requests.")
        out.append(f"sglang:num_retracted_requests_total{{{sched}}} "
                   f"{_num(self.c['preemptions'])}")
        hist("sglang:queue_time_seconds", self.h["queue"],
             "Histogram of queueing time in seconds.", sched)
        fam("sglang:startup_time_seconds", "gauge",
            "Engine startup duration by phase in seconds.")
        for phase, v in self.startup.items():
            out.append(f'sglang:startup_time_seconds{{{tok},phase="{phase}"}} {_num(v)}')
        fam("sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.")
        out.append(f"sglang:prompt_tokens_total{{{stream}}} {_num(self.c['prompt_tokens'])}")
        fam("sglang:generation_tokens_total", "counter",
            "Number of generation tokens processed.")
        out.append(f"sglang:generation_tokens_total{{{stream}}} "
                   f"{_num(self.c['generation_tokens'])}")
        fam("sglang:spec_verify_calls_total", "counter",
            "Number of speculative decoding verification calls.")
        if self.spec_tokens:
            out.append(f"sglang:spec_verify_calls_total{{{tok}}} {_num(self.c['drafts'])}")
        fam("sglang:cached_tokens_total", "counter",
            "Number of cached prompt tokens.")
        out.append(f'sglang:cached_tokens_total{{cache_source="device",{tok}}} '
                   f"{_num(self.c['prefix_h'])}")
        fam("sglang:num_requests_total", "counter", "Number of requests processed.")
        out.append(f"sglang:num_requests_total{{{stream}}} {_num(sum(self.reasons.values()))}")
        hist("sglang:time_to_first_token_seconds", self.h["ttft"],
             "Histogram of time to first token in seconds.", stream)
        hist("sglang:inter_token_latency_seconds", self.h["itl"],
             "Histogram of inter-token latency in seconds.", tok)
        hist("sglang:e2e_request_latency_seconds", self.h["e2e"],
             "Histogram of End-to-end request latency in seconds", stream)
        return "\n".join(out) + "\n"


def kv_tokens_for(spec: str, util: float) -> int:
    """``TOKENS@UTIL/SLOPE`` → KV tokens at ``util`` (linear, like vLLM's budget)."""
    tokens, rest = spec.split("@", 1)
    at, slope = rest.split("/", 1)
    return int(float(tokens) + (util - float(at)) * float(slope))


def log(msg: str, level: str = "INFO") -> None:
    stamp = time.strftime("%m-%d %H:%M:%S")
    print(f"(APIServer pid={os.getpid()}) {level} {stamp} [demo] {msg}", flush=True)


async def serve(args: argparse.Namespace, engine: Engine) -> None:
    faults = Path(os.environ["DEMO_FAULTS"]) if os.environ.get("DEMO_FAULTS") else None
    hang = faults / f"stall-{args.served_model_name}" if faults else None
    if hang is not None:
        hang.unlink(missing_ok=True)  # a new engine: the hang was the old one's

    def hung() -> bool:
        return hang is not None and hang.exists()
    models = json.dumps({"object": "list", "data": [
        {"id": args.served_model_name, "object": "model",
         "owned_by": "sglang" if engine.kind == "sglang" else "vllm",
         "max_model_len": args.max_model_len}]}).encode()

    async def chat(payload: bytes) -> Reply | Streamed:
        """vLLM's answers: an unknown model is a 404 naming it; ``stream`` gives SSE
        chunks as the steps are decoded (with ``usage`` last when asked), ending in
        ``[DONE]``; else one ``chat.completion`` once the whole answer is decoded."""
        try:
            req = json.loads(payload or b"{}")
        except ValueError:
            req = {}
        if not isinstance(req, dict):
            req = {}
        model = req.get("model")
        if model != args.served_model_name:
            err = {"error": {"message": f"The model `{model}` does not exist.",
                             "type": "NotFoundError", "param": "model", "code": 404}}
            return Reply(404, json.dumps(err).encode())
        raw_msgs, raw_max = req.get("messages"), req.get("max_tokens")
        msgs = raw_msgs if isinstance(raw_msgs, list) else []
        prompt = " ".join(str(m.get("content", "")) for m in msgs if isinstance(m, dict))
        max_tokens = raw_max if isinstance(raw_max, int) else 16
        while hung():  # a hung engine answers nothing (the client's timeout ends it)
            await asyncio.sleep(0.5)
        a = engine.answer(prompt, max(1, max_tokens))
        rng = random.Random(len(prompt))
        words = [" ".join(rng.choice(WORDS) for _ in range(n)) + " " for n in a.steps]
        words[0] = "OK " + words[0]  # the smoke test's prompt asks for OK
        usage = {"prompt_tokens": a.prompt_tokens, "completion_tokens": sum(a.steps),
                 "total_tokens": a.prompt_tokens + sum(a.steps)}
        base = {"id": "chatcmpl-demo", "model": args.served_model_name, "created": 0}
        if not req.get("stream"):
            with engine.holding(a):
                await asyncio.sleep(a.ttft + a.tpot * len(a.steps))
            engine.served(a, time.time())
            return Reply(200, json.dumps({
                **base, "object": "chat.completion", "usage": usage,
                "choices": [{"index": 0, "finish_reason": "length",
                             "message": {"role": "assistant",
                                         "content": "".join(words)}}]}).encode())

        def event(obj: dict) -> bytes:
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        def chunk(delta: dict, finish: str | None = None) -> bytes:
            return event({**base, "object": "chat.completion.chunk", "choices": [
                {"index": 0, "delta": delta, "finish_reason": finish}]})

        async def events() -> AsyncIterator[bytes]:
            # the request is in flight from its arrival: a client gone mid-stream ends it
            # (the server closes this generator), and only a whole answer is counted served
            with engine.holding(a):
                await asyncio.sleep(a.ttft)
                yield chunk({"role": "assistant", "content": ""})
                for text in words:
                    yield chunk({"content": text})
                    await asyncio.sleep(a.tpot)
                yield chunk({}, "length")
                opts = req.get("stream_options")
                if isinstance(opts, dict) and opts.get("include_usage"):
                    yield event({**base, "object": "chat.completion.chunk", "choices": [],
                                 "usage": usage})
                yield b"data: [DONE]\n\n"
            engine.served(a, time.time())
        return Streamed(200, events(), "text/event-stream; charset=utf-8")

    async def handle(request: Request) -> Reply | Streamed:
        path = request.path
        if path == "/metrics":
            return Reply(200, engine.exposition(args.gpu_memory_utilization).encode(),
                         "text/plain; version=1.0.0; charset=utf-8")
        if path in ("/health", "/ping"):
            return Reply(200)
        if path == "/v1/models":
            return Reply(200, models)
        if path == "/version":
            version = "0.5.23" if engine.kind == "sglang" else "0.32.0"
            return Reply(200, json.dumps({"version": version}).encode())
        if path == "/v1/chat/completions":
            return await chat(request.body)
        return Reply(404, b'{"detail":"Not Found"}')

    # The simulated pod lives on this machine: listen on loopback whatever --host says.
    server = await start(handle, args.port)
    log(f"Starting vLLM API server on http://127.0.0.1:{args.port} (asked: {args.host})")
    print("INFO:     Application startup complete.", flush=True)
    last = time.time()
    async with server:
        while True:
            await asyncio.sleep(0.5)
            now = time.time()
            quiet = faults is not None and (faults / "quiet").exists()
            if not hung():  # hung: its requests stay in flight and no counter moves
                engine.tick(now, 0.0 if quiet else now - last)
            last = now
            if faults and (faults / f"kill-{args.served_model_name}").exists():
                (faults / f"kill-{args.served_model_name}").unlink()
                log("EngineCore encountered a fatal error (injected by the demo)", "ERROR")
                sys.exit(1)


def register_on_gpus(util: float) -> None:
    """Tell the NVML stand-in this engine holds ``util`` of its GPUs' memory (a file in
    the faults directory, removed when the engine exits), as a real vLLM would show up
    in ``nvmlDeviceGetComputeRunningProcesses``."""
    faults = os.environ.get("DEMO_FAULTS")
    if not faults:
        return
    gpus = [int(g) for g in os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")
            if g.strip().isdigit()]
    path = Path(faults) / f"nvml-proc-{os.getpid()}"
    # the pod it runs on: the demo's pods share this machine and its faults directory, and
    # a fallback's new pod must not list the old pod's engines on its GPUs
    path.write_text(json.dumps({"gpus": gpus, "fraction": util,
                                "pod": os.environ.get("RUNPOD_POD_ID")}))
    atexit.register(lambda: path.unlink(missing_ok=True))


def main_sglang(argv: list[str]) -> int:
    """``python3 -m sglang.launch_server …`` as the demo's SGLang: its flags, its start-up
    lines (what the agent's SGLang phases read), then the same server as vLLM's fake."""
    ap = argparse.ArgumentParser(prog="sglang.launch_server")
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--served-model-name", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=30000)
    ap.add_argument("--tp-size", type=int, default=1)
    ap.add_argument("--mem-fraction-static", type=float, default=0.88)
    ap.add_argument("--context-length", type=int, default=8192)
    ap.add_argument("--speculative-num-steps", type=int, default=0)
    ap.add_argument("--enable-metrics", action="store_true")
    args, _unknown = ap.parse_known_args(argv)
    args.max_model_len = args.context_length
    args.gpu_memory_utilization = args.mem_fraction_static
    startup = float(os.environ.get("DEMO_STARTUP_S", "6"))
    kv = kv_tokens_for(os.environ.get("DEMO_KV", "200000@0.5/1000000"),
                       args.mem_fraction_static)
    t0 = time.monotonic()
    log(f"server_args=ServerArgs(model_path={args.model_path!r}, tp_size={args.tp_size}, "
        f"mem_fraction_static={args.mem_fraction_static}) (simulated by pod-console demo)")
    time.sleep(startup * 0.15)
    log("Load weight begin. avail mem=79.10 GB")
    time.sleep(startup * 0.45)
    load = time.monotonic() - t0
    log("Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, mem usage=9.10 GB.")
    register_on_gpus(args.mem_fraction_static)
    t1 = time.monotonic()
    time.sleep(startup * 0.1)
    if kv < args.max_model_len:
        log(f"RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            f"({kv} KV tokens < context length {args.max_model_len})", "ERROR")
        return 1
    log(f"KV Cache is allocated. #tokens: {kv}")
    log("Memory pool end. avail mem=10.20 GB")
    kv_s = time.monotonic() - t1
    log("Capture cuda graph begin. This can take up to several minutes.")
    t2 = time.monotonic()
    time.sleep(startup * 0.3)
    log(f"Capture cuda graph end. Time elapsed: {time.monotonic() - t2:.2f} s.")
    engine = Engine(args.served_model_name, kv, args.speculative_num_steps,
                    int(os.environ.get("DEMO_SEED", "7")),
                    float(os.environ.get("DEMO_RATE", "0.5")), kind="sglang")
    total = time.monotonic() - t0
    engine.startup = {"load_weight": round(load, 3), "kv_cache_allocation": round(kv_s, 3),
                      "scheduler_e2e": round(total, 3), "tokenizer_e2e": round(total, 3)}
    log("The server is fired up and ready to roll!")
    try:
        asyncio.run(serve(args, engine))
    except KeyboardInterrupt:
        return 0
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:2] == ["-m", "sglang.launch_server"]:
        return main_sglang(argv[2:])
    ap = argparse.ArgumentParser(prog="vllm")
    ap.add_argument("cmd", choices=["serve"])
    ap.add_argument("model")
    ap.add_argument("--served-model-name", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--tensor-parallel-size", type=int, default=1)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.92)
    ap.add_argument("--max-model-len", type=int, default=8192)
    ap.add_argument("--speculative-config", default=None)
    ap.add_argument("--disable-custom-all-reduce", action="store_true")
    args, _unknown = ap.parse_known_args(argv)
    spec = json.loads(args.speculative_config) if args.speculative_config else None
    startup = float(os.environ.get("DEMO_STARTUP_S", "6"))
    kv = kv_tokens_for(os.environ.get("DEMO_KV", "200000@0.5/1000000"),
                       args.gpu_memory_utilization)
    log("vLLM API server version 0.32.0 (simulated by pod-console demo)")
    log(f"Initializing a V1 LLM engine with config: model={args.model!r}, "
        f"tensor_parallel_size={args.tensor_parallel_size}")
    time.sleep(startup * 0.15)
    log("Starting to load model ...")
    time.sleep(startup * 0.45)
    log(f"Loading weights took {startup * 0.45 * 47:.2f} seconds")
    register_on_gpus(args.gpu_memory_utilization)
    time.sleep(startup * 0.1)
    if kv < args.max_model_len:
        need = args.max_model_len * 18e-6
        log(f"ValueError: To serve at least one request with the model's max seq len "
            f"({args.max_model_len}), ({need:.2f} GiB KV cache is needed, which is larger than "
            f"the available KV cache memory ({max(kv, 0) * 18e-6:.2f} GiB). Try increasing "
            f"`gpu_memory_utilization` or decreasing `max_model_len`.", "ERROR")
        return 1
    log(f"GPU KV cache size: {kv:,} tokens")
    log(f"Maximum concurrency for {args.max_model_len:,} tokens per request: "
        f"{kv / args.max_model_len:.2f}x")
    log("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)")
    time.sleep(startup * 0.3)
    log("Graph capturing finished in 3 secs")
    engine = Engine(args.served_model_name, kv,
                    int(spec.get("num_speculative_tokens", 0)) if spec else 0,
                    int(os.environ.get("DEMO_SEED", "7")),
                    float(os.environ.get("DEMO_RATE", "0.5")))
    try:
        asyncio.run(serve(args, engine))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
