"""``pod-console wall --web [HOST:]PORT``: the read-only wall in a browser.

Served by ``textual-serve`` (the Textual project's own server): each browser session runs
its own ``pod-console wall`` process, whose output the page draws. What is added here is
what a wall on a network needs and textual-serve leaves to its user:

* **Loopback unless asked.** Another address needs ``--allow-remote`` and then a token
  (``--token-file``): the page and its websocket answer 401 without it, before any app
  process is started. The token is compared in constant time; a browser that opened the
  page with ``?token=…`` keeps it in an HttpOnly, same-site cookie for the websocket.
* **A cap on sessions** (each is a process): past it the page says so (503) and no
  process starts.
* **Read-only whatever the browser sends**: the session command is ``pod-console wall``,
  whose registry refuses every dangerous operation at the sender.
* Nothing in the page carries a secret: it holds the websocket URL and static assets only.

Behind a reverse proxy under a path prefix, pass ``--public-url https://host/prefix``: the
page then asks for ``/prefix/ws`` and ``/prefix/static/…``, which the proxy maps back.
"""

from __future__ import annotations

import hmac
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
COOKIE = "pod_console_wall"
DEFAULT_MAX_SESSIONS = 4


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


def make_server(command: str, host: str, port: int, token: str | None, max_sessions: int,
                public_url: str | None = None) -> Any:
    """A textual-serve ``Server`` with the token and the session cap in front of it."""
    from aiohttp import web
    from textual_serve.server import Server

    Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

    class WallServer(Server):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(command, host=host, port=port, title="pod-console wall",
                             public_url=public_url,
                             templates_path=Path(__file__).parent / "web_templates")
            self.token = token
            self.max_sessions = max_sessions
            self.sessions = 0

        def authorized(self, request: web.Request) -> bool:
            if self.token is None:
                return True
            given = request.query.get("token") or request.cookies.get(COOKIE) or ""
            return hmac.compare_digest(given.encode(), self.token.encode())

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()

            @web.middleware
            async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
                if request.path.startswith("/static/"):
                    return await handler(request)  # the page's scripts: public code
                if not self.authorized(request):
                    return web.Response(status=401, text="pod-console wall: token required\n")
                if self.sessions >= self.max_sessions:
                    return web.Response(
                        status=503, content_type="text/html",
                        text=f"<h1>pod-console wall</h1><p>All {self.max_sessions} wall "
                             "sessions are in use. Close one, or raise --max-sessions.</p>")
                response = await handler(request)
                if self.token is not None and request.query.get("token"):
                    response.set_cookie(COOKIE, self.token, httponly=True, samesite="Strict",
                                        path="/")
                return response

            app.middlewares.append(guard)
            return app

        async def on_startup(self, app: web.Application) -> None:
            where = self.public_url
            print(f"pod-console wall (read-only) on {where}"
                  + (" — token required" if self.token else ""), flush=True)

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            self.sessions += 1
            try:
                return await super().handle_websocket(request)
            finally:
                self.sessions -= 1

    return WallServer()
