"""Send the benchmark's requests, time them, and read the slot's counters around them.

The protocol is the field's: through the users' path (the gateway when one is configured),
streaming; short and long inputs at each concurrency; ``warmup`` unmeasured runs, then
``runs`` measured ones; then each task-type prompt set once, without warm-up.

What each number is (per request, from the client's clock):

* TTFT      first content (or reasoning) chunk − request sent
* TPOT      (last chunk − first chunk) / (completion tokens − 1)
* tok/s     completion tokens / (answer complete − request sent): what a user sees,
            prefill and the gateway's round trip included
* decode    (completion tokens − 1) / (last chunk − first chunk): decoding alone

Per run of ``c`` concurrent requests, ``tok_s`` is the run's total completion tokens over
its wall time (the throughput; for one request, that request's tok/s),
``tok_s_per_request`` the mean of the requests' own tok/s, ``decode_tok_s`` the tokens
after each first one over the span from the earliest first chunk to the latest last one,
and TTFT and TPOT the means over its requests.

Speculative acceptance comes from the slot's own ``/metrics``, scraped before the first
measured run of a configuration (after its warm-up) and after the last, through
:func:`console.sources.collect.figures.compute` — the very formulas of the live figures:
rate = Δaccepted / Δdraft tokens, mean acceptance length = 1 + Δaccepted / Δdrafts,
position ``i`` = Δaccepted at ``i`` / Δdrafts. Counters are the slot's, not the
request's: other traffic in the window is counted too, and the record says how much
(finished requests beyond the benchmark's own).

Token counts come from the server (``stream_options.include_usage``); a path that drops
``usage`` leaves the content chunks counted instead, and the record says so.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from msgspec import Struct, field
from msgspec.structs import asdict

from console.model.model_figures import SpecFigures
from console.operations.benchmark.prompts import TASKS, prompt_for
from console.sources.collect.exposition import Exposition, parse
from console.sources.collect.figures import compute
from console.sources.collect.http import HttpClient, HttpError
from console.sources.collect.slot import ALL_FAMILIES as FAMILIES

Progress = Callable[[str, float | None, str], None]
LENGTHS = ("short", "long")


class BenchPlan(Struct, frozen=True):
    profile: str
    slot: str
    served_model_name: str
    url: str
    """Where completions go: the gateway's base URL, or the slot's."""
    slot_url: str
    """The slot's own base URL: ``/metrics`` (the counters) and ``/version``."""
    via: str
    api_key: str | None = None
    """The key for ``url`` (the gateway's, or the slot's when direct)."""
    slot_key: str | None = None
    runs: int = 3
    warmup: int = 1
    concurrency: tuple[int, ...] = (1, 4)
    lengths: tuple[str, ...] = LENGTHS
    long_tokens: int = 3000
    max_tokens: int = 1024
    task_max_tokens: int = 768
    tasks: tuple[str, ...] = tuple(TASKS)
    timeout_s: float = 600.0
    """Each request gives up after this long (a hang is a failed request)."""
    temperature: float | None = None
    """None: the server's own sampling (the field's); 0: greedy, the same text each run."""
    give_up_after: int = 5
    """The benchmark stops after this many failed requests in a row, and says why: a
    gateway that never answers would otherwise cost every request its whole timeout
    (hours at the defaults)."""

    def knobs(self) -> dict[str, Any]:
        """What makes two records comparable (the same sizes, counts and path)."""
        return {"runs": self.runs, "warmup": self.warmup,
                "concurrency": list(self.concurrency), "lengths": list(self.lengths),
                "long_tokens": self.long_tokens, "max_tokens": self.max_tokens,
                "task_max_tokens": self.task_max_tokens, "tasks": list(self.tasks),
                "temperature": self.temperature, "via": self.via}

    @property
    def requests(self) -> int:
        per = len(self.lengths) * sum(self.concurrency) * (self.warmup + self.runs)
        return per + sum(len(TASKS[t]) for t in self.tasks)

    @property
    def steps(self) -> int:
        per = len(self.lengths) * len(self.concurrency) * (self.warmup + self.runs)
        return per + sum(len(TASKS[t]) for t in self.tasks)


class RequestResult(Struct, frozen=True):
    ok: bool
    error: str | None
    prompt_tokens: int | None
    completion_tokens: int
    tokens_from: str
    """``usage`` (the server's count) or ``chunks`` (the path dropped ``usage``)."""
    start: float
    first: float | None
    last: float | None
    end: float
    sent: bool = True
    """The request reached a server (False only when the connection was refused): the
    slot's counters may hold it, so it is the benchmark's own, never foreign."""

    @property
    def ttft_s(self) -> float | None:
        return None if self.first is None else self.first - self.start

    @property
    def tpot_s(self) -> float | None:
        n = self.completion_tokens
        if self.first is None or self.last is None or n < 2 or self.last <= self.first:
            return None
        return (self.last - self.first) / (n - 1)

    @property
    def tok_s(self) -> float | None:
        e2e = self.end - self.start
        return self.completion_tokens / e2e if self.ok and e2e > 0 else None

    @property
    def decode_tok_s(self) -> float | None:
        t = self.tpot_s
        return None if not t else 1.0 / t

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "error": self.error, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "tokens_from": self.tokens_from,
                "ttft_s": _r(self.ttft_s), "tpot_s": _r(self.tpot_s),
                "e2e_s": _r(self.end - self.start), "tok_s": _r(self.tok_s),
                "decode_tok_s": _r(self.decode_tok_s)}


def _r(x: float | None, nd: int = 6) -> float | None:
    return None if x is None else round(x, nd)


def _mean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.fmean(vals) if vals else None


class RunResult(Struct, frozen=True):
    concurrency: int
    requests: tuple[RequestResult, ...]

    @property
    def good(self) -> tuple[RequestResult, ...]:
        return tuple(r for r in self.requests if r.ok)

    @property
    def wall_s(self) -> float:
        if not self.requests:
            return 0.0
        return max(r.end for r in self.requests) - min(r.start for r in self.requests)

    @property
    def ttft_s(self) -> float | None:
        return _mean([r.ttft_s for r in self.good])

    @property
    def tpot_s(self) -> float | None:
        return _mean([r.tpot_s for r in self.good])

    @property
    def tok_s(self) -> float | None:
        good = self.good
        wall = self.wall_s
        return sum(r.completion_tokens for r in good) / wall if good and wall > 0 else None

    @property
    def tok_s_per_request(self) -> float | None:
        return _mean([r.tok_s for r in self.good])

    @property
    def decode_tok_s(self) -> float | None:
        good = [r for r in self.good if r.first is not None and r.last is not None]
        firsts = [r.first for r in good if r.first is not None]
        lasts = [r.last for r in good if r.last is not None]
        if not good:
            return None
        span = max(lasts) - min(firsts)
        tokens = sum(max(0, r.completion_tokens - 1) for r in good)
        return tokens / span if span > 0 and tokens else None

    def figures(self) -> dict[str, float | None]:
        return {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "tok_s": self.tok_s,
                "tok_s_per_request": self.tok_s_per_request,
                "decode_tok_s": self.decode_tok_s}

    def to_json(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "wall_s": _r(self.wall_s),
                **{k: _r(v) for k, v in self.figures().items()},
                "requests": [r.to_json() for r in self.requests]}


METRICS = ("ttft_s", "tpot_s", "tok_s", "tok_s_per_request", "decode_tok_s")


class Stats(Struct, frozen=True):
    mean: float | None
    stdev: float | None
    lo: float | None
    hi: float | None
    n: int

    @classmethod
    def of(cls, xs: list[float | None]) -> Stats:
        vals = [x for x in xs if x is not None]
        if not vals:
            return cls(None, None, None, None, 0)
        sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
        return cls(statistics.fmean(vals), sd, min(vals), max(vals), len(vals))

    def to_json(self) -> dict[str, Any]:
        return {"mean": _r(self.mean), "stdev": _r(self.stdev), "min": _r(self.lo),
                "max": _r(self.hi), "n": self.n}


class Spec(SpecFigures, frozen=True):
    """Speculative decoding over one window, from the slot's counter deltas: the live
    figures' own type, plus the counters they came from."""

    before: dict[str, float | None] = field(default_factory=dict)
    after: dict[str, float | None] = field(default_factory=dict)
    """The lifetime counters at each end (drafts, draft_tokens, accepted_tokens)."""
    foreign_requests: float | None = None
    """Requests the slot finished in the window beyond the benchmark's own."""

    def to_json(self) -> dict[str, Any]:
        return {"drafts": self.drafts, "draft_tokens": self.draft_tokens,
                "accepted_tokens": self.accepted_tokens,
                "acceptance_rate": _r(self.acceptance_rate),
                "mean_acceptance_length": _r(self.mean_acceptance_length),
                "per_position": [_r(p) for p in self.per_position],
                "counters_before": self.before, "counters_after": self.after,
                "foreign_requests": self.foreign_requests}


class Window(Struct, frozen=True):
    """One scrape-bounded window: its spec figures, or why there are none."""

    spec: Spec | None
    seconds: float
    note: str = ""
    """Why ``spec`` is None (no counters: no speculative decoding, or unreadable)."""


class ConfigResult(Struct, frozen=True):
    length: str
    concurrency: int
    runs: tuple[RunResult, ...]
    warmups: tuple[RunResult, ...]
    window: Window

    @property
    def name(self) -> str:
        return f"{self.length}-c{self.concurrency}"

    @property
    def prompt_tokens(self) -> int | None:
        toks = [r.prompt_tokens for run in self.runs for r in run.good
                if r.prompt_tokens is not None]
        return round(statistics.fmean(toks)) if toks else None

    def stats(self, metric: str) -> Stats:
        return Stats.of([run.figures()[metric] for run in self.runs])

    @property
    def failed(self) -> int:
        return sum(1 for run in (*self.warmups, *self.runs) for r in run.requests if not r.ok)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "length": self.length, "concurrency": self.concurrency,
                "prompt_tokens": self.prompt_tokens, "failed_requests": self.failed,
                "summary": {m: self.stats(m).to_json() for m in METRICS},
                "spec": self.window.spec.to_json() if self.window.spec else None,
                "spec_note": self.window.note, "window_s": _r(self.window.seconds, 3),
                "runs": [r.to_json() for r in self.runs],
                "warmup_runs": [r.to_json() for r in self.warmups]}


class TaskResult(Struct, frozen=True):
    task: str
    requests: tuple[RequestResult, ...]
    window: Window

    @property
    def failed(self) -> int:
        return sum(1 for r in self.requests if not r.ok)

    def to_json(self) -> dict[str, Any]:
        good = [r for r in self.requests if r.ok]
        return {"task": self.task, "requests": len(self.requests), "failed_requests":
                self.failed, "completion_tokens": sum(r.completion_tokens for r in good),
                "tok_s": _r(_mean([r.tok_s for r in good])),
                "ttft_s": _r(_mean([r.ttft_s for r in good])),
                "spec": self.window.spec.to_json() if self.window.spec else None,
                "spec_note": self.window.note, "window_s": _r(self.window.seconds, 3)}


class BenchResult(Struct, frozen=True):
    plan: BenchPlan
    started_at: float
    duration_s: float
    vllm_version: str | None
    configs: tuple[ConfigResult, ...]
    tasks: tuple[TaskResult, ...]
    notes: tuple[str, ...] = ()
    stopped: str | None = None
    """Why the benchmark stopped before its last step (None: it ran them all)."""

    @property
    def failed_requests(self) -> int:
        return sum(c.failed for c in self.configs) + sum(t.failed for t in self.tasks)

    def errors(self) -> list[str]:
        """The distinct failures, most frequent first (a dead gateway fails them all)."""
        seen: dict[str, int] = {}
        for c in self.configs:
            for run in (*c.warmups, *c.runs):
                for r in run.requests:
                    if r.error:
                        seen[r.error] = seen.get(r.error, 0) + 1
        for t in self.tasks:
            for r in t.requests:
                if r.error:
                    seen[r.error] = seen.get(r.error, 0) + 1
        return [f"{n}× {e}" for e, n in sorted(seen.items(), key=lambda kv: -kv[1])]


class _Stream:
    """Server-sent events of a streamed chat completion, fed as bytes arrive."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.buf = b""
        self.first: float | None = None
        self.last: float | None = None
        self.chunks = 0
        self.usage: dict[str, Any] | None = None
        self.done = False
        self.error: str | None = None
        """The server's own error event (LiteLLM ends a stream with ``data: {"error":
        {...}}``), verbatim: the reason the stream stopped is the server's, not ours."""

    def feed(self, data: bytes) -> None:
        now = self.clock()
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        for raw in lines:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                self.done = True
                continue
            try:
                ev = json.loads(payload)
            except ValueError:
                continue
            if not isinstance(ev, dict):
                continue
            if ev.get("error") is not None and self.error is None:
                self.error = _error_text(ev["error"])
            if isinstance(ev.get("usage"), dict):
                self.usage = ev["usage"]
            try:
                delta = ev["choices"][0].get("delta") or {}
            except (KeyError, IndexError, TypeError, AttributeError):
                continue
            # reasoning models stream their thinking first: it is output all the same
            text = "".join(str(delta.get(k) or "") for k in
                           ("content", "reasoning_content", "reasoning"))
            if text:
                self.chunks += 1
                if self.first is None:
                    self.first = now
                self.last = now


def _error_text(err: Any) -> str:
    """An error event's message as the server wrote it (its type and code when given)."""
    if isinstance(err, dict):
        msg = str(err.get("message") or err)
        kind = err.get("type") or err.get("code")
        return f"{kind}: {msg}" if kind and str(kind) not in msg else msg
    return str(err)


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) and x >= 0 else None


class Bench:
    def __init__(self, plan: BenchPlan, client: HttpClient,
                 progress: Progress | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.plan = plan
        self.client = client
        self.progress = progress or (lambda *a: None)
        self.clock = clock
        self.done = 0
        self.t0 = clock()
        self.headers = {"Authorization": f"Bearer {plan.api_key}"} if plan.api_key else {}
        self.slot_headers = ({"Authorization": f"Bearer {plan.slot_key}"}
                             if plan.slot_key else {})
        self.failed_in_a_row = 0
        self.stopped: str | None = None
        """Why the benchmark stopped early (None: it ran every step)."""

    def _count(self, res: RequestResult) -> RequestResult:
        self.failed_in_a_row = 0 if res.ok else self.failed_in_a_row + 1
        if self.stopped is None and self.failed_in_a_row >= self.plan.give_up_after > 0:
            self.stopped = (f"stopped after {self.failed_in_a_row} failed requests in a row "
                            f"(last: {res.error})")
        return res

    def _step(self, step: str, message: str) -> None:
        self.done += 1
        self.progress(step, self.done / max(1, self.plan.steps),
                      f"{message} ({self.clock() - self.t0:.0f} s)")

    async def request(self, prompt: str, max_tokens: int) -> RequestResult:
        body = {"model": self.plan.served_model_name, "max_tokens": max_tokens,
                "stream": True, "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": prompt}]}
        if self.plan.temperature is not None:
            body["temperature"] = self.plan.temperature
        stream = _Stream(self.clock)
        start = self.clock()

        def fail(why: str, sent: bool = True) -> RequestResult:
            return RequestResult(False, why, None, 0, "chunks", start, stream.first,
                                 stream.last, self.clock(), sent)

        try:
            r = await self.client.post_json(self.plan.url + "/v1/chat/completions", body,
                                            timeout=self.plan.timeout_s,
                                            headers=self.headers, on_data=stream.feed)
        except HttpError as exc:
            return fail(exc.describe()[:160], sent=exc.kind != "connect")
        end = self.clock()
        if r.status_code != 200:
            return fail(f"HTTP {r.status_code} {r.text[:100]}".rstrip())
        stream.feed(b"\n")  # a last line without its newline
        if stream.error is not None:
            return fail(f"the server's error event: {stream.error}"[:300])
        if stream.first is None:
            return fail("no content in the stream")
        if not stream.done:
            return fail("the stream never said [DONE]")
        usage = stream.usage or {}
        completion = _int(usage.get("completion_tokens"))
        return RequestResult(True, None, _int(usage.get("prompt_tokens")),
                             completion if completion is not None else stream.chunks,
                             "usage" if completion is not None else "chunks",
                             start, stream.first, stream.last, end)

    async def run(self, prompt: str, concurrency: int, max_tokens: int) -> RunResult:
        reqs = await asyncio.gather(*(self.request(prompt, max_tokens)
                                      for _ in range(concurrency)))
        for r in reqs:
            self._count(r)
        return RunResult(concurrency, tuple(reqs))

    async def scrape(self) -> tuple[Exposition | None, str]:
        try:
            r = await self.client.get(self.plan.slot_url + "/metrics",
                                      timeout=min(30.0, self.plan.timeout_s),
                                      headers=self.slot_headers)
        except HttpError as exc:
            return None, f"/metrics: {exc.describe()}"
        if r.status_code != 200:
            return None, f"/metrics: HTTP {r.status_code}"
        # off the event loop, and only what the figures read: a console runs this (key B)
        # while it keeps polling and painting
        return await asyncio.to_thread(parse, r.text, FAMILIES,
                                       self.plan.served_model_name), ""

    def window(self, before: Exposition | None, after: Exposition | None, seconds: float,
               finished: int, why: str) -> Window:
        if before is None or after is None:
            return Window(None, seconds, f"counters unreadable ({why})")
        model = self.plan.served_model_name
        # its own requests are the sample it asked for: no least sample (that is the
        # live view's guard against a probe's few tokens)
        delta = compute(after, before, seconds, only=model, least=False).get(model)
        if delta is None:
            return Window(None, seconds, f"no series of model_name {model!r} in /metrics")
        s = delta.spec_decode
        if s is None:
            return Window(None, seconds, "the slot exports no speculative-decoding "
                                         "counters (no speculative decoding)")

        def life(exp: Exposition) -> dict[str, float | None]:
            f = compute(exp, only=model)[model]
            return {"drafts": f.value("spec_drafts"), "draft_tokens":
                    f.value("spec_draft_tokens"), "accepted_tokens": f.value("spec_accepted")}

        seen = sum(delta.requests_by_reason.values()) if delta.requests_by_reason else None
        foreign = None if seen is None else max(0.0, seen - finished)
        own = asdict(s)
        return Window(Spec(**own, before=life(before), after=life(after),
                           foreign_requests=foreign), seconds)

    async def config(self, length: str, concurrency: int) -> ConfigResult:
        p = self.plan
        prompt = prompt_for(length, p.long_tokens)
        name = f"{length}-c{concurrency}"
        warm = []
        for i in range(p.warmup):
            if self.stopped is not None:
                break
            warm.append(await self.run(prompt, concurrency, p.max_tokens))
            self._step(name, f"warm-up {i + 1}/{p.warmup}")
        before, why = await self.scrape()
        t0 = self.clock()
        runs = []
        for i in range(p.runs):
            if self.stopped is not None:
                break
            run = await self.run(prompt, concurrency, p.max_tokens)
            runs.append(run)
            tok = run.tok_s
            self._step(name, f"run {i + 1}/{p.runs}: "
                             + (f"{tok:.1f} tok/s" if tok else f"{len(run.good)} answered"))
        after, why2 = await self.scrape()
        # every request sent in the window reached the slot's counters, the failed ones
        # too (a gateway that cut a stream off still had the slot finish or abort it)
        finished = sum(1 for r in runs for q in r.requests if q.sent)
        return ConfigResult(length, concurrency, tuple(runs), tuple(warm),
                            self.window(before, after, self.clock() - t0, finished,
                                        why or why2))

    async def task(self, task: str) -> TaskResult:
        before, why = await self.scrape()
        t0 = self.clock()
        reqs = []
        prompts = TASKS[task]
        for i, prompt in enumerate(prompts):
            if self.stopped is not None:
                break
            reqs.append(self._count(await self.request(prompt, self.plan.task_max_tokens)))
            self._step(f"task {task}", f"{i + 1}/{len(prompts)}")
        after, why2 = await self.scrape()
        finished = sum(1 for q in reqs if q.sent)
        return TaskResult(task, tuple(reqs),
                          self.window(before, after, self.clock() - t0, finished, why or why2))

    async def version(self) -> str | None:
        try:
            r = await self.client.get(self.plan.slot_url + "/version", timeout=10.0,
                                      headers=self.slot_headers)
            v = r.json().get("version") if r.status_code == 200 else None
        except (HttpError, ValueError, AttributeError):
            return None
        return str(v) if v else None


async def run_bench(plan: BenchPlan, client: HttpClient,
                    progress: Progress | None = None) -> BenchResult:
    """The whole protocol for one slot. Never raises for a server's behaviour: failed
    requests are counted and named in the result. Cancelling it cancels the requests in
    flight (the caller keeps nothing of a cancelled run)."""
    bench = Bench(plan, client, progress)
    wall, t0 = time.time(), time.monotonic()
    version = await bench.version()
    configs: list[ConfigResult] = []
    tasks: list[TaskResult] = []
    # each step checks ``bench.stopped``: what ran is kept, and the record says why the
    # rest did not
    for length in plan.lengths:
        for c in plan.concurrency:
            if bench.stopped is None:
                configs.append(await bench.config(length, c))
    for t in plan.tasks:
        if bench.stopped is None:
            tasks.append(await bench.task(t))
    return BenchResult(plan, wall, time.monotonic() - t0, version, tuple(configs),
                       tuple(tasks), stopped=bench.stopped)


class PodFacts(Struct, frozen=True):
    """What the record says about where it ran (from the provider and the agent), all
    of one reading of the pod."""

    pod_id: str | None = None
    gpu_type: str | None = None
    gpu_count: int | None = None
    p2p: str = "unknown"
    """``ok`` (P2P in use), ``disabled`` (NCCL_P2P_DISABLE=1 on this pod) or ``unknown``."""
    extra: dict[str, Any] = field(default_factory=dict)
    p2p_unknown: str | None = None
    """Why ``p2p`` is ``unknown`` (the record says it rather than a bare word)."""
    read_at: float | None = None
    """When the reading these facts come from was made (this machine's clock)."""

    @classmethod
    def from_pod(cls, pod: Any, unread: str = "the pod was not read") -> PodFacts:
        """The facts of one pod reading; ``unread``: why there is none (``pod`` None)."""
        if pod is None:
            return cls(p2p_unknown=unread)
        flag = getattr(pod, "p2p_disabled", None)
        p2p = "disabled" if flag is True else "ok" if flag is False else "unknown"
        why = None
        if p2p == "unknown":
            err = getattr(pod, "agent_error", None)
            why = (f"the agent did not answer: {err}" if err else
                   "the agent did not say (none reached, or one that does not tell)")
        return cls(getattr(pod, "pod_id", None), getattr(pod, "gpu_name", None),
                   getattr(pod, "gpu_count", None), p2p, p2p_unknown=why,
                   read_at=getattr(pod, "fetched_at", None))
