"""The stall detector against the real vLLM CPU server: its engine core frozen (SIGSTOP)
while requests run. The API server still answers ``/health`` with 200 — the failure the
field asks about — and the console's session, polling it as the console does (directly,
and through a real Prometheus scraping it), says STALLED within ``stall_after`` + one
refresh, then clears once the engine runs again (SIGCONT, always, in a ``finally``).

And its other half (issue 33: "a long prefill on the same server must not raise it"): a
second real server whose one long prompt takes about three times ``stall_after`` to
prefill, in chunks, while neither token counter moves; the sessions polling it through
both paths never say STALLED while they saw its KV usage (or a counter) move within
``stall_after`` — the premise measured during the run, as one chunk's length depends on
the machine's load — and the request then completes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from console.config import defaults
from console.config.settings import AlertTiming, Settings
from console.model.history import History
from console.model.stall import STALL_ALERT
from console.operations.audit import AuditLog
from console.operations.registry import OperationRegistry
from console.session.session import Session
from console.session.view import ConsoleContext, ConsoleState
from console.sources.collect.poller import DeploymentPoller
from console.sources.collect.targets import SlotTarget
from pod_agent.profiles import load_profile
from tests.support import prometheus_server, vllm_server
from tests.support.procs import cmdline, descendants
from tests.support.prometheus_server import PrometheusServer
from tests.support.vllm_server import VllmServer

pytestmark = [pytest.mark.vllm]

STALL_AFTER_S = 5.0
REFRESH_S = 2.0
DEFAULT_STALL_S = AlertTiming().stall_after_s
"""The frozen engine is judged at the settings' defaults (30 s, at the default 2 s
refresh): issue 42 asks STALLED within ``stall_after`` + one refresh there."""
SLACK_S = 1.5


def prom_settle_s(path: str) -> float:
    """How far back of now a Prometheus poll's one instant is (the scrape timeout, which
    Prometheus makes the 1 s scrape interval of tests/support/prometheus_server.py)."""
    return 1.0 if path == "prometheus" else 0.0
"""A poll's own time on a busy two-core machine (the detection poll starts on time, its
answers take a moment)."""


def engine_core(server_pid: int) -> int:
    """The engine core of the server this session started: the process below its pid
    whose title vLLM set to ``VLLM::EngineCore``."""
    tree = descendants(server_pid)
    cores = [p for p in tree if "EngineCore" in cmdline(p)]
    assert len(cores) == 1, {p: cmdline(p) for p in tree}
    return cores[0]


def _session(tmp: Path, srv, prometheus_url: str | None,
             stall_after_s: float = STALL_AFTER_S) -> Session:
    prof = tmp / "profiles"
    prof.mkdir()
    (prof / "10-tiny.yaml").write_text(f"""
gpu_type_ids: [cpu]
image: test
slots:
  TINY:
    served_model_name: {srv.name}
    hf_repo_id: local/tiny
    port: {srv.port}
    gpus: [0]
    gpu_util: 0.5
    max_model_len: {srv.max_model_len}
""")
    settings = Settings(profiles_dir=prof, state_dir=tmp / "state", refresh_s=REFRESH_S,
                        alerts=AlertTiming(down_for_s=0, for_s=0, hold_s=0,
                                           stall_after_s=stall_after_s))
    history = History(settings.history_s, settings.refresh_s)
    poller = DeploymentPoller("tiny", (SlotTarget("TINY", srv.name, srv.port, srv.url),),
                              prometheus_url=prometheus_url, window_s=60,
                              timeout_s=REFRESH_S * 0.8, history=history,
                              probe_interval_s=1e9)
    ctx = ConsoleContext(settings=settings, profile_name="tiny",
                         profile=load_profile(prof / "10-tiny.yaml"), poller=poller,
                         registry=OperationRegistry(AuditLog(tmp / "audit.jsonl")),
                         history=history)
    return Session(ctx)


async def _keep_busy(url: str, model: str, n: int = 4) -> None:
    """``n`` clients, each sending its next long completion as soon as one ends, until
    cancelled: the tiny model decodes thousands of tokens a second, so one batch would
    be over before a poll saw it running."""
    async with httpx.AsyncClient(timeout=600) as client:
        async def one(i: int) -> None:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    await client.post(url + "/v1/completions", json={
                        "model": model, "prompt": f"request {i}: count slowly",
                        "max_tokens": 1900, "temperature": 0, "ignore_eos": True})

        await asyncio.gather(*(one(i) for i in range(n)))


SEEN: list[str] = []
"""Each poll's reading of the slot, said when an assertion fails."""


def _reading(state) -> str:
    s = state.snapshot.slot("TINY") if state.snapshot else None
    if s is None:
        return f"{state.polled_at}: no slot ({state.stale})"
    f = s.figures
    vals = {k: f.value(k) for k in ("running", "generation_total", "prompt_total",
                                    "kv_cache_usage")} if f else None
    return (f"{state.polled_at:.1f}: {s.health} src={s.source} stale={s.stale_since} "
            f"err={s.error} {vals} stalled={sorted(state.stalled)} ({state.stale})")


async def _polls(session: Session, until, limit_s: float):
    """Poll at the refresh, as the console's timer does, until ``until(state)``; the
    state and when the poll that found it ran (None: not within ``limit_s``)."""
    deadline = time.time() + limit_s
    while time.time() < deadline:
        started = time.time()
        await session.poll()
        state = session.state()
        SEEN.append(_reading(state))
        if until(state):
            return state, state.polled_at
        await asyncio.sleep(max(0.0, REFRESH_S - (time.time() - started)))
    return None, None


async def _server_running(url: str) -> float:
    """The server's own ``vllm:num_requests_running`` (its API process answers while the
    engine core is frozen)."""
    async with httpx.AsyncClient(timeout=5) as c:
        text = (await c.get(url + "/metrics")).text
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines()
               if ln.startswith("vllm:num_requests_running{"))


def _running(state) -> float:
    s = state.snapshot.slot("TINY") if state.snapshot else None
    return (s.figures.value("running") or 0.0) if s and s.figures and s.health == "up" \
        else 0.0


def _source(state) -> str | None:
    s = state.snapshot.slot("TINY") if state.snapshot else None
    return s.source if s else None


@pytest.mark.parametrize("path", ["direct", "prometheus"])
async def test_a_frozen_engine_is_stalled_while_health_says_200_then_clears(
        real_vllm, tmp_path: Path, request: pytest.FixtureRequest, path: str) -> None:
    prom_url = None
    if path == "prometheus":
        prom = request.getfixturevalue("real_prometheus")
        prom.wait_scrapes(2)
        prom_url = prom.url
    SEEN.clear()
    assert REFRESH_S == defaults.REFRESH_S
    session = _session(tmp_path, real_vllm, prom_url, DEFAULT_STALL_S)
    assert real_vllm.proc is not None
    core = engine_core(real_vllm.proc.pid)
    load = asyncio.ensure_future(_keep_busy(real_vllm.url, real_vllm.name))
    stopped = False
    try:
        # decoding: requests running, and the session has seen its counters move
        # through the path under test: on a loaded two-core machine one Prometheus query
        # may outrun the poll's timeout, and that poll rightly falls back to the slot's
        # own /metrics (the fallback has its own tests)
        busy, _ = await _polls(session, lambda st: _running(st) >= 1
                               and _source(st) == path, 60)
        assert busy is not None, "\n".join(SEEN)
        assert not busy.stalled and not [a for a in busy.alerts if a.key.startswith("stall")]
        # frozen between two batches, the server's last word is "0 running" (no request is
        # stuck, so nothing is stalled): freeze again until it is frozen mid-batch
        for _attempt in range(10):
            os.kill(core, signal.SIGSTOP)
            stopped, frozen_at = True, time.time()
            await asyncio.sleep(0.3)  # the last stats the engine sent reach the gauge
            if await _server_running(real_vllm.url) >= 1:
                break
            os.kill(core, signal.SIGCONT)
            stopped = False
            await asyncio.sleep(0.5)
        assert stopped, "never frozen with a request running"
        # /health still says 200: without that, this test would prove nothing
        async with httpx.AsyncClient(timeout=5) as c:
            assert (await c.get(real_vllm.url + "/health")).status_code == 200
        st, found_at = await _polls(session, lambda st: "TINY" in st.stalled,
                                    DEFAULT_STALL_S + 4 * REFRESH_S + 10)
        assert st is not None and found_at is not None, "\n".join(SEEN)
        took = found_at - frozen_at
        print(f"\n{path}: STALLED {took:.1f} s after SIGSTOP (stall_after "
              f"{DEFAULT_STALL_S:g} s, refresh {REFRESH_S:g} s)")
        # the poll that first saw the last tokens may come one refresh after the freeze;
        # from there the stall is said at the poll stall_after later (give or take half
        # a refresh of the polls' jitter, which also covers Prometheus's scrape age of
        # up to 1 s): within stall_after + one refresh on both paths (issue 42)
        # Through Prometheus the poll reads one instant settled back by the scrape timeout
        # (issue 45: every query of a poll at one instant, none landing between two of
        # them): here the timeout is the 1 s scrape interval, a second later by design
        settled = prom_settle_s(path)
        assert took <= DEFAULT_STALL_S + REFRESH_S + SLACK_S + settled, (took, settled)
        async with httpx.AsyncClient(timeout=5) as c:
            assert (await c.get(real_vllm.url + "/health")).status_code == 200
        stall = st.stalled["TINY"]
        # said at the poll it is due at, give or take the polls' jitter (half a refresh)
        assert stall.running >= 1 and stall.since <= found_at - DEFAULT_STALL_S + REFRESH_S / 2
        (alert,) = [a for a in st.alerts if a.key == "stall:TINY"]
        assert alert.severity == "crit" and alert.state == "firing"
        assert f"{int(stall.running)} request(s) stuck since" in alert.title
        assert st.snapshot is not None and st.snapshot.slot("TINY").health == "up"
        os.kill(core, signal.SIGCONT)
        stopped = False
        resumed_at = time.time()
        st, cleared_at = await _polls(session, lambda st: "TINY" not in st.stalled, 30)
        assert st is not None and cleared_at is not None, "\n".join(SEEN)
        assert not [a for a in st.alerts if a.key == "stall:TINY"]
        print(f"{path}: cleared {cleared_at - resumed_at:.1f} s after SIGCONT")
    finally:
        if stopped:
            os.kill(core, signal.SIGCONT)
        load.cancel()  # the clients go away: vLLM aborts what is left of their requests
        with contextlib.suppress(asyncio.CancelledError):
            await load
        await session.aclose()
    # the shared server is left idle for the next test
    async with httpx.AsyncClient(timeout=5) as c:
        deadline = time.time() + 60
        while time.time() < deadline:
            text = (await c.get(real_vllm.url + "/metrics")).text
            line = next(ln for ln in text.splitlines()
                        if ln.startswith("vllm:num_requests_running{"))
            if float(line.rsplit(" ", 1)[1]) == 0.0:
                break
            await asyncio.sleep(0.5)


# -- a long prefill is not a stall --------------------------------------------------------

LONG_PROMPT_TOKENS = 32000
LONG_MAX_MODEL_LEN = 32768
CHUNK_TOKENS = 512
"""``--max-num-batched-tokens``: the prompt is prefilled 512 tokens per engine step (vLLM
V1's chunked prefill), 63 steps. Measured on this two-core machine (vLLM's engine runs on
one of them), unloaded, compiled: a 32000-token prompt's first token after 15.6 s in
2048-token chunks, 15.6 s in 1024-token ones, 17.0 s in 512-token ones (16.3 s eager, as
here); 24000 tokens took 9.1-9.4 s, and in 2048-token chunks 16000 took 4.1 s, 8000
1.2 s (attention is quadratic in the prompt). Small chunks keep each step — each takes
KV blocks, and the KV usage moving is what tells a prefill from a hang — far under
``stall_after`` (the last ones about 0.5 s), even on a machine that something else keeps
busy."""
LONG_MAX_TOKENS = 4
LONG_STALL_AFTERS = (REFRESH_S, 3.5, STALL_AFTER_S)
"""The ``stall_after`` of the long test's sessions: each path is judged at all three at
once, on the same prefill. Machines differ (the 32000-token prefill took 16.3 s on the
machine the figures above come from, 8.2 s alone on a faster one, 33 s in a loaded CI
run, 63 s beside seven other agents), so which of them the premise holds for is measured
during the run, not calibrated before it on another moment's speed (issue 48: a 16000-token
calibration prefill was 17-35 s of the test). Never below a refresh (a shorter one would
judge a slot between two polls), never above the other tests' 5 s."""


@pytest.fixture(scope="module")
def long_prefill_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """Its own server (the session's one takes 2048 tokens at most): the tiny model with
    room for 32768 positions, chunked prefill, no speculative decoding (nothing here is
    about drafts), eager (up in about 30 s instead of 60; its prefill takes as long).
    Stopped by its process group at the end of the module."""
    if not vllm_server.available():
        if os.environ.get("CI"):
            pytest.fail("the vLLM CPU venv is not installed; .ci/run must install it")
        pytest.skip("the vLLM CPU venv (tests/support/vllm_venv.sh) not installed")
    srv = VllmServer(tmp_path_factory.mktemp("vllm-long"), max_model_len=LONG_MAX_MODEL_LEN,
                     max_num_batched_tokens=CHUNK_TOKENS, speculative=False,
                     enforce_eager=True, model_in_engine=True)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@dataclass(frozen=True)
class Seen:
    """One poll of one session: what it read of the slot and what it said."""

    at: float
    fresh: bool
    """Up, with figures that are not a failed scrape's repeat: what the detector judges."""
    source: str | None
    running: float
    gen: float | None
    prompt: float | None
    kv: float | None
    stall: bool
    """The slot in ``state.stalled``, or a ``stall:`` alert: what must never happen."""

    def __str__(self) -> str:
        return (f"{self.at:.1f}: fresh={self.fresh} src={self.source} run={self.running:g} "
                f"gen={self.gen} prompt={self.prompt} kv={self.kv} stall={self.stall}")


def _seen(state: ConsoleState) -> Seen:
    s = state.snapshot.slot("TINY") if state.snapshot else None
    f = s.figures if s is not None else None
    fresh = s is not None and s.health == "up" and s.stale_since is None and f is not None
    stall = "TINY" in state.stalled or any(a.key.startswith(STALL_ALERT)
                                           for a in state.alerts)
    assert state.polled_at is not None  # taken after a poll
    return Seen(state.polled_at, fresh, s.source if s else None,
                (f.value("running") or 0.0) if f else 0.0,
                f.value("generation_total") if f else None,
                f.value("prompt_total") if f else None,
                f.value("kv_cache_usage") if f else None, stall)


def _still_span(seen: list[Seen]) -> float:
    """The longest run of fresh polls with requests running and both token counters where
    they were: what a detector blind to the KV usage would call stalled once it passes
    ``stall_after``."""
    best, start = 0.0, None
    for s in seen:
        if not s.fresh:
            continue  # as the detector does: not judged, and its clock goes on
        if s.running < 1:
            start = None
            continue
        if start is None or (s.gen, s.prompt) != (start.gen, start.prompt):
            start = s
        best = max(best, s.at - start.at)
    return best


JITTER_S = REFRESH_S / 2
"""How much sooner than ``stall_after`` after the last progress a detector may say STALLED:
polls come a refresh apart give or take the timer's and the poll's own time."""


def _quiet(ss: list[Seen]) -> list[tuple[Seen, float, float]]:
    """Each poll with, as that session read the slot by then, the seconds since it last
    saw progress (either token counter or the KV usage moved since the fresh poll
    before, or the slot idle: where a detector's clock starts again) and the seconds
    since either token counter last moved (what a detector blind to the KV usage would
    count). Polls that are not fresh are not judged; the clocks go on through them."""
    out: list[tuple[Seen, float, float]] = []
    prev: Seen | None = None
    moved = counted = None
    for s in ss:
        if s.fresh:
            if prev is None or s.running < 1 or (s.gen, s.prompt, s.kv) != (
                    prev.gen, prev.prompt, prev.kv):
                moved = s.at
            if prev is None or s.running < 1 or (s.gen, s.prompt) != (prev.gen, prev.prompt):
                counted = s.at
            prev = s
        if moved is not None and counted is not None:
            out.append((s, s.at - moved, s.at - counted))
    return out


def _never_stalled(seen: dict[str, list[Seen]], said: Callable[[], str],
                   stall_after: dict[str, float]) -> None:
    """No STALLED while the slot made progress within ``stall_after``, as that session
    saw it (measured during the run: how long one prefill chunk takes, and whether a
    scrape caught its KV step, depend on the machine's load; a chunk that takes longer
    than ``stall_after`` on a loaded machine is the detector's business to call, not this
    test's)."""
    for name, ss in seen.items():
        early = [(s, q) for s, q, _ in _quiet(ss)
                 if s.stall and q < stall_after[name] - JITTER_S]
        assert not early, (f"{name} said STALLED at {early[0][0].at:.1f}, "
                           f"{early[0][1]:.1f} s after progress\n{said()}")


@dataclass
class Streamed:
    sent_at: float = 0.0
    first_at: float | None = None
    """The first chunk that carries a choice: the first token, i.e. the prefill's end."""
    finish: str | None = None
    usage: dict[str, Any] | None = None


async def _stream_one(url: str, model: str, prompt: list[int], out: Streamed) -> None:
    """One streamed completion of ``prompt`` (token ids: exactly that many tokens), its
    first token and end noted in ``out``."""
    async with httpx.AsyncClient(timeout=600) as c:
        out.sent_at = time.time()
        async with c.stream("POST", url + "/v1/completions", json={
                "model": model, "prompt": prompt, "max_tokens": LONG_MAX_TOKENS,
                "temperature": 0, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}) as r:
            assert r.status_code == 200, (await r.aread())[:500]
            async for line in r.aiter_lines():
                if not line.startswith("data: {"):
                    continue  # blank separators and "data: [DONE]"
                chunk = json.loads(line[len("data: "):])
                assert "error" not in chunk, chunk
                for choice in chunk.get("choices") or ():
                    if out.first_at is None:
                        out.first_at = time.time()
                    out.finish = choice.get("finish_reason") or out.finish
                out.usage = chunk.get("usage") or out.usage


async def test_a_long_prefill_is_not_stalled(long_prefill_vllm: VllmServer,
                                             tmp_path: Path) -> None:
    srv = long_prefill_vllm
    vocab = json.loads((srv.model_dir / "config.json").read_text())["vocab_size"]
    # token ids, not text: exactly LONG_PROMPT_TOKENS of them. Seeded, and the server sees
    # this prompt once, so no prefix-cache hit shortens its prefill (ids 0-2 are the
    # special tokens)
    rng = random.Random(33)
    prompt = [rng.randrange(3, vocab) for _ in range(LONG_PROMPT_TOKENS)]
    # a short request first: whatever a server's first request pays once is not in the
    # long one's steps
    warm = Streamed()
    await _stream_one(srv.url, srv.name, [rng.randrange(3, vocab) for _ in range(64)], warm)
    assert warm.finish == "length", warm
    prom = PrometheusServer(tmp_path / "prom", [f"127.0.0.1:{srv.port}"])
    # one session per path and stall_after: "direct 2s", "prometheus 3.5s", ...
    sessions: dict[str, Session] = {}
    stall_after: dict[str, float] = {}
    path_of: dict[str, str] = {}

    def add(path: str, url: str | None) -> None:
        for sa in LONG_STALL_AFTERS:
            name = f"{path} {sa:g}s"
            (tmp_path / name).mkdir()
            sessions[name] = _session(tmp_path / name, srv, url, sa)
            stall_after[name], path_of[name] = sa, path

    seen: dict[str, list[Seen]] = {}
    try:
        add("direct", None)
        if not prometheus_server.available() and os.environ.get("CI"):
            pytest.fail("prometheus (Debian package) is not installed; .ci/run must install it")
        if prometheus_server.available():  # locally without it: the direct path alone
            prom.start()
            await asyncio.to_thread(prom.wait_scrapes, 2)
            add("prometheus", prom.url)
        seen.update({n: [] for n in sessions})
        first_direct = next(iter(sessions))

        async def poll_all() -> None:
            await asyncio.gather(*(s.poll() for s in sessions.values()))
            for name, s in sessions.items():
                seen[name].append(_seen(s.state()))

        def said() -> str:
            return "\n".join(f"{n}: {s}" for n, ss in seen.items() for s in ss) + \
                f"\n{streamed}"

        streamed = Streamed()
        await poll_all()  # idle: each session's first reading, before the request
        # that first poll starts each session's completion probe (a short prompt) beside
        # it; once both are in, an idle reading is the prompt counter's baseline: from here
        # only the long request adds to it
        for s in sessions.values():
            if s.ctx is not None:
                await s.ctx.poller.probes_done()
        await poll_all()
        settle = time.time() + 30  # and the counter has stopped moving (no lag in its scrape)
        while seen[first_direct][-1].prompt != seen[first_direct][-2].prompt and \
                time.time() < settle:
            await asyncio.sleep(REFRESH_S)
            await poll_all()
        baseline = seen[first_direct][-1]
        assert baseline.fresh and baseline.running == 0, said()
        job = asyncio.ensure_future(_stream_one(srv.url, srv.name, prompt, streamed))
        try:
            # poll at the refresh, as the console's timer does, until the answer is in;
            # every poll's verdict is kept, and judged once the premise is checked
            deadline = time.time() + 300
            while not job.done() and time.time() < deadline:
                started = time.time()
                await poll_all()
                await asyncio.wait({job}, timeout=max(0.0, REFRESH_S
                                                      - (time.time() - started)))
            await job  # (c) it completes: its error, if any, raised here
        finally:
            job.cancel()
        assert streamed.first_at is not None, said()
        prefill_s = streamed.first_at - streamed.sent_at
        spans = {n: _still_span(ss) for n, ss in seen.items() if ss}
        print(f"\nlong prefill: {LONG_PROMPT_TOKENS} tokens in {CHUNK_TOKENS}-token chunks, "
              f"first token after {prefill_s:.1f} s; running with both counters still for "
              + ", ".join(f"{n} {v:.1f} s" for n, v in spans.items())
              + f" (refresh {REFRESH_S:g} s)")
        # (a) the premise, without which this test proves nothing: the request was in its
        # prefill for more than stall_after + one refresh (its first token, seen by the
        # client), and a session saw it running with neither token counter moving for
        # longer than that too: on each path, for at least the shortest stall_after (the
        # sessions it holds for are measured here, on this run's speed)
        judged = [n for n, span in spans.items() if span > stall_after[n] + REFRESH_S]
        assert prefill_s > min(LONG_STALL_AFTERS) + REFRESH_S + SLACK_S, said()
        assert {path_of[n] for n in judged} == set(path_of.values()), (spans, said())
        # and the KV usage is what told the prefill from a hang: at polls where a
        # detector counting tokens alone was past stall_after, each judged session had
        # seen the KV usage move within it (measured, not assumed: a loaded machine takes
        # longer per chunk, so fewer polls qualify, but some do while a chunk takes less
        # than stall_after)
        saved = {n: [s for s, q, c in _quiet(seen[n]) if s.fresh and s.running >= 1
                     and c >= stall_after[n] and q < stall_after[n] - JITTER_S]
                 for n in judged}
        print("polls the KV usage kept from STALLED: "
              + ", ".join(f"{n} {len(v)}" for n, v in saved.items()))
        for name, v in saved.items():
            assert v, f"{name}: no poll where the KV usage was the progress\n{said()}"
        for name in (n for n in sessions if path_of[n] == "prometheus"):
            busy = [s for s in seen[name] if s.fresh and s.running >= 1]
            from_prom = [s for s in busy if s.source == "prometheus"]
            # most polls read Prometheus (one that outruns its timeout on a loaded machine
            # falls back to the slot's /metrics, rightly): both paths were judged
            assert len(from_prom) * 2 >= len(busy), f"{name}\n{said()}"
        # (b) no poll of any session said STALLED (the slot in state.stalled, or a stall
        # alert) while that session had seen progress within its stall_after (whether
        # its premise held or not: the relation holds at any speed)
        _never_stalled(seen, said, stall_after)
        # (c) the request completed, its prompt whole and its few tokens out
        assert streamed.finish == "length", said()
        usage = streamed.usage or {}
        assert (usage.get("prompt_tokens"), usage.get("completion_tokens")) == (
            LONG_PROMPT_TOKENS, LONG_MAX_TOKENS), usage
        # and the sessions see it done: nothing running, the prompt counted at last, never
        # a stall. (The counter is taken from the idle reading after both sessions' probes:
        # a probe still in flight at the first poll that saw the long request running
        # would add its prompt after that reading. The server's gauges and counters are
        # not one atomic record: a scrape can say "0 running" before the counter holds the
        # prompt, so the wait is for both.)
        first = baseline
        deadline = time.time() + 30
        while time.time() < deadline:
            await poll_all()
            last = seen[first_direct][-1]
            if last.fresh and last.running == 0 and first.prompt is not None and \
                    (last.prompt or 0) - first.prompt >= LONG_PROMPT_TOKENS:
                break
            await asyncio.sleep(REFRESH_S)
        _never_stalled(seen, said, stall_after)
        last = seen[first_direct][-1]
        assert last.fresh and last.running == 0, said()
        assert first.prompt is not None and last.prompt is not None, said()
        # the long prompt whole; beside it at most the sessions' completion probes (a few
        # dozen tokens each), which a loaded machine can send after the baseline (CI saw
        # 32175 - 64: the prompt and three probes)
        extra = last.prompt - first.prompt - LONG_PROMPT_TOKENS
        assert 0 <= extra < 1000, (extra, said())
    finally:
        for s in sessions.values():
            await s.aclose()
        prom.stop()
