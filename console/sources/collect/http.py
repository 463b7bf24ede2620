"""A small HTTP/1.1 client on asyncio streams, for the collectors' hot path.

Why not httpx here: importing it and building its TLS context costs ~100 ms of
start-up before the first poll can run, and the console's first frame with live
numbers has to land within twice a bare Textual app's first frame. What the
collectors need is narrow — GET and a small JSON POST to a handful of origins,
keep-alive, a deadline per request and a cap on body size — and that is all
this does. httpx stays for RunPod's API and webhooks, which are off that path.

The HTTP/1.1 framing itself is h11's (httpx's own, ~7 ms to import): interim 1xx
answers (``103 Early Hints`` from a proxy) are skipped instead of taken for the
answer, conflicting ``Content-Length`` headers are refused (RFC 9112 §6.3),
chunked and to-EOF bodies and keep-alive rules are h11's. What stays here is
the pool, the deadline and the body cap.

Semantics worth knowing:
  * every request has one deadline covering connect, send and the whole body;
  * a body larger than ``max_bytes`` is refused while reading (never buffered);
  * a connection is reused only after a complete, framed response, and only while it
    has been idle less than ``IDLE_EXPIRY_S`` (servers close theirs soon after: a
    request sent as the server closes is lost); an idle one the server closed in the
    meantime is retried once on a fresh connection (GET only: a POST is never sent
    twice);
  * no redirects, no proxies from the environment, no compression.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

import h11
from msgspec import Struct

if TYPE_CHECKING:
    import ssl

USER_AGENT = "pod-console"
RELAY_ENV = "POD_CONSOLE_SCRAPE_RELAY"
"""``URL TOKEN`` of a web wall's scrape relay (``console/ui/web_relay.py``): set by the
wall server for its browser sessions, whose GETs then go through it, so that N open tabs
cost each slot one scrape per refresh, not N."""
RELAY_TOKEN_HEADER = "X-Relay-Token"
RELAY_ERROR_HEADER = "X-Relay-Error"
HEADER_LIMIT = 64 * 1024
IDLE_PER_ORIGIN = 8
IDLE_EXPIRY_S = 4.0
"""An idle connection older than this is closed, not reused. uvicorn (vLLM's server, the
gateway's) closes a keep-alive connection idle for 5 s: a request written on one just
then meets the close and gets no answer, and a POST (a benchmark's completion) is never
sent again. Seen on a loaded machine, where a benchmark's connections sat idle while the
server worked on other requests."""
DEFAULT_MAX_BYTES = 16 * 1024 * 1024


class HttpError(Exception):
    """A request that produced no usable response. ``kind`` says why, for display."""

    def __init__(self, kind: str, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind  # connect | timeout | protocol | too_large
        self.status_code = status_code
        """With ``too_large``: the answer's status, which came before the body refused
        (a health check is decided by it, not by its size)."""

    def describe(self) -> str:
        if self.kind == "connect":
            return "connection refused"
        if self.kind == "timeout":
            return "timed out"
        return str(self)


class Response(Struct, frozen=True):
    status_code: int
    headers: dict[str, str]
    content: bytes

    @property
    def text(self) -> str:
        charset = "utf-8"
        for part in self.headers.get("content-type", "").split(";")[1:]:
            k, _, v = part.strip().partition("=")
            if k.lower() == "charset" and v:
                charset = v.strip('"')
        try:
            return self.content.decode(charset, errors="replace")
        except LookupError:
            return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


class _Origin(Struct, frozen=True):
    scheme: str
    host: str
    port: int

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=HEADER_LIMIT)
        self.idle_since = 0.0
        """When its last answer ended (the client's monotonic clock)."""

    def close(self) -> None:
        with contextlib.suppress(Exception):  # already gone: nothing to release
            self.writer.close()


def _split(url: str, params: dict[str, Any] | None) -> tuple[_Origin, str]:
    u = urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise HttpError("protocol", f"unsupported URL {url!r}")
    try:
        port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError:
        raise HttpError("protocol", f"bad port in {url!r}") from None
    target = u.path or "/"
    query = u.query
    if params:
        extra = urlencode(params, doseq=True)
        query = f"{query}&{extra}" if query else extra
    if query:
        target += "?" + query
    return _Origin(u.scheme, u.hostname, port), target


def relay_from_env() -> tuple[str, str] | None:
    """The scrape relay this process was given (``RELAY_ENV``), or None."""
    import os

    url, _, token = os.environ.get(RELAY_ENV, "").strip().partition(" ")
    return (url.rstrip("/"), token.strip()) if url and token.strip() else None


class HttpClient:
    """Keep-alive connections per origin; safe to share between concurrent requests.

    ``relay``: (URL, token) of a web wall's scrape relay that every GET goes through
    (default: the one ``RELAY_ENV`` names, if any; None: none)."""

    def __init__(self, idle_per_origin: int = IDLE_PER_ORIGIN,
                 relay: tuple[str, str] | bool | None = True,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.relay = relay_from_env() if relay is True else relay or None
        self._monotonic = monotonic  # how long a connection has been idle (a test's own)
        self._idle: dict[_Origin, deque[_Conn]] = {}
        self._idle_max = idle_per_origin
        self._tls: ssl.SSLContext | None = None
        self.opened = 0
        """Connections opened so far (tests read it to see keep-alive working)."""
        self._closed = False

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:  # built on first https use only: it costs tens of ms
            import ssl

            self._tls = ssl.create_default_context()
        return self._tls

    async def get(self, url: str, *, timeout: float, headers: dict[str, str] | None = None,
                  params: dict[str, Any] | None = None,
                  max_bytes: int = DEFAULT_MAX_BYTES) -> Response:
        return await self.request("GET", url, timeout=timeout, headers=headers,
                                  params=params, max_bytes=max_bytes)

    async def post_json(self, url: str, body: Any, *, timeout: float,
                        headers: dict[str, str] | None = None,
                        max_bytes: int = DEFAULT_MAX_BYTES,
                        on_data: Callable[[bytes], None] | None = None) -> Response:
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        return await self.request("POST", url, timeout=timeout, headers=hdrs,
                                  body=json.dumps(body).encode(), max_bytes=max_bytes,
                                  on_data=on_data)

    async def request(self, method: str, url: str, *, timeout: float,
                      headers: dict[str, str] | None = None, params: dict[str, Any] | None = None,
                      body: bytes | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
                      on_data: Callable[[bytes], None] | None = None) -> Response:
        """``on_data`` sees each piece of a 2xx body as it arrives (a streamed answer's
        timing: the benchmark's first token); the whole body is still returned."""
        if self.relay is not None and method == "GET" and on_data is None:
            return await self._relayed(url, params, headers or {}, timeout, max_bytes)
        origin, target = _split(url, params)
        head = self._head(origin, headers or {}, body)
        try:
            async with asyncio.timeout(timeout):
                return await self._exchange(method, origin, target, head, body, max_bytes,
                                            on_data)
        except TimeoutError:
            raise HttpError("timeout", f"{method} {url}: no answer within {timeout:g} s"
                            ) from None

    async def _relayed(self, url: str, params: dict[str, Any] | None,
                       headers: dict[str, str], timeout: float, max_bytes: int) -> Response:
        """A GET through the relay: the same answer (or the same failure) as asking
        directly, perhaps one the relay fetched for another session within its refresh."""
        assert self.relay is not None
        base, token = self.relay
        if params:
            url += ("&" if "?" in url else "?") + urlencode(params)
        hdrs = {RELAY_TOKEN_HEADER: token, "X-Relay-Timeout": f"{timeout:g}",
                **{f"X-Relay-H-{k}": v for k, v in headers.items()}}
        origin, target = _split(f"{base}/get", {"url": url})
        head = self._head(origin, hdrs, None)
        try:
            async with asyncio.timeout(timeout + 0.5):  # the relay's own deadline first
                r = await self._exchange("GET", origin, target, head, None, max_bytes)
        except TimeoutError:
            raise HttpError("timeout", f"GET {url}: no answer within {timeout:g} s"
                            ) from None
        except HttpError as exc:
            if exc.kind == "connect":
                raise HttpError("connect", f"GET {url}: the wall's relay is gone ({exc})"
                                ) from None
            raise
        kind = r.headers.get(RELAY_ERROR_HEADER.lower())
        if kind is not None:
            raise HttpError(kind, r.content.decode("utf-8", "replace"))
        return r

    @staticmethod
    def _head(origin: _Origin, headers: dict[str, str], body: bytes | None
              ) -> list[tuple[str, str]]:
        out = [("Host", origin.host_header), ("User-Agent", USER_AGENT), ("Accept", "*/*")]
        for k, v in headers.items():
            if "\r" in k or "\n" in k or "\r" in v or "\n" in v:
                raise HttpError("protocol", f"header {k!r} contains a line break")
            out.append((k, v))
        if body is not None:
            out.append(("Content-Length", str(len(body))))
        return out

    async def _exchange(self, method: str, origin: _Origin, target: str,
                        head: list[tuple[str, str]], body: bytes | None, max_bytes: int,
                        on_data: Callable[[bytes], None] | None = None) -> Response:
        conn, reused = await self._acquire(origin)
        try:
            try:
                return await self._send_and_read(conn, origin, method, head, body, max_bytes,
                                                 target, on_data)
            except _StaleConnection:
                conn.close()
                if not (reused and method == "GET"):
                    raise HttpError("protocol", "server closed the connection without an "
                                    "answer") from None
                # a keep-alive connection the server had already closed: one fresh try
                conn = await self._open(origin)
                return await self._send_and_read(conn, origin, method, head, body, max_bytes,
                                                 target, on_data)
        except BaseException:
            conn.close()  # mid-request (error, timeout, cancel): never reuse it
            raise

    async def _acquire(self, origin: _Origin) -> tuple[_Conn, bool]:
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()
            if (conn.reader.at_eof() or conn.writer.is_closing()
                    or self._monotonic() - conn.idle_since > IDLE_EXPIRY_S):
                conn.close()
                continue
            return conn, True
        return await self._open(origin), False

    async def _open(self, origin: _Origin) -> _Conn:
        tls = self._tls_context() if origin.scheme == "https" else None
        try:
            reader, writer = await asyncio.open_connection(
                origin.host, origin.port, ssl=tls, limit=HEADER_LIMIT,
                server_hostname=origin.host if tls else None)
        except OSError as exc:  # ssl.SSLError is one too
            if tls is not None:
                import ssl  # loaded already: it made ``tls``

                if isinstance(exc, ssl.SSLError):
                    raise HttpError("protocol", f"TLS: {exc.reason or exc}") from None
            raise HttpError("connect", f"{origin.host}:{origin.port}: "
                            f"{exc.strerror or exc}") from None
        self.opened += 1
        return _Conn(reader, writer)

    async def _send_and_read(self, conn: _Conn, origin: _Origin, method: str,
                             head: list[tuple[str, str]], body: bytes | None, max_bytes: int,
                             target: str, on_data: Callable[[bytes], None] | None = None
                             ) -> Response:
        hc = conn.h11
        try:
            out = hc.send(h11.Request(method=method, target=target, headers=head))
            if body:
                out += hc.send(h11.Data(data=body))
            out += hc.send(h11.EndOfMessage())
        except h11.LocalProtocolError as exc:
            raise HttpError("protocol", f"request not sendable: {exc}") from None
        try:
            conn.writer.write(out)
            await conn.writer.drain()
        except ConnectionError as exc:
            raise _StaleConnection() from exc
        got_any = False
        fed = 0
        status = 0
        headers: dict[str, str] = {}
        data = bytearray()
        while True:
            try:
                ev = hc.next_event()
            except h11.RemoteProtocolError as exc:
                if not got_any:
                    raise _StaleConnection() from exc
                raise HttpError("protocol", _protocol_text(exc)) from None
            if ev is h11.NEED_DATA:
                try:
                    chunk = await conn.reader.read(65536)
                except ConnectionError as exc:
                    if not got_any:
                        raise _StaleConnection() from exc
                    raise HttpError("protocol", "connection reset inside the answer") from None
                if chunk:
                    got_any = True
                    fed += len(chunk)
                elif not got_any:
                    raise _StaleConnection()
                hc.receive_data(chunk)  # b"" tells h11 the peer closed
                continue
            if isinstance(ev, h11.InformationalResponse):
                continue  # 100 Continue, 103 Early Hints: the answer comes after
            if isinstance(ev, h11.Response):
                # h11 bounds a head while it is incomplete; this bounds a complete one too
                if fed - len(hc.trailing_data[0]) > HEADER_LIMIT:
                    raise HttpError("protocol", f"response head over {HEADER_LIMIT} bytes")
                status = ev.status_code
                for k, v in ev.headers:
                    key, value = k.decode("latin-1"), v.decode("latin-1")
                    headers[key] = f"{headers[key]}, {value}" if key in headers else value
                length = headers.get("content-length", "")
                if length.isdigit() and int(length) > max_bytes:
                    raise HttpError("too_large", f"body of {length} bytes is over {max_bytes}",
                                    status)
            elif isinstance(ev, h11.Data):
                data += ev.data
                if len(data) > max_bytes:
                    raise HttpError("too_large", f"body over {max_bytes} bytes", status)
                if on_data is not None and 200 <= status < 300:
                    on_data(bytes(ev.data))
            elif isinstance(ev, h11.EndOfMessage):
                break
            elif isinstance(ev, h11.ConnectionClosed):
                if not status:
                    raise _StaleConnection()
                raise HttpError("protocol", "connection closed inside the body")
        if hc.our_state is h11.DONE and hc.their_state is h11.DONE:
            hc.start_next_cycle()
            self._release(origin, conn)
        else:  # Connection: close, HTTP/1.0, a body that ran to EOF: not reusable
            conn.close()
        return Response(status, headers, bytes(data))

    def _release(self, origin: _Origin, conn: _Conn) -> None:
        idle = self._idle.setdefault(origin, deque())
        # a request that was in flight when the client closed must not park a socket
        if self._closed or len(idle) >= self._idle_max:
            conn.close()
        else:
            conn.idle_since = self._monotonic()
            idle.append(conn)

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            while idle:
                idle.pop().close()
        self._idle.clear()


class _StaleConnection(Exception):
    """The connection died before any byte of an answer."""


def _protocol_text(exc: h11.RemoteProtocolError) -> str:
    text = str(exc) or type(exc).__name__
    if "Content-Length" in text:
        return f"malformed answer: {text} (RFC 9112 §6.3: refused)"
    return f"malformed answer: {text}"
