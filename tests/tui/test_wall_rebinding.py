"""DNS rebinding in a real Chromium (issue 44): ``evil.example`` resolved to 127.0.0.1
(``--host-resolver-rules``) is what a rebinding attack achieves. The tokenless wall on
loopback refuses its page and its websocket; its own name still opens it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS
from tests.support.procs import free_port


class _Wall:
    """The wall's server (its guard; the session command is ``false``) on its own loop."""

    def __init__(self) -> None:
        from aiohttp import web

        from console.ui.web_wall import make_server

        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.server = make_server("false", "127.0.0.1", self.port, None, 2)

        async def start() -> None:
            self.runner = web.AppRunner(await self.server._make_app())
            await self.runner.setup()
            await web.TCPSite(self.runner, "127.0.0.1", self.port).start()
            self.ready.set()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(start())
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert self.ready.wait(30)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


OPEN_WS = """url => new Promise(done => {
  const ws = new WebSocket(url);
  ws.onopen = () => { ws.close(); done("open"); };
  ws.onerror = () => done("refused");
})"""


def test_a_rebound_name_gets_neither_the_page_nor_the_websocket(tmp_path: Path) -> None:
    try:
        from playwright import sync_api
    except ImportError:
        sync_api = None  # type: ignore[assignment]
    if sync_api is None or not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} or playwright missing")
    wall = _Wall()
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM,
                args=[*CHROMIUM_ARGS, "--host-resolver-rules=MAP evil.example 127.0.0.1"])
            try:
                page = browser.new_page()
                evil = f"evil.example:{wall.port}"
                r = page.goto(f"http://{evil}/")
                assert r is not None and r.status == 403, r and r.status
                # the page's own origin (evil.example) opening the wall's websocket: the
                # promise settles when the handshake is answered
                got = page.evaluate(OPEN_WS, f"ws://{evil}/ws?width=80&height=24")
                assert got == "refused"
                assert wall.server.sessions == 0
                own = page.goto(f"http://127.0.0.1:{wall.port}/")
                assert own is not None and own.status == 200
            finally:
                browser.close()
    finally:
        wall.close()
