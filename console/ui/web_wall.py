"""``pod-console wall --web [HOST:]PORT``: the read-only wall in a browser.

Served by ``textual-serve`` (the Textual project's own server): each browser session runs
its own ``pod-console wall`` process, whose output the page draws. What is added here is
what a wall on a network needs and textual-serve leaves to its user:

* **Loopback unless asked.** Another address needs ``--allow-remote`` and then a token
  (``--token-file``): the page and its websocket answer 401 without it, before any app
  process is started. The token is compared in constant time. A browser that opens the
  page with ``?token=…`` gets a session cookie (a random value, never the token:
  HttpOnly, same-site, ``Secure`` behind https) and a redirect to the same page without
  the query, so the token stays out of the history, of every Referer (also
  ``Referrer-Policy: no-referrer``) and of the access log, which never logs a query.
* **Same origin only.** A websocket whose ``Origin`` is not the page's own (the served
  host, or ``--public-url``) is refused with 403, token or not: a page of another site
  must not read the wall or use up its sessions through a visitor's browser.
* **Its own names only** (DNS rebinding). The tokenless wall answers 403 to a ``Host``
  that is not one of its names (loopback names, the bound host, ``--public-url``'s)
  and to an ``Origin`` not among them: a page whose name was made to resolve to
  127.0.0.1 is its own origin, and an Origin-equals-Host check let it in.
* **Bounded input.** A resize asks for at most 400×200 cells; a message that is not
  textual-serve's envelope is dropped.
* **A cap on sessions** (each is a process): past it the page says so (503) and no
  process starts.
* **Read-only whatever the browser sends**: the session command is ``pod-console wall``,
  whose registry refuses every dangerous operation at the sender.
* Nothing in the page carries a secret: it holds the websocket URL and static assets only.
* **One poll for many viewers.** The sessions' GETs (slots, Prometheus) go through one
  scrape relay on loopback (``web_relay.py``), which asks each URL once a refresh however
  many tabs are open: 4 tabs cost the slots 1 scrape per refresh, not 4.

Behind a reverse proxy under a path prefix, pass ``--public-url https://host/prefix``: the
page then asks for ``/prefix/ws`` and ``/prefix/static/…``, which the proxy maps back.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import secrets
import shlex
import sys
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
COOKIE = "pod_console_wall"
DEFAULT_MAX_SESSIONS = 4
MAX_COLUMNS, MAX_ROWS = 400, 200
"""A session is a process drawing that many cells: one resize to 3000×1500 pinned a core."""
MAX_COOKIES = 256
"""Session cookies remembered (oldest forgotten first): a bound, not a quota."""


def clamp_size(width: object, height: object) -> tuple[int, int]:
    """A terminal size a browser asked for, within 1..MAX (garbage: 80×24)."""
    def one(v: object, default: int, top: int) -> int:
        try:
            if not isinstance(v, int | float | str | bytes):
                return default
            n = int(v)
        except (TypeError, ValueError, OverflowError):
            return default
        return max(1, min(top, n))
    return one(width, 80, MAX_COLUMNS), one(height, 24, MAX_ROWS)


def access_logger() -> type:
    """aiohttp's access log class for the wall: remote, method, path, status, size. Never
    the query (``?token=``), the Referer or a cookie."""
    from aiohttp.abc import AbstractAccessLogger

    class WallAccessLog(AbstractAccessLogger):
        def log(self, request: Any, response: Any, time: float) -> None:
            self.logger.info('%s "%s %s" %s %s', request.remote, request.method,
                             request.path, response.status, response.body_length)

    return WallAccessLog


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL, as a browser writes it in ``Origin``."""
    from urllib.parse import urlsplit

    u = urlsplit(url)
    return f"{u.scheme}://{u.netloc}".lower()


def _host_port(host: str) -> tuple[str, int | None]:
    """A ``Host`` header as (name, port): ``[::1]:8080``, ``name:8080``, ``name``."""
    h = host.strip().lower()
    if h.startswith("["):
        name, _, rest = h[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif h.count(":") == 1:
        name, _, port = h.partition(":")
    else:
        name, port = h, ""
    try:
        return name, int(port) if port else None
    except ValueError:
        return name, -1


class WebWallError(Exception):
    """A setting that would make the web wall unsafe or unusable (said before serving)."""


def parse_listen(text: str) -> tuple[str, int]:
    """``PORT`` or ``HOST:PORT`` (``[::1]:PORT`` for IPv6) → (host, port)."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        raise WebWallError(f"--web {text!r}: expected [HOST:]PORT") from None
    if not 0 < number < 65536:
        raise WebWallError(f"--web {text!r}: port must be 1-65535")
    return host, number


def read_token(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise WebWallError(f"--token-file {path}: {exc.strerror or exc}") from None
    if len(token) < 16:
        raise WebWallError(f"--token-file {path}: the token must be at least 16 characters")
    return token


def check_exposure(host: str, allow_remote: bool, token: str | None) -> None:
    if host in LOOPBACK:
        return
    if not allow_remote:
        raise WebWallError(f"--web {host}: not a loopback address; pass --allow-remote "
                           "(and --token-file) to serve the wall beyond this machine")
    if token is None:
        raise WebWallError("--allow-remote needs --token-file: a wall on a network "
                           "answers only to its token")


def session_command(config: Path | None, refresh: float | None, rotate: float) -> str:
    """The command each browser session runs (textual-serve runs it through a shell)."""
    argv = [sys.executable, "-m", "console.cli", "wall", "--rotate", f"{rotate:g}"]
    if config is not None:
        argv += ["--config", str(config)]
    if refresh is not None:
        argv += ["--refresh", f"{refresh:g}"]
    return shlex.join(argv)


def check_library() -> None:
    """The guard below overrides textual-serve's private ``_make_app`` (to put its
    middleware on the aiohttp app) and ``_process_messages`` (to check every envelope):
    a textual-serve whose code there is not what it was written against could serve
    without them, so the wall refuses to serve (``console/ui/private_reach.py``)."""
    from console.ui.private_reach import BY_NAME, holds

    if not holds("web wall guard"):
        reach = BY_NAME["web wall guard"]
        raise WebWallError("the installed textual-serve is not the one the wall's guard "
                           f"was written for ({', '.join(reach.read.values())}): not "
                           "serving without it (console/ui/private_reach.py)")


def make_server(command: str, host: str, port: int, token: str | None, max_sessions: int,
                public_url: str | None = None, refresh_s: float | None = None) -> Any:
    """A textual-serve ``Server`` with the token and the session cap in front of it;
    ``refresh_s``: the sessions' refresh, which the scrape relay keeps each answer for
    (None: no relay, every session polls on its own)."""
    check_library()
    from aiohttp import web
    from textual_serve.server import Server

    Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

    class WallServer(Server):
        def __init__(self) -> None:
            super().__init__(command, host=host, port=port, title="pod-console wall",
                             public_url=public_url,
                             templates_path=Path(__file__).parent / "web_templates")
            self.token = token
            self.max_sessions = max_sessions
            self.sessions = 0
            self.cookies: OrderedDict[str, None] = OrderedDict()
            self.secure = self.public_url.startswith("https")
            self.relay: Any = None

        def given_token(self, request: web.Request) -> bool:
            given = request.query.get("token") or ""
            return self.token is not None and hmac.compare_digest(given.encode(),
                                                                  self.token.encode())

        def authorized(self, request: web.Request) -> bool:
            if self.token is None:
                return True
            cookie = request.cookies.get(COOKIE) or ""
            return any(hmac.compare_digest(cookie.encode(), c.encode())
                       for c in self.cookies) or self.given_token(request)

        def new_cookie(self) -> str:
            value = secrets.token_urlsafe(32)
            self.cookies[value] = None
            while len(self.cookies) > MAX_COOKIES:
                self.cookies.popitem(last=False)
            return value

        def own_names(self, request: web.Request) -> set[tuple[str, int | None]]:
            """(host name, port) the wall answers to: the loopback names and the bound
            host at the port it listens on, and ``--public-url``'s."""
            port = self.port or None
            sock = request.transport.get_extra_info("sockname") if request.transport else None
            if isinstance(sock, tuple) and len(sock) >= 2:
                port = int(sock[1])  # the port this connection came in on (port 0: chosen)
            out = {(name, port) for name in (*LOOPBACK, self.host.lower().strip("[]"))}
            u = urlsplit(self.public_url)
            if u.hostname:
                out.add((u.hostname.lower(), u.port or (443 if u.scheme == "https" else 80)))
                out.add((u.hostname.lower(), port))
            return out

        def own_host(self, request: web.Request) -> bool:
            """Whether the request's ``Host`` is one of the wall's names. DNS rebinding:
            a page of ``evil.example`` whose name then resolves to 127.0.0.1 talks to
            the wall as its own origin (Host and Origin both evil.example), so the
            tokenless wall on loopback checks Host against the names it serves under.
            With a token (a wall on a network) the token is the guard: a rebound page
            holds neither it nor the cookie, which the browser keeps for the wall's
            own name."""
            if self.token is not None:
                return True
            name, port = _host_port(request.host)
            if port is None:  # no port: the scheme's (a reverse proxy's public name)
                port = 443 if self.secure else 80
            return (name, port) in self.own_names(request)

        def same_origin(self, request: web.Request) -> bool:
            origin = request.headers.get("Origin")
            if origin is None:
                return True  # not a browser: no visitor's cookies to ride on
            u = urlsplit(origin.lower())
            port = u.port or (443 if u.scheme == "https" else 80)
            if u.hostname is not None and (u.hostname, port) in self.own_names(request):
                return origin.lower() == origin_of(origin) and (
                    self.token is not None or self.own_host(request))
            # a wall on a network: its page is the one it was asked for (the token
            # guards who asked); the tokenless one only knows its own names
            return self.token is not None and origin.lower() == (
                f"{'https' if self.secure else 'http'}://{request.host}".lower())

        def serve(self, debug: bool = False) -> None:
            # textual-serve's own serve() with aiohttp's default access log, which writes
            # the request line (the token in the query) and the Referer: same steps, a
            # log line that holds neither
            import asyncio
            import signal

            self.debug = debug
            self.initialize_logging()
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError):
                    loop.add_signal_handler(sig, self.request_exit)
            web.run_app(self._make_app(), host=self.host, port=self.port,
                        handle_signals=False, loop=loop, print=lambda *a: None,
                        access_log_class=access_logger())

        async def _process_messages(self, websocket: Any, app_service: Any) -> None:
            # textual-serve's loop, with every envelope checked and sizes clamped: the
            # browser is not trusted (a malformed message used to end the session with a
            # traceback; a huge resize pinned a core)
            from aiohttp import WSMsgType

            async for message in websocket:
                if message.type != WSMsgType.TEXT:
                    continue
                try:
                    envelope = json.loads(message.data)
                except ValueError:
                    continue
                if not isinstance(envelope, list) or not envelope:
                    continue
                kind = envelope[0]
                data = envelope[1] if len(envelope) > 1 else None
                if kind == "stdin" and isinstance(data, str):
                    await app_service.send_bytes(data.encode("utf-8"))
                elif kind == "resize" and isinstance(data, dict):
                    await app_service.set_terminal_size(
                        *clamp_size(data.get("width"), data.get("height")))
                elif kind == "ping":
                    await websocket.send_json(["pong", data])
                elif kind == "blur":
                    await app_service.blur()
                elif kind == "focus":
                    await app_service.focus()

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()

            @web.middleware
            async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
                try:
                    response = await checked(request, handler)
                except web.HTTPException as exc:  # a redirect, or textual-serve's 404
                    exc.headers["Referrer-Policy"] = "no-referrer"
                    raise
                response.headers["Referrer-Policy"] = "no-referrer"
                return response

            async def checked(request: web.Request, handler: Handler) -> web.StreamResponse:
                if not self.own_host(request):
                    return web.Response(status=403,
                                        text="pod-console wall: not a name of this wall\n")
                if request.path.startswith("/static/"):
                    return await handler(request)  # the page's scripts: public code
                if not self.same_origin(request):
                    return web.Response(status=403,
                                        text="pod-console wall: another site's page\n")
                if not self.authorized(request):
                    return web.Response(status=401, text="pod-console wall: token required\n")
                if self.token is not None and "token" in request.query:
                    # the token buys a session cookie, then the same page without it
                    query = {k: v for k, v in request.query.items() if k != "token"}
                    clean = request.rel_url.with_query(query)
                    redirect = web.HTTPFound(location=str(clean))
                    if self.given_token(request):  # a wrong one next to a good cookie: none
                        redirect.set_cookie(COOKIE, self.new_cookie(), httponly=True,
                                            samesite="Strict", path="/", secure=self.secure)
                    raise redirect
                if self.sessions >= self.max_sessions:
                    return web.Response(
                        status=503, content_type="text/html",
                        text=f"<h1>pod-console wall</h1><p>All {self.max_sessions} wall "
                             "sessions are in use. Close one, or raise --max-sessions.</p>")
                return await handler(request)

            app.middlewares.append(guard)
            return app

        async def on_startup(self, app: web.Application) -> None:
            if refresh_s is not None:
                import os

                from console.ui.web_relay import ScrapeRelay, max_age_for

                self.relay = ScrapeRelay(max_age_for(refresh_s))
                await self.relay.start()
                os.environ.update(self.relay.environ())  # every session started from now
            where = self.public_url
            print(f"pod-console wall (read-only) on {where}"
                  + (" — token required" if self.token else ""), flush=True)

        async def on_shutdown(self, app: web.Application) -> None:
            await super().on_shutdown(app)
            if self.relay is not None:
                await self.relay.aclose()

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            # the first size comes in the query: clamped like every later resize
            w, h = clamp_size(request.query.get("width", "80"), request.query.get("height", "24"))
            request = request.clone(rel_url=request.rel_url.update_query(width=str(w),
                                                                         height=str(h)))
            self.sessions += 1
            try:
                return await super().handle_websocket(request)
            finally:
                self.sessions -= 1

    return WallServer()
