"""A loopback ``/metrics`` whose text the test sets (or renders per scrape), for a real
Prometheus to scrape: the samples it stores are then exactly the texts the direct path
reads, and a test knows which one each scrape got."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ExpositionServer:
    """Serves ``text`` (or ``render(n)`` for the n-th scrape, from 1) at ``/metrics``."""

    def __init__(self, text: str = "", render: Callable[[int], str] | None = None) -> None:
        self.text = text
        self.render = render
        self.scrapes = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                with owner._lock:
                    owner.scrapes += 1
                    body = (owner.render(owner.scrapes) if owner.render is not None
                            else owner.text).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def set(self, text: str) -> None:
        with self._lock:
            self.text = text

    def start(self) -> ExpositionServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
