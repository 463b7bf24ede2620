"""One poll for many viewers, end to end: a real ``pod-console wall --web`` server with
four browser sessions open (four real ``pod-console wall`` processes, textual-serve's
websocket protocol) against slots that count their scrapes. Each slot sees about one
``/metrics`` scrape per refresh — at most one per 0.9 refresh, the relay's answer age —
not four."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import aiohttp

from tests.conftest import FIXTURES, PROFILES, REPO
from tests.support.procs import free_port
from tests.tui.test_web_wall import _read_until

REFRESH_S = 1.0
TABS = 4
WINDOW_S = 8.0
METRICS = (FIXTURES / "vllm-0.32.0-cpu" / "ngram" / "metrics-specdecode-idle.txt").read_text()


class CountingSlots:
    """Two slots on loopback answering like vLLM's /health, /v1/models and /metrics,
    counting each request per (port, path)."""

    def __init__(self, models: dict[str, str]) -> None:
        self.hits: Counter[tuple[int, str]] = Counter()
        self.lock = threading.Lock()
        self.servers: dict[str, ThreadingHTTPServer] = {}
        for slot, model in models.items():
            self.servers[slot] = self._serve(model)

    def _serve(self, model: str) -> ThreadingHTTPServer:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                port = self.server.server_address[1]
                with outer.lock:
                    outer.hits[(port, self.path)] += 1
                if self.path == "/metrics":
                    body = METRICS.replace("tiny-main", model).encode()
                elif self.path == "/v1/models":
                    body = b'{"data": [{"id": "%s"}]}' % model.encode()
                elif self.path == "/health":
                    body = b""
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return None

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def port(self, slot: str) -> int:
        return self.servers[slot].server_address[1]

    def scrapes(self, slot: str) -> int:
        with self.lock:
            return self.hits[(self.port(slot), "/metrics")]

    def close(self) -> None:
        for s in self.servers.values():
            s.shutdown()
            s.server_close()


def test_four_web_wall_tabs_cost_each_slot_one_scrape_per_refresh(tmp_path: Path) -> None:
    source = (PROFILES / "10-rtx6000-2x.yaml").read_text()
    models = dict(re.findall(r"^  (\w+):\n    served_model_name: (\S+)", source, re.M))
    assert set(models) == {"FLASH", "Q27"}, models
    slots = CountingSlots(models)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    shutil.copytree(PROFILES / "patches", profiles / "patches")
    text = source
    for slot, real in (("FLASH", 8881), ("Q27", 8882)):
        text = text.replace(f"port: {real}", f"port: {slots.port(slot)}")
    (profiles / "10-rtx6000-2x.yaml").write_text(text)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {profiles}\nstate_dir: {tmp_path / 'state'}\n"
                   "pod:\n  host: 127.0.0.1\n")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNPOD_", "POD_CONSOLE"))}
    env["PYTHONPATH"] = str(REPO)
    server = subprocess.Popen(
        [sys.executable, "-m", "console.cli", "wall", "--web", f"127.0.0.1:{port}",
         "--max-sessions", str(TABS), "--config", str(cfg), "--refresh", f"{REFRESH_S:g}"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, server.stdout.read() if server.stdout else ""
                time.sleep(0.2)

        async def scenario() -> tuple[int, int, float]:
            async with aiohttp.ClientSession() as http:
                tabs = [await http.ws_connect(f"http://127.0.0.1:{port}/ws?width=120&height=40")
                        for _ in range(TABS)]
                # every tab up, showing both slots UP (numbers come from the scrapes)
                for ws in tabs:
                    screen = await _read_until(ws, ("READ-ONLY", "FLASH", "Q27", "UP"), 180)
                    assert "FLASH" in screen and "UP" in screen, screen[-3000:]

                async def drain(ws: aiohttp.ClientWebSocketResponse) -> None:
                    while not ws.closed:  # keep reading: a session blocked on output stalls
                        try:
                            await ws.receive(timeout=1)
                        except TimeoutError:
                            continue
                readers = [asyncio.create_task(drain(ws)) for ws in tabs]
                before = (slots.scrapes("FLASH"), slots.scrapes("Q27"))
                t0 = time.monotonic()
                # a rate needs a span of time, and enough scrapes in it: the window ends on
                # both, so a loaded machine (polls slower than the refresh) lengthens it
                # instead of failing it; what is asserted is the relation of scrapes to
                # the window's length, not a count in a fixed one
                least = WINDOW_S / REFRESH_S / 3
                while time.monotonic() - t0 < WINDOW_S or min(
                        slots.scrapes("FLASH") - before[0],
                        slots.scrapes("Q27") - before[1]) < least:
                    assert time.monotonic() - t0 < 20 * WINDOW_S, "the slots stopped being read"
                    await asyncio.sleep(0.2)
                after = (slots.scrapes("FLASH"), slots.scrapes("Q27"))
                elapsed = time.monotonic() - t0
                for ws in tabs:
                    await ws.close()
                for r in readers:
                    r.cancel()
                return after[0] - before[0], after[1] - before[1], elapsed

        flash, q27, elapsed = asyncio.run(scenario())
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)
        slots.close()
    refreshes = elapsed / REFRESH_S
    most = elapsed / (0.9 * REFRESH_S) + 2  # the relay's answer age, and a window's edges
    print(f"{TABS} tabs, {elapsed:.1f} s: FLASH {flash}, Q27 {q27} scrapes "
          f"({refreshes:.1f} refreshes; {TABS * refreshes:.0f} without the relay)")
    for name, n in (("FLASH", flash), ("Q27", q27)):
        assert n <= most, (name, n, refreshes)  # one poll for every tab, not one per tab
