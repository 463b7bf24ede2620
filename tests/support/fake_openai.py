"""A small OpenAI-compatible backend on loopback, for the real LiteLLM proxy to route to.

It answers ``/v1/chat/completions`` with a fixed reply and real ``usage`` counts (so
LiteLLM's token and spend counters move), and can be told to fail (HTTP 500) until told
otherwise: the deployment LiteLLM puts in cooldown. Runs in a thread of the test."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class FakeOpenAI:
    name: str
    failing: bool = False
    served: int = 0
    failed: int = 0
    _server: ThreadingHTTPServer | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        backend = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [
                    {"id": backend.name, "object": "model"}]})

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                req = json.loads(self.rfile.read(n) or b"{}")
                with backend._lock:
                    failing = backend.failing
                    if failing:
                        backend.failed += 1
                    else:
                        backend.served += 1
                if failing:
                    self._send(500, {"error": {"message": f"{backend.name} is failing",
                                               "type": "server_error"}})
                    return
                prompt = sum(len(str(m.get("content", "")).split())
                             for m in req.get("messages", [])) + 3
                completion = int(req.get("max_tokens") or 4)
                self._send(200, {
                    "id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
                    "model": req.get("model", backend.name),
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                        "role": "assistant", "content": " ".join(["ok"] * completion)}}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                              "total_tokens": prompt + completion}})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True,
                         name=f"fake-openai-{self.name}").start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
