"""The session polls the gateway beside the slots (``gateway_url``): ``state()`` carries
its reading, and its alerts fire with ``for:`` like the rest. The gateway here serves a
real LiteLLM capture (``tests/fixtures/litellm_metrics.txt``) on loopback."""

from __future__ import annotations

import re
from pathlib import Path

from console.config.settings import AlertTiming, GatewaySettings
from console.sources.collect.http import HttpClient
from tests.conftest import FIXTURES
from tests.session.world import world

T0 = 1_800_000_000.0
CAPTURE = (FIXTURES / "litellm_metrics.txt").read_text()


async def _gateway(pages: dict[str, str]):  # type: ignore[no-untyped-def]
    import asyncio

    async def handle(reader, writer) -> None:  # type: ignore[no-untyped-def]
        line = await reader.readline()
        auth = b""
        while (h := await reader.readline()) not in (b"\r\n", b""):
            if h.lower().startswith(b"authorization:"):
                auth = h
        path = line.split()[1].decode()
        if path.startswith("/health"):
            status, body = "200 OK", '{"status":"healthy","db":"Not connected"}'
        elif path == "/metrics/" and b"Bearer gw-key" in auth:
            status, body = "200 OK", pages["metrics"]
        else:
            status, body = "401 Unauthorized", '"no"'
        data = body.encode()
        writer.write(f"HTTP/1.1 {status}\r\nContent-Length: {len(data)}\r\n\r\n".encode()
                     + data)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def test_gateway_in_state_and_alerts(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GW_SESSION_KEY", "gw-key")
    pages = {"metrics": CAPTURE}
    server, url = await _gateway(pages)
    w = world(tmp_path, T0, gateway_url=url,
              gateway=GatewaySettings(key_env="GW_SESSION_KEY", cooldown_s=30),
              alerts=AlertTiming(down_for_s=4, for_s=4, hold_s=0))
    w.slots.client = HttpClient()  # type: ignore[attr-defined]
    try:
        assert await w.session.poll()
        st = w.session.state()
        gw = st.gateway
        assert gw is not None and gw.live and gw.metrics_error is None
        assert {u.name for u in gw.users} == {"alice", "bob"}
        assert gw.headline().startswith("gateway up · ready")
        # tiny-b's state 2 from before the console watched: not read as a cooldown
        assert not [a for a in st.alerts if a.key.startswith("gw-cooldown")]
        # a new cooldown of tiny-b: pending, then firing after for: (down_for_s)
        pages["metrics"] = re.sub(r'(litellm_deployment_cooled_down_total\{[^}]*\}) (\S+)',
                                  lambda m: f"{m.group(1)} {float(m.group(2)) + 1}", CAPTURE)
        w.clock.advance(2)
        assert await w.session.poll()
        keys = {a.key: a.state for a in w.session.state().alerts}
        assert keys.get("gw-cooldown:tiny-b") == "pending"
        w.clock.advance(4)
        assert await w.session.poll()
        st = w.session.state()
        keys = {a.key: a.state for a in st.alerts}
        assert keys.get("gw-cooldown:tiny-b") == "firing"
        assert st.gateway is not None and "cooldown: tiny-b" in st.gateway.headline()
        # the gateway goes away: down, after for:
        server.close()
        await server.wait_closed()
        w.clock.advance(2)
        assert await w.session.poll()
        w.clock.advance(5)
        assert await w.session.poll()
        keys = {a.key: a.state for a in w.session.state().alerts}
        assert keys.get("gw-down") == "firing"
    finally:
        server.close()
        await w.slots.client.aclose()  # type: ignore[attr-defined]


def _bump(text: str, name: str, by: float) -> str:
    return re.sub(rf'^({name}\{{[^}}]*\}}) (\S+)$',
                  lambda m: f"{m.group(1)} {float(m.group(2)) + by}", text, flags=re.M)


async def test_after_a_planned_stop_the_gateways_window_is_the_new_runs(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The calls that failed while the pod was stopped on purpose stay in a 5-minute
    window for 5 minutes after the resume: the header said ``gw err 88 %`` on a fresh,
    healthy run. The new run's window starts at its own start."""
    from msgspec.structs import replace

    from console.model.catalog import GW_FAILURES, GW_REQUESTS
    from tests.session.test_pod_run_session import _idle_stop, agent, poll

    monkeypatch.setenv("GW_SESSION_KEY", "gw-key")
    pages = {"metrics": CAPTURE}
    server, url = await _gateway(pages)
    w = world(tmp_path, T0, gateway_url=url, gateway=GatewaySettings(key_env="GW_SESSION_KEY"))
    w.slots.client = HttpClient()  # type: ignore[attr-defined]
    try:
        w.pod.pod = replace(w.pod.pod, started_at=T0 - 3600)
        agent(w)
        await poll(w, 0.0)
        await _idle_stop(w)
        # while the pod is stopped every call through the gateway fails
        pages["metrics"] = _bump(_bump(CAPTURE, GW_FAILURES, 40), GW_REQUESTS, 40)
        st = await poll(w, 30.0)
        assert st.gateway is not None and (st.gateway.total.get("failures") or 0) > 0
        # `r`: the same machine started again; from now on every call succeeds
        w.clock.advance(20.0)
        w.slots.down = set()
        w.pod.run(started_at=w.clock())
        agent(w)
        st = await poll(w, 2.0)
        assert st.run is not None and st.run.number == 2
        began = st.run.began
        assert began is not None
        served = pages["metrics"]
        for i in range(1, 4):
            pages["metrics"] = _bump(served, GW_REQUESTS, 10 * i)
            st = await poll(w, 20.0)
            gw = st.gateway
            assert gw is not None and gw.window_s is not None
            assert gw.window_s <= st.now - began + 1e-6, (gw.window_s, st.now - began)
            assert gw.total.get("failures") == 0.0, gw.total
            assert gw.total.get("error_rate") == 0.0, gw.total
    finally:
        server.close()
        await w.slots.client.aclose()  # type: ignore[attr-defined]


async def test_the_gateway_is_read_with_the_timeout_of_the_refresh_in_force(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The gateway's collector is kept across polls; its request timeout is not: it is
    the one of the refresh in force at each poll (it kept the start value once, so a
    faster refresh let a slow gateway hold every poll past its interval)."""
    from typing import Any

    from console.config import defaults

    monkeypatch.setenv("GW_SESSION_KEY", "gw-key")
    server, url = await _gateway({"metrics": CAPTURE})
    asked: list[float] = []

    class Recording(HttpClient):
        async def get(self, u: str, *, timeout: float, **kw: Any):  # type: ignore[no-untyped-def,override]
            if u.startswith(url):
                asked.append(timeout)
            return await super().get(u, timeout=timeout, **kw)

    w = world(tmp_path, T0, refresh_s=10.0, gateway_url=url,
              gateway=GatewaySettings(key_env="GW_SESSION_KEY"))
    w.slots.client = Recording()  # type: ignore[attr-defined]
    try:
        assert await w.session.poll()
        assert w.session.state().gateway is not None
        assert asked and set(asked) == {defaults.request_timeout_s(10.0)}, asked
        collector = w.session.cycle.gateway_polling.collector
        asked.clear()
        assert w.session.step_refresh(+1) == 5.0 and w.session.step_refresh(+1) == 2.0
        w.clock.advance(2)
        assert await w.session.poll()
        assert w.session.cycle.gateway_polling.collector is collector  # kept, not remade
        assert asked and set(asked) == {defaults.request_timeout_s(2.0)}, asked
    finally:
        server.close()
        await w.slots.client.aclose()  # type: ignore[attr-defined]
