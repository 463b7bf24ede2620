"""HTTP/1.1 serving for the demo's simulated servers (vLLM, SGLang, LiteLLM), on h11.

The framing is h11's — request bodies by ``Content-Length`` or chunked, keep-alive and
``Connection: close``, chunked answers when the length is not known in advance (a
server-sent event stream), a malformed request answered ``400`` — so the fakes differ
from the real servers only where they mean to. What stays here is the loop that feeds a
connection's bytes to h11 and a handler's answer back.

A handler gets one :class:`Request` and returns a :class:`Reply` (the whole body), a
:class:`Streamed` answer (its chunks as they come: each is sent, and drained, before the
next is asked for), or ``None``: no answer at all, the connection closes — what a proxy
that is down does to its clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
from collections.abc import AsyncIterator, Awaitable, Callable

import h11
from msgspec import Struct

READ_CHUNK = 64 * 1024
MAX_BODY = 64 * 1024 * 1024
"""A request body larger than this is refused (``413``): the fakes take JSON, and the
largest a test sends is a 32000-token prompt."""


class Request(Struct, frozen=True):
    method: str
    path: str
    """The target without its query string."""
    body: bytes


class Reply(Struct, frozen=True):
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


class Streamed(Struct, frozen=True):
    status: int
    chunks: AsyncIterator[bytes]
    """Closed (``aclose``) however the answer ends: its ``finally`` runs when a client
    goes away mid-stream too."""
    content_type: str = "application/json"


Answer = Reply | Streamed | None
Handler = Callable[[Request], Awaitable[Answer]]


class _Closed(Exception):
    """The client closed the connection (or broke its framing) between requests."""


async def _next_request(conn: h11.Connection, reader: asyncio.StreamReader,
                        max_body: int) -> Request:
    head: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(READ_CHUNK))
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > max_body:
                raise h11.RemoteProtocolError("request body too large", error_status_hint=413)
        elif isinstance(event, h11.EndOfMessage) and head is not None:
            target = head.target.decode("latin-1")
            return Request(head.method.decode("ascii"), target.split("?", 1)[0], bytes(body))
        elif isinstance(event, h11.ConnectionClosed):
            raise _Closed


def _head(status: int, content_type: str, extra: tuple[tuple[str, str], ...],
          length: int | None) -> h11.Response:
    headers = [("content-type", content_type), *extra]
    if length is not None:
        headers.append(("content-length", str(length)))
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    return h11.Response(status_code=status, headers=headers, reason=reason)


async def _send(conn: h11.Connection, writer: asyncio.StreamWriter, answer: Reply | Streamed
                ) -> None:
    if isinstance(answer, Reply):
        writer.write(conn.send(_head(answer.status, answer.content_type, answer.headers,
                                     len(answer.body))) or b"")
        if answer.body:
            writer.write(conn.send(h11.Data(data=answer.body)) or b"")
        writer.write(conn.send(h11.EndOfMessage()) or b"")
        await writer.drain()
        return
    try:
        # no length: h11 frames the body in chunks (an HTTP/1.0 client gets it to the close)
        writer.write(conn.send(_head(answer.status, answer.content_type, (), None)) or b"")
        await writer.drain()
        async for chunk in answer.chunks:
            if chunk:
                writer.write(conn.send(h11.Data(data=chunk)) or b"")
                await writer.drain()
        writer.write(conn.send(h11.EndOfMessage()) or b"")
        await writer.drain()
    finally:
        aclose = getattr(answer.chunks, "aclose", None)
        if aclose is not None:
            await aclose()


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                           handler: Handler, max_body: int = MAX_BODY) -> None:
    """One client's connection: its requests one after another, until it closes, asks
    to, breaks the framing (answered ``400``, or ``413``), or the handler says ``None``."""
    conn = h11.Connection(h11.SERVER)
    try:
        while True:
            try:
                request = await _next_request(conn, reader, max_body)
            except h11.RemoteProtocolError as exc:
                with contextlib.suppress(h11.LocalProtocolError, ConnectionError):
                    writer.write(conn.send(_head(exc.error_status_hint, "text/plain",
                                                 (("connection", "close"),), 0)) or b"")
                    writer.write(conn.send(h11.EndOfMessage()) or b"")
                    await writer.drain()
                return
            answer = await handler(request)
            if answer is None:
                return
            await _send(conn, writer, answer)
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return  # Connection: close, or an HTTP/1.0 client
            conn.start_next_cycle()
    except (_Closed, ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def start(handler: Handler, port: int, host: str = "127.0.0.1",
                max_body: int = MAX_BODY) -> asyncio.Server:
    """Listen on ``host:port`` (the fakes: loopback), each connection served by
    :func:`serve_connection`."""
    return await asyncio.start_server(
        lambda r, w: serve_connection(r, w, handler, max_body), host, port)
