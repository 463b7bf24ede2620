"""An HTTP receiver on loopback for webhooks (the console's own, Alertmanager's): every
POST's path and JSON body, in order, answered as the test scripts it (a status per post,
a redirect, or holding the request open until released)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class HookReceiver:
    def __init__(self) -> None:
        self.posts: list[tuple[str, Any]] = []
        """(path, body) of every POST answered 2xx, in the order they arrived."""
        self.tries: list[tuple[str, Any]] = []
        """Every POST, whatever it was answered."""
        self.answers: list[int] = []
        """The status of each next POST (popped first); 200 once empty."""
        self.hang = 0
        """How many of the next POSTs are taken and never answered (a receiver that hangs;
        they are released unanswered at :meth:`close`)."""
        self.closing = threading.Event()
        self.cond = threading.Condition(threading.RLock())
        rx = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                data = json.loads(body) if body else None
                with rx.cond:
                    rx.tries.append((self.path, data))
                    rx.cond.notify_all()
                    hang = rx.hang > 0
                    rx.hang -= hang
                if hang:
                    rx.closing.wait()
                    return
                with rx.cond:
                    status = rx.answers.pop(0) if rx.answers else 200
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", "/redirected")
                self.send_header("Content-Length", "0")
                self.end_headers()
                if 200 <= status < 300:
                    with rx.cond:
                        rx.posts.append((self.path, data))
                        rx.cond.notify_all()

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()

    def texts(self) -> list[str]:
        """The console webhook's delivered messages (their ``text``), in order."""
        with self.cond:
            return [b["text"] for _, b in self.posts if isinstance(b, dict) and "text" in b]

    def wait(self, cond: Callable[[], bool], what: str, limit_s: float = 30.0) -> None:
        """Block until ``cond`` holds (checked at every POST), or fail naming ``what``."""
        deadline = time.monotonic() + limit_s
        with self.cond:
            while not cond():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}: {self.tries}")
                self.cond.wait(min(left, 0.2))
