"""Issue 44: a hung data-parallel engine is a stall of its slot, on both paths.

A vLLM slot started with ``--data-parallel-size 2`` exports each engine core's series
with its own ``engine`` label. One core hung (a collective that never returns) freezes
its own counters, with requests running on it, while the other core decodes: the slot's
sums still move. Served here on loopback from the real vLLM 0.32 capture
(``tests/support/dp_exposition.py``: the CPU server runs one core), read by the
console's session as the console reads a slot: directly, and through a real Prometheus
scraping it. STALLED comes within ``stall_after`` + one refresh of the freeze, naming
the engine; the sums alone never would say it."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

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
from tests.support import prometheus_server
from tests.support.dp_exposition import MODEL, Core, exposition

STALL_AFTER_S = 4.0
REFRESH_S = 1.0
SLACK_S = 1.5
"""A poll's own time on a busy two-core machine."""


class DpSlot:
    """A two-engine slot on loopback: engine 0 decodes (its counters grow with time),
    engine 1 decodes until :meth:`hang`, then its counters stand still, two requests
    running on it."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.hung_at: float | None = None
        slot = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    body, kind = slot.metrics().encode(), "text/plain; version=0.0.4"
                elif self.path == "/v1/models":
                    body, kind = json.dumps({"object": "list", "data": [
                        {"id": MODEL, "object": "model"}]}).encode(), "application/json"
                elif self.path == "/health":
                    body, kind = b"", "text/plain"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def hang(self) -> float:
        self.hung_at = time.monotonic()
        return self.hung_at

    def metrics(self) -> str:
        now = time.monotonic()
        t1 = now if self.hung_at is None else self.hung_at
        e0, e1 = 1000 + 90 * (now - self.t0), 800 + 70 * (t1 - self.t0)
        return exposition({"0": Core(3, e0, 600 + 5 * (now - self.t0)),
                           "1": Core(2, e1, 500)})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def dp_slot() -> Iterator[DpSlot]:
    slot = DpSlot()
    try:
        yield slot
    finally:
        slot.close()


def _session(tmp: Path, slot: DpSlot, prometheus_url: str | None) -> Session:
    prof = tmp / "profiles"
    prof.mkdir()
    (prof / "10-dp.yaml").write_text(f"""
gpu_type_ids: [cpu]
image: test
slots:
  DP:
    served_model_name: {MODEL}
    hf_repo_id: local/tiny
    port: {slot.port}
    gpus: [0, 1]
    gpu_util: 0.5
    max_model_len: 2048
""")
    settings = Settings(profiles_dir=prof, state_dir=tmp / "state", refresh_s=REFRESH_S,
                        record=False,
                        alerts=AlertTiming(down_for_s=0, for_s=0, hold_s=0,
                                           stall_after_s=STALL_AFTER_S))
    history = History(settings.history_s, settings.refresh_s)
    poller = DeploymentPoller("dp", (SlotTarget("DP", MODEL, slot.port, slot.url),),
                              prometheus_url=prometheus_url, window_s=60,
                              timeout_s=REFRESH_S * 0.8, history=history,
                              probe_interval_s=1e9)
    ctx = ConsoleContext(settings=settings, profile_name="dp",
                         profile=load_profile(prof / "10-dp.yaml"), poller=poller,
                         registry=OperationRegistry(AuditLog(tmp / "audit.jsonl")),
                         history=history)
    return Session(ctx)


async def _poll_until(session: Session, cond, limit_s: float):  # type: ignore[no-untyped-def]
    """Poll at the refresh, as the console's timer does, until ``cond(state)``; the
    state and the monotonic time of the poll that found it (None: not within)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        started = time.monotonic()
        await session.poll()
        st = session.state()
        if cond(st):
            return st, time.monotonic()
        await asyncio.sleep(max(0.0, REFRESH_S - (time.monotonic() - started)))
    return None, None


def _ranks(st) -> set[str]:  # type: ignore[no-untyped-def]
    s = st.snapshot.slot("DP") if st.snapshot is not None else None
    return set(s.figures.ranks) if s is not None and s.figures is not None else set()


@pytest.mark.parametrize("path", ["direct", "prometheus"])
async def test_one_hung_engine_of_a_data_parallel_slot_is_stalled(
        dp_slot: DpSlot, tmp_path: Path, path: str) -> None:
    prom = None
    if path == "prometheus":
        if not prometheus_server.available():
            if os.environ.get("CI"):
                pytest.fail("prometheus (Debian package) is missing")
            pytest.skip("prometheus is not installed")
        prom = prometheus_server.PrometheusServer(tmp_path / "prom",
                                                  [f"127.0.0.1:{dp_slot.port}"])
        prom.start()
    try:
        if prom is not None:
            await asyncio.to_thread(prom.wait_scrapes, 2)
        session = _session(tmp_path, dp_slot, prom.url if prom is not None else None)
        st, _ = await _poll_until(session, lambda st: _ranks(st) == {"0", "1"}
                                  and st.snapshot.slot("DP").source == path, 30)
        assert st is not None, "never read both engines through the path under test"
        assert st.stalled == {}
        frozen = dp_slot.hang()
        st, found = await _poll_until(session, lambda st: "DP" in st.stalled,
                                      STALL_AFTER_S + 6 * REFRESH_S + 10)
        assert st is not None and found is not None
        took = found - frozen
        print(f"\n{path}: STALLED {took:.1f} s after engine 1 hung")
        # Prometheus adds the age of its last scrape (one scrape interval, 1 s)
        assert took <= STALL_AFTER_S + REFRESH_S + SLACK_S + (
            1.0 if path == "prometheus" else 0.0), took
        stall = st.stalled["DP"]
        assert stall.engine == "1" and stall.running == 2
        fig = st.snapshot.slot("DP").figures
        assert fig.value("running") == 5  # the sums: both engines' requests
        (alert,) = [a for a in st.alerts if a.key == "stall:DP"]
        assert alert.severity == "crit" and "DP STALLED (engine 1)" in alert.title
        await session.aclose()
    finally:
        if prom is not None:
            prom.stop()
