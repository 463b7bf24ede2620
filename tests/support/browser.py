"""A real headless Chromium on the web wall (Playwright drives Debian's ``chromium``).

The terminal in the page draws on a canvas, so its text is not in the DOM. What the
page draws is what its websocket delivers: every binary frame the browser received is
fed, in order, to a terminal emulator (pyte) of the size the page asked for — the same
bytes xterm.js renders. Screenshots show the pixels.

Used by the web wall's test, its benchmark and the screenshot script (screenshots/)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pyte

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("POD_CONSOLE_CHROMIUM", "/usr/bin/chromium")
# Chromium reaches for Google's services at start unless told not to; nothing here may
# leave loopback (and a closed network refuses it loudly)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-default-apps"]


def start_demo_web(port: int, state_dir: Path, log: Path, *args: str
                   ) -> subprocess.Popen[bytes]:
    """``pod-console demo --web 127.0.0.1:PORT``, as docs/demo.md runs it."""
    env = dict(os.environ, PYTHONPATH=str(REPO), POD_CONSOLE_STATE_DIR=str(state_dir))
    fh = open(log, "ab")  # noqa: SIM115 - the child owns it until it exits
    return subprocess.Popen(
        [sys.executable, "-m", "console.cli", "demo", "--web", f"127.0.0.1:{port}", *args],
        cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def stop_server(proc: subprocess.Popen[bytes], grace_s: float = 60.0) -> bool:
    """SIGTERM the server (not its group: it must stop its sessions itself); True when
    it exited within ``grace_s``. Whatever is left is then killed by process group."""
    if proc.poll() is not None:
        return True
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace_s)
        return True
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        return False


class WallPage:
    """One browser tab on the web wall, with the screen its websocket has drawn."""

    def __init__(self, browser, url: str, viewport: tuple[int, int] = (1600, 900)) -> None:
        self.origin = "{0.scheme}://{0.netloc}".format(urlparse(url))
        self.page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
        self.screen: pyte.Screen | None = None
        self.stream: pyte.ByteStream | None = None
        self.bytes_in = 0
        self.frames_in = 0
        self.blocked: list[str] = []
        self.page.route("**/*", self._only_loopback)
        self.page.on("websocket", self._on_websocket)
        self.page.goto(url)

    def _only_loopback(self, route) -> None:
        if route.request.url.startswith(self.origin):
            route.continue_()
        else:  # the page asked for another host: refused here, and remembered
            self.blocked.append(route.request.url)
            route.abort()

    def _on_websocket(self, ws) -> None:
        q = parse_qs(urlparse(ws.url).query)
        self.screen = pyte.Screen(int(q.get("width", ["80"])[0]),
                                  int(q.get("height", ["24"])[0]))
        self.stream = pyte.ByteStream(self.screen)
        ws.on("framereceived", self._received)
        ws.on("framesent", self._sent)

    def _received(self, payload: bytes | str) -> None:
        if isinstance(payload, bytes) and self.stream is not None:
            self.bytes_in += len(payload)
            self.frames_in += 1
            self.stream.feed(payload)

    def _sent(self, payload: bytes | str) -> None:
        if isinstance(payload, str) and self.screen is not None:
            msg = json.loads(payload)
            if msg[0] == "resize":
                self.screen.resize(msg[1]["height"], msg[1]["width"])

    def text(self) -> str:
        return "\n".join(self.screen.display) if self.screen is not None else ""

    def wait_for(self, cond: Callable[[str], bool], timeout_s: float) -> str:
        """Let the page run until ``cond(screen text)``; the text at that point."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.text()
            if cond(text):
                return text
            self.page.wait_for_timeout(250)  # frames are delivered while the page waits
        raise TimeoutError(f"the web wall never showed what was waited for:\n{self.text()}")


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def open_wall(browser, port: int, server: subprocess.Popen[bytes],
              timeout_s: float = 180.0) -> WallPage:
    """A tab on the web wall once the server listens (``demo --web`` starts the demo
    deployment first); the server exiting meanwhile is an error at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return WallPage(browser, f"http://127.0.0.1:{port}/")
        except Exception:  # not listening yet
            if time.monotonic() > deadline or server.poll() is not None:
                raise
            time.sleep(0.5)
