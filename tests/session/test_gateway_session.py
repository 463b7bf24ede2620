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
