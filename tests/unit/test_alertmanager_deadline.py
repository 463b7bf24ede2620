"""Alertmanager's client is made once, at the first call; the deadline of each call is
the one of now (delivery sets ``timeout_s`` from the refresh at every use, issue 46
item 2). The client's own timeout once kept the first refresh's value: after ``-``
a slow Alertmanager still failed at the old, shorter deadline."""

from __future__ import annotations

import asyncio

from console.session.alertmanager import Alertmanager

ANSWER_AFTER_S = 1.5
"""How long the loopback Alertmanager below takes to answer (the point of the test)."""


async def test_a_call_waits_the_deadline_of_now_not_the_clients_first() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await asyncio.sleep(ANSWER_AFTER_S)  # a slow Alertmanager, not a wait of the test
        body = b"[]"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    am = Alertmanager(f"http://127.0.0.1:{port}", timeout_s=0.5)  # a fast refresh's
    try:
        am._http()  # the client, made with the deadline of then
        am.timeout_s = 10.0  # the refresh slowed down: delivery sets the deadline of now
        assert await am.silences() == []
    finally:
        await am.aclose()
        server.close()
        await server.wait_closed()
