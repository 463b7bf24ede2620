"""The web wall as a network service, in process: the same-origin rule, the token traded
for a session cookie and a clean URL, no token in any log line or Referer, and a browser's
messages bounded. No session process starts in these tests: every request is answered by
the guard in front of textual-serve (or by the message loop, fed directly)."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from console.ui.web_wall import COOKIE, MAX_COLUMNS, MAX_ROWS, access_logger, make_server

TOKEN = "wall-token-0123456789abcdef"


async def _client(token: str | None, public_url: str | None = None) -> tuple[TestClient, object]:
    server = make_server("false", "127.0.0.1", 0, token, 2, public_url=public_url)
    app = await server._make_app()
    client = TestClient(TestServer(app), cookie_jar=aiohttp.CookieJar(unsafe=True))
    # the runner the wall's serve() uses: its access log class
    await client.server.start_server(access_log_class=access_logger())
    return client, server


async def test_a_foreign_origin_is_refused_with_or_without_a_token() -> None:
    client, server = await _client(None)
    try:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await client.ws_connect("/ws?width=80&height=24",
                                    headers={"Origin": "http://localhost:1234"})
        assert refused.value.status == 403
        assert server.sessions == 0  # no process for another site's page
    finally:
        await client.close()
    client, _server = await _client(TOKEN)
    try:
        r = await client.get(f"/?token={TOKEN}", allow_redirects=False)
        assert r.status == 302
        # the visitor's cookie rides along, the origin is not the wall's: refused
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await client.ws_connect("/ws", headers={"Origin": "http://evil.example"})
        assert refused.value.status == 403
    finally:
        await client.close()


async def test_the_page_of_the_wall_itself_is_same_origin() -> None:
    client, _server = await _client(None)
    try:
        host = f"{client.server.host}:{client.server.port}"
        r = await client.get("/", headers={"Origin": f"http://{host}"})
        assert r.status == 200
    finally:
        await client.close()


async def test_the_token_buys_a_session_cookie_and_a_clean_url() -> None:
    client, _server = await _client(TOKEN)
    try:
        r = await client.get(f"/?token={TOKEN}&fontsize=14", allow_redirects=False)
        assert r.status == 302
        assert r.headers["Location"] == "/?fontsize=14"  # no token left in the URL
        assert r.headers["Referrer-Policy"] == "no-referrer"
        set_cookie = r.headers["Set-Cookie"]
        value = r.cookies[COOKIE].value
        assert value and value != TOKEN and TOKEN not in set_cookie
        assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie
        assert "Secure" not in set_cookie  # plain http on loopback
        r = await client.get("/")  # the cookie alone opens the page
        assert r.status == 200 and r.headers["Referrer-Policy"] == "no-referrer"
        page = await r.text()
        assert TOKEN not in page and value not in page
        # a made-up cookie opens nothing
        client.session.cookie_jar.clear()
        r = await client.get("/", cookies={COOKIE: TOKEN})
        assert r.status == 401
    finally:
        await client.close()


async def test_behind_https_the_cookie_is_secure() -> None:
    client, _ = await _client(TOKEN, public_url="https://wall.example/prefix")
    try:
        r = await client.get(f"/?token={TOKEN}", allow_redirects=False)
        assert r.status == 302 and "Secure" in r.headers["Set-Cookie"]
    finally:
        await client.close()


async def test_no_log_line_holds_the_token(caplog: pytest.LogCaptureFixture) -> None:
    client, _ = await _client(TOKEN)
    caplog.set_level(logging.DEBUG)
    try:
        await client.get(f"/?token={TOKEN}", headers={"Referer": f"http://x/?token={TOKEN}"})
        await client.get("/?token=wrong-wrong-wrong-wrong")
    finally:
        await client.close()
    lines = [r.getMessage() for r in caplog.records]
    assert any('"GET /"' in ln for ln in lines), lines  # the access log did write
    assert not [ln for ln in lines if TOKEN in ln or "wrong-wrong" in ln], lines


class _Service:
    def __init__(self) -> None:
        self.sizes: list[tuple[int, int]] = []
        self.stdin: list[bytes] = []

    async def set_terminal_size(self, w: int, h: int) -> None:
        self.sizes.append((w, h))

    async def send_bytes(self, data: bytes) -> None:
        self.stdin.append(data)

    async def blur(self) -> None:
        """Unused here."""

    async def focus(self) -> None:
        """Unused here."""


class _Socket:
    def __init__(self, texts: list[str]) -> None:
        self.msgs = [SimpleNamespace(type=aiohttp.WSMsgType.TEXT, data=t) for t in texts]
        self.sent: list[object] = []

    def __aiter__(self) -> _Socket:
        return self

    async def __anext__(self) -> SimpleNamespace:
        if not self.msgs:
            raise StopAsyncIteration
        return self.msgs.pop(0)

    async def send_json(self, obj: object) -> None:
        self.sent.append(obj)


async def test_a_browsers_messages_are_bounded_and_garbage_is_dropped() -> None:
    server = make_server("false", "127.0.0.1", 0, None, 1)
    ws = _Socket([json.dumps(["resize", {"width": 3000, "height": 1500}]),
                  "not json", json.dumps({"resize": 1}), json.dumps([]),
                  json.dumps(["resize", "big"]), json.dumps(["resize", {"width": "x"}]),
                  json.dumps(["stdin", 42]), json.dumps(["stdin", "q"]),
                  json.dumps(["ping", "t1"]), json.dumps(["resize", {"width": 100,
                                                                     "height": 30}])])
    svc = _Service()
    await server._process_messages(ws, svc)
    assert svc.sizes == [(MAX_COLUMNS, MAX_ROWS), (80, 24), (100, 30)]
    assert svc.stdin == [b"q"] and ws.sent == [["pong", "t1"]]


async def test_a_rebound_name_is_refused_for_the_page_and_the_websocket() -> None:
    """DNS rebinding (issue 44): a page of evil.example whose name now resolves to
    127.0.0.1 sends Host and Origin evil.example:PORT, one origin with itself; the
    tokenless wall answers only to its own names."""
    client, server = await _client(None)
    try:
        port = client.server.port
        evil = f"evil.example:{port}"
        r = await client.get("/", headers={"Host": evil})
        assert r.status == 403
        r = await client.get("/", headers={"Host": evil, "Origin": f"http://{evil}"})
        assert r.status == 403
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await client.ws_connect("/ws?width=80&height=24",
                                    headers={"Host": evil, "Origin": f"http://{evil}"})
        assert refused.value.status == 403
        assert server.sessions == 0
        # an Origin of evil.example on the wall's own Host: refused too
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await client.ws_connect("/ws", headers={"Origin": f"http://{evil}"})
        assert refused.value.status == 403
        # the wall's own names still open it
        for name in (f"127.0.0.1:{port}", f"localhost:{port}"):
            r = await client.get("/", headers={"Host": name, "Origin": f"http://{name}"})
            assert r.status == 200, name
    finally:
        await client.close()


async def test_behind_a_proxy_the_public_name_opens_the_wall() -> None:
    """--public-url's name (a reverse proxy's Host, without a port) is one of the wall's
    names; another name still is not."""
    client, _server = await _client(None, public_url="https://wall.example/prefix")
    try:
        r = await client.get("/", headers={"Host": "wall.example",
                                           "Origin": "https://wall.example"})
        assert r.status == 200
        r = await client.get("/", headers={"Host": "evil.example"})
        assert r.status == 403
    finally:
        await client.close()
