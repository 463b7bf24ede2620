"""One poll for many viewers: the web wall's scrape relay.

Each browser tab of ``pod-console wall --web`` is a ``pod-console wall`` process of its own
(textual-serve's model), with its own session and poller. Left alone, N tabs would scrape
every slot (and ask Prometheus) N times a refresh. The wall server runs this relay on
loopback and gives its sessions its address (``RELAY_ENV``): their GETs go through it, and
it asks each URL upstream at most once per ``max_age_s`` (a little under the refresh),
answering every session that asks meanwhile from that one answer — a failure included
(``connection refused`` is shown the same in every tab, from one refused connect).

Concurrent asks share one request in flight. The relay answers only to its token (a
random value, in the sessions' environment, never on a command line) and only on
loopback; it fetches http(s) URLs only, GET only, with the project's own HTTP client.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from console.sources.collect.http import (
    DEFAULT_MAX_BYTES,
    RELAY_ENV,
    RELAY_ERROR_HEADER,
    RELAY_TOKEN_HEADER,
    HttpClient,
    HttpError,
    Response,
)

if TYPE_CHECKING:
    from aiohttp import web

MAX_ENTRIES = 512
"""Answers kept (the oldest go first): a deployment has a handful of URLs."""
MAX_TIMEOUT_S = 30.0
FORWARDED = ("authorization", "accept")
"""Request headers a session may have sent upstream (an API key for ``/v1/models``)."""


def max_age_for(refresh_s: float) -> float:
    """How long one answer serves every session: a little under the refresh, so each
    refresh asks once (a session a refresh later gets a new answer)."""
    return max(0.2, refresh_s * 0.9)


Answer = Response | HttpError


class ScrapeRelay:
    """See the module docstring. ``clock``: monotonic seconds (tests move it)."""

    def __init__(self, max_age_s: float, *, clock: Callable[[], float] = time.monotonic,
                 client: HttpClient | None = None) -> None:
        self.max_age_s = max_age_s
        self.clock = clock
        self.token = secrets.token_urlsafe(24)
        self.client = client or HttpClient(relay=None)  # never through itself
        self._cache: dict[tuple[str, str], tuple[float, asyncio.Task[Answer]]] = {}
        self.asked = 0
        """Requests the sessions made."""
        self.upstream = 0
        """Requests made upstream (what the slots see)."""
        self.url: str | None = None
        self._runner: web.AppRunner | None = None

    def environ(self) -> dict[str, str]:
        """What a session's environment needs to use this relay."""
        assert self.url is not None, "start() first"
        return {RELAY_ENV: f"{self.url} {self.token}"}

    async def fetch(self, url: str, headers: dict[str, str], timeout: float) -> Answer:
        """The answer for ``url`` (an answer of this ``max_age_s``, or a new one)."""
        self.asked += 1
        key = (url, "\n".join(f"{k}:{v}" for k, v in sorted(headers.items())))
        now = self.clock()
        hit = self._cache.get(key)
        if hit is None or not 0.0 <= now - hit[0] < self.max_age_s:
            task = asyncio.get_running_loop().create_task(self._upstream(url, headers,
                                                                         timeout))
            self._cache[key] = hit = (now, task)
            if len(self._cache) > MAX_ENTRIES:
                for k in sorted(self._cache, key=lambda k: self._cache[k][0])[
                        :len(self._cache) - MAX_ENTRIES]:
                    del self._cache[k]
        return await asyncio.shield(hit[1])  # one asker's cancel ends no one else's wait

    async def _upstream(self, url: str, headers: dict[str, str], timeout: float) -> Answer:
        self.upstream += 1
        try:
            return await self.client.get(url, timeout=timeout, headers=headers,
                                         max_bytes=DEFAULT_MAX_BYTES)
        except HttpError as exc:
            return exc
        except Exception as exc:  # an answer for every asker, never an unread exception
            return HttpError("protocol", f"{type(exc).__name__}: {exc}")

    async def handle(self, request: Any) -> Any:
        from aiohttp import web

        given = request.headers.get(RELAY_TOKEN_HEADER, "")
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return web.Response(status=403, text="pod-console relay: not a wall session\n")
        url = request.query.get("url", "")
        if not url.startswith(("http://", "https://")):
            return web.Response(status=400, text="pod-console relay: an http(s) URL only\n")
        try:
            timeout = min(MAX_TIMEOUT_S, max(0.1, float(request.headers.get(
                "X-Relay-Timeout", "5"))))
        except ValueError:
            timeout = 5.0
        prefix = "x-relay-h-"
        headers = {k[len(prefix):]: v for k, v in request.headers.items()
                   if k.lower().startswith(prefix) and k[len(prefix):].lower() in FORWARDED}
        answer = await self.fetch(url, headers, timeout)
        if isinstance(answer, HttpError):
            return web.Response(status=502, text=str(answer),
                                headers={RELAY_ERROR_HEADER: answer.kind})
        ctype = answer.headers.get("content-type")
        out = web.Response(status=answer.status_code, body=answer.content)
        if ctype:
            out.headers["Content-Type"] = ctype
        return out

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on loopback (a free port); the relay's URL."""
        from aiohttp import web

        app = web.Application()
        app.router.add_get("/get", self.handle)
        runner = self._runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        bound = runner.addresses[0][1]  # (host, port[, …]) of the socket it bound
        self.url = f"http://{host}:{bound}"
        return self.url

    async def aclose(self) -> None:
        for _, task in self._cache.values():
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
        with contextlib.suppress(Exception):
            await self.client.aclose()
