"""The demo servers' HTTP/1.1 (``console/demo/http_serve.py``, on h11), against real
clients on loopback: the console's own client and httpx, and raw sockets where a client
misbehaves."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from console.demo.http_serve import Reply, Request, Streamed, start
from console.sources.collect.http import HttpClient


class Echo:
    """A handler that says what it got; ``/stream`` sends one event, waits for ``go``,
    then a second; ``/none`` answers nothing."""

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.stream_closed = asyncio.Event()
        self.stream_ended = False

    async def __call__(self, request: Request) -> Reply | Streamed | None:
        if request.path == "/none":
            return None
        if request.path == "/stream":
            return Streamed(200, self._events(), "text/event-stream")
        return Reply(200, json.dumps({"method": request.method, "path": request.path,
                                      "body": request.body.decode()}).encode())

    async def _events(self) -> AsyncIterator[bytes]:
        try:
            yield b"data: one\n\n"
            await self.go.wait()
            yield b"data: two\n\n"
            self.stream_ended = True
        finally:
            self.stream_closed.set()


async def _serve(handler: Echo, max_body: int = 1024) -> tuple[asyncio.Server, int]:
    server = await start(handler, 0, max_body=max_body)
    return server, server.sockets[0].getsockname()[1]


async def _raw(port: int, data: bytes) -> bytes:
    """What the server sends back to ``data`` before it closes (within 10 s)."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(data)
    await w.drain()
    try:
        return await asyncio.wait_for(r.read(), 10)
    finally:
        w.close()


async def test_keep_alive_one_connection_for_several_requests() -> None:
    server, port = await _serve(Echo())
    client = HttpClient(relay=None)
    try:
        a = await client.get(f"http://127.0.0.1:{port}/a?x=1", timeout=5)
        b = await client.post_json(f"http://127.0.0.1:{port}/b", {"k": 1}, timeout=5)
        assert a.status_code == 200 and a.json() == {"method": "GET", "path": "/a", "body": ""}
        assert b.json() == {"method": "POST", "path": "/b", "body": '{"k": 1}'}
        assert client.opened == 1
    finally:
        await client.aclose()
        server.close()


async def test_a_stream_arrives_event_by_event_and_its_end_is_seen() -> None:
    echo = Echo()
    server, port = await _serve(echo)
    try:
        async with httpx.AsyncClient(timeout=10) as c, \
                c.stream("GET", f"http://127.0.0.1:{port}/stream") as r:
            assert r.headers["content-type"] == "text/event-stream"
            assert r.headers.get("transfer-encoding") == "chunked"
            parts = r.aiter_raw()
            first = await asyncio.wait_for(parts.__anext__(), 10)  # before "go"
            assert first == b"data: one\n\n" and not echo.stream_ended
            echo.go.set()
            rest = b"".join([p async for p in parts])
        assert rest == b"data: two\n\n" and echo.stream_ended
        await asyncio.wait_for(echo.stream_closed.wait(), 10)
    finally:
        server.close()


async def test_a_client_gone_mid_stream_closes_the_stream() -> None:
    echo = Echo()
    server, port = await _serve(echo)
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n")
        await w.drain()
        got = b""
        while b"data: one" not in got:
            got += await asyncio.wait_for(r.read(4096), 10)
        w.close()  # gone, with the stream waiting for its second event
        echo.go.set()
        await asyncio.wait_for(echo.stream_closed.wait(), 10)
        # and the server goes on serving
        assert b" 200 " in await _raw(port, b"GET /x HTTP/1.1\r\nhost: x\r\n"
                                            b"connection: close\r\n\r\n")
    finally:
        server.close()


@pytest.mark.parametrize("data, status", [
    (b"NOT HTTP AT ALL\r\n\r\n", b"400"),
    (b"GET / HTTP/1.1\r\n\r\n", b"400"),  # HTTP/1.1 without Host
    (b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nab",
     b"400"),
    (b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 5000\r\n\r\n" + b"x" * 5000, b"413"),
])
async def test_a_broken_request_is_refused_and_the_server_goes_on(data: bytes,
                                                                   status: bytes) -> None:
    server, port = await _serve(Echo(), max_body=1024)
    try:
        answer = await _raw(port, data)
        assert answer.startswith(b"HTTP/1.1 " + status), answer[:200]
        ok = await _raw(port, b"GET /ok HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        assert ok.startswith(b"HTTP/1.1 200") and b'"/ok"' in ok
    finally:
        server.close()


async def test_a_chunked_request_body_reaches_the_handler_whole() -> None:
    server, port = await _serve(Echo())
    try:
        answer = await _raw(port, b"POST /c HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked"
                                  b"\r\nconnection: close\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200") and b'"body": "abcde"' in answer
    finally:
        server.close()


async def test_no_answer_closes_the_connection_with_nothing_sent() -> None:
    server, port = await _serve(Echo())
    try:
        assert await _raw(port, b"GET /none HTTP/1.1\r\nhost: x\r\n\r\n") == b""
    finally:
        server.close()
