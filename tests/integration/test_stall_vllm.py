"""The stall detector against the real vLLM CPU server: its engine core frozen (SIGSTOP)
while requests run. The API server still answers ``/health`` with 200 — the failure the
field asks about — and the console's session, polling it as the console does (directly,
and through a real Prometheus scraping it), says STALLED within ``stall_after`` + one
refresh, then clears once the engine runs again (SIGCONT, always, in a ``finally``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from console.config.settings import AlertTiming, Settings
from console.model.history import History
from console.operations.audit import AuditLog
from console.operations.registry import OperationRegistry
from console.session.session import Session
from console.session.view import ConsoleContext
from console.sources.collect.poller import DeploymentPoller
from console.sources.collect.targets import SlotTarget
from pod_agent.profiles import load_profile
from tests.support.procs import cmdline, descendants

pytestmark = [pytest.mark.vllm]

STALL_AFTER_S = 5.0
REFRESH_S = 2.0
SLACK_S = 1.5
"""A poll's own time on a busy two-core machine (the detection poll starts on time, its
answers take a moment)."""


def engine_core(server_pid: int) -> int:
    """The engine core of the server this session started: the process below its pid
    whose title vLLM set to ``VLLM::EngineCore``."""
    tree = descendants(server_pid)
    cores = [p for p in tree if "EngineCore" in cmdline(p)]
    assert len(cores) == 1, {p: cmdline(p) for p in tree}
    return cores[0]


def _session(tmp: Path, srv, prometheus_url: str | None) -> Session:
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
    max_model_len: 2048
""")
    settings = Settings(profiles_dir=prof, state_dir=tmp / "state", refresh_s=REFRESH_S,
                        alerts=AlertTiming(down_for_s=0, for_s=0, hold_s=0,
                                           stall_after_s=STALL_AFTER_S))
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
    session = _session(tmp_path, real_vllm, prom_url)
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
                                    STALL_AFTER_S + 4 * REFRESH_S + 10)
        assert st is not None and found_at is not None, "\n".join(SEEN)
        took = found_at - frozen_at
        print(f"\n{path}: STALLED {took:.1f} s after SIGSTOP (stall_after "
              f"{STALL_AFTER_S:g} s, refresh {REFRESH_S:g} s)")
        # the poll that first saw the last tokens may come one refresh after the freeze;
        # from there the stall is said at the first poll stall_after later
        assert took <= STALL_AFTER_S + REFRESH_S + SLACK_S + (
            REFRESH_S if path == "prometheus" else 0.0), took  # + a scrape's age
        async with httpx.AsyncClient(timeout=5) as c:
            assert (await c.get(real_vllm.url + "/health")).status_code == 200
        stall = st.stalled["TINY"]
        assert stall.running >= 1 and stall.since <= found_at - STALL_AFTER_S
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
