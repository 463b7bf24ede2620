"""The smoke test against servers that misbehave: each failure lands on the check it
belongs to, with its evidence, and nothing raises or hangs past its timeout."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator

import pytest

from console.operations.smoke import UNKNOWN_MODEL, SmokePlan, run_smoke
from console.sources.collect.http import HttpClient


class Behaviour:
    users: list[str]
    """The ``user`` of every chat request, as the gateway's trace callback would see it."""
    chat_status = 200
    chat_body: bytes | None = None
    stream_done = True
    stream_content = "OK"
    unknown_status = 404
    unknown_hang_s = 0.0
    key: str | None = None
    """The only key accepted (None: any); a wrong one gets LiteLLM's 401."""
    models: list[str] = ["tiny", "tiny-latest"]
    empty_answers = 0
    """How many of the next plain chat answers come back 200 and empty."""
    empty_streams = 0
    """How many of the next streamed answers come back 200 and empty."""


def _server(b: Behaviour) -> http.server.ThreadingHTTPServer:
    class H(http.server.BaseHTTPRequestHandler):
        def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _refused(self) -> bool:
            if b.key is None or self.headers.get("Authorization") == f"Bearer {b.key}":
                return False
            self._send(401, b'{"error": {"message": "Authentication Error, Invalid proxy '
                            b'server token passed.", "type": "auth_error", "code": "401"}}')
            return True

        def do_GET(self) -> None:
            if self._refused():
                return
            self._send(200, json.dumps({"data": [{"id": m} for m in b.models]}).encode())

        def do_POST(self) -> None:
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self._refused():
                return
            b.users.append(req.get("user"))
            if req["model"] == UNKNOWN_MODEL:
                time.sleep(b.unknown_hang_s)
                self._send(b.unknown_status, b'{"error": {"message": "no such model"}}')
                return
            if b.chat_status != 200:
                self._send(b.chat_status, b'{"error": {"message": "upstream down"}}')
                return
            if req.get("stream"):
                empty = b.empty_streams > 0
                b.empty_streams -= empty
                content = "" if empty else b.stream_content
                chunks = [{"choices": [{"delta": {"content": content}}]}]
                body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
                if b.stream_done:
                    body += "data: [DONE]\n\n"
                self._send(200, body.encode(), "text/event-stream")
                return
            empty = b.empty_answers > 0
            b.empty_answers -= empty
            self._send(200, b.chat_body or json.dumps(
                {"choices": [{"message": {"content": "" if empty else "OK"}}]}).encode())

        def log_message(self, *a) -> None:
            """Quiet."""

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    srv.handle_error = lambda *a: None  # type: ignore[method-assign]  # a client gone mid-hang
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture
def gateway() -> Iterator[tuple[Behaviour, str]]:
    b = Behaviour()
    b.users = []
    srv = _server(b)
    yield b, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def _plan(url: str, **kw) -> SmokePlan:
    return SmokePlan(served={"tiny": url}, slots={"TINY": "tiny"},
                     aliases=kw.pop("aliases", {"tiny-latest": "tiny"}), gateway_url=url,
                     timeout_s=kw.pop("timeout_s", 5.0), **kw)


async def _run(plan: SmokePlan) -> dict[str, tuple[bool | None, str]]:
    client = HttpClient()
    try:
        report = await run_smoke(plan, client)
    finally:
        await client.aclose()
    assert [c.name for c in report.checks] == [
        "models listed", "aliases listed", "chat", "streaming", "aliases answer",
        "unknown model", "targets up", "trace sink"]
    return {c.name: (c.ok, c.evidence) for c in report.checks}


async def test_a_healthy_gateway_passes_and_says_what_it_skipped(gateway) -> None:
    _, url = gateway
    got = await _run(_plan(url))
    assert {k for k, (ok, _) in got.items() if ok} == {
        "models listed", "aliases listed", "chat", "streaming", "aliases answer",
        "unknown model"}
    assert got["targets up"] == (None, "no prometheus_url configured")
    assert got["trace sink"] == (None, "no trace sink configured")


async def test_a_gateway_that_500s_fails_chat_streaming_and_the_4xx_check(gateway) -> None:
    b, url = gateway
    b.chat_status = 500
    b.unknown_status = 500
    got = await _run(_plan(url))
    assert got["models listed"][0] is True
    assert got["chat"][0] is False and "HTTP 500" in got["chat"][1]
    assert got["streaming"] == (False, 'tiny: HTTP 500 {"error": {"message": "upstream down"}}')
    assert got["unknown model"][0] is False and "want a 4xx" in got["unknown model"][1]


async def test_an_unknown_model_that_hangs_is_a_failure_not_a_hang(gateway) -> None:
    b, url = gateway
    b.unknown_hang_s = 4.0
    t0 = time.monotonic()
    got = await _run(_plan(url, timeout_s=1.0))
    assert got["unknown model"] == (
        False, "gateway: no answer: a request for an unknown model hangs")
    assert time.monotonic() - t0 < 20


async def test_garbage_and_a_stream_without_done(gateway) -> None:
    b, url = gateway
    b.chat_body = b"<html>502 from a proxy</html>"
    b.stream_done = False
    got = await _run(_plan(url))
    assert got["chat"] == (False, "tiny: HTTP 200 but not JSON")
    assert got["streaming"][0] is False and "never said [DONE]" in got["streaming"][1]
    b.stream_done, b.stream_content = True, ""
    got = await _run(_plan(url))
    assert got["streaming"] == (False, "tiny: 1 chunks, no content (twice)")


async def test_one_empty_answer_is_asked_again_and_two_fail(gateway) -> None:
    """A sampled answer may end at its first token; the check asks once more, and says so.
    An answer empty twice in a row fails."""
    b, url = gateway
    b.empty_answers = 1
    got = await _run(_plan(url, aliases={}))
    assert got["chat"] == (True, "tiny: 'OK' (asked again: the first was empty)")
    assert got["streaming"] == (True, "tiny: 1 chunks, 'OK'")
    b.empty_streams = 1
    got = await _run(_plan(url, aliases={}))
    assert got["chat"] == (True, "tiny: 'OK'")
    assert got["streaming"] == (True, "tiny: 1 chunks, 'OK' (asked again: the first was empty)")
    b.empty_answers = 2
    asked = len(b.users)
    got = await _run(_plan(url, aliases={}))
    assert got["chat"] == (False, "tiny: no content in choices[0].message (twice)")
    assert got["streaming"][0] is True
    assert len(b.users) - asked == 2 + 1 + 1  # chat twice, streaming once, unknown model


async def test_a_removed_alias_fails_both_alias_checks(gateway) -> None:
    b, url = gateway
    b.models = ["tiny"]
    got = await _run(_plan(url))
    assert got["aliases listed"] == (False, "missing from /v1/models: tiny-latest")
    assert got["models listed"][0] is True


async def test_nothing_listening_fails_every_request_check() -> None:
    got = await _run(_plan("http://127.0.0.1:9", timeout_s=2.0))
    assert got["models listed"] == (False, "gateway: /v1/models answered connection refused")
    for name in ("chat", "streaming"):
        assert got[name] == (False, "tiny: connection refused"), (name, got[name])


async def test_a_wrong_key_shows_the_401_and_the_4xx_check_is_not_run(gateway) -> None:
    """The refusal is the evidence; the unknown-model check's premise (an accepted key)
    failed, so it is "not run", never a pass on the 401 the auth failure caused."""
    b, url = gateway
    b.key = "sk-right"
    got = await _run(_plan(url, api_key="sk-wrong"))
    ok, ev = got["models listed"]
    assert ok is False and ev.startswith("gateway: /v1/models answered HTTP 401 ")
    assert "Authentication Error" in ev
    assert got["chat"][0] is False and "HTTP 401" in got["chat"][1]
    ok, ev = got["unknown model"]
    assert ok is None and ev.startswith("gateway: not run: the key was refused (HTTP 401")
    # the right key: everything passes, the 4xx check included
    got = await _run(_plan(url, api_key="sk-right"))
    assert got["unknown model"] == (True, "gateway: HTTP 404")
    assert got["models listed"][0] is True


async def test_direct_mode_names_each_slot_and_checks_the_live_one(gateway) -> None:
    """Two slots, no gateway, the first one dead: its failure names it, and the live
    slot is still checked (and passes on its own)."""
    b, url = gateway
    b.models = ["live"]
    plan = SmokePlan(served={"dead": "http://127.0.0.1:9", "live": url},
                     slots={"A": "dead", "B": "live"}, timeout_s=3.0)
    got = await _run(plan)
    ok, ev = got["models listed"]
    assert ok is False
    assert "A (dead): /v1/models answered connection refused" in ev
    assert "B (live)" not in ev  # the live one lists its model
    ok, ev = got["chat"]
    assert ok is False
    assert ev == "A (dead): connection refused; B (live): 'OK'"
    ok, ev = got["unknown model"]
    assert ok is False and "A (dead): connection refused" in ev and "B (live): HTTP 404" in ev


# -- the trace sink: Langfuse's public API ---------------------------------------------------

class Langfuse:
    """Langfuse's ``GET /api/public/traces``: basic auth with the project's key pair; a
    trace is listed ``ingest_s`` after its request reached the gateway (ingestion is
    batched and asynchronous)."""

    ingest_s = 0.5
    keys = ("pk-lf-test", "sk-lf-test")

    def __init__(self, gateway: Behaviour) -> None:
        self.gateway = gateway
        self.seen: dict[str, float] = {}
        self.queries: list[str] = []

    def traces(self, user: str) -> list[dict]:
        for u in self.gateway.users:
            self.seen.setdefault(u, time.monotonic())
        t = self.seen.get(user)
        if t is None or time.monotonic() - t < self.ingest_s:
            return []
        return [{"id": f"trace-{user[-6:]}", "userId": user, "name": "litellm-acompletion",
                 "timestamp": "2026-11-30T10:00:00.000Z"}]


def _langfuse(lf: Langfuse) -> http.server.ThreadingHTTPServer:
    import base64
    import urllib.parse

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            u = urllib.parse.urlsplit(self.path)
            want = "Basic " + base64.b64encode(":".join(lf.keys).encode()).decode()
            if self.headers.get("Authorization") != want:
                code, body = 401, {"message": "Invalid credentials"}
            elif u.path != "/api/public/traces":
                code, body = 404, {"message": "not found"}
            else:
                q = urllib.parse.parse_qs(u.query)
                lf.queries.append(q["userId"][0])
                data = lf.traces(q["userId"][0])
                code, body = 200, {"data": data, "meta": {"page": 1, "limit": 1,
                                                          "totalItems": len(data),
                                                          "totalPages": len(data)}}
            raw = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *a) -> None:
            """Quiet."""

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


async def _traced(url: str, lf_url: str, keys: tuple[str, str], wait_s: float
                  ) -> tuple[bool | None, str]:
    from console.operations.smoke import langfuse_check

    client = HttpClient()
    try:
        plan = _plan(url, trace_check=langfuse_check(lf_url, *keys, client, wait_s=wait_s,
                                                     every_s=0.2))
        report = await run_smoke(plan, client)
    finally:
        await client.aclose()
    [c] = [c for c in report.checks if c.name == "trace sink"]
    return c.ok, c.evidence


async def test_the_trace_sink_lists_the_marked_request(gateway) -> None:
    b, url = gateway
    lf = Langfuse(b)
    srv = _langfuse(lf)
    try:
        lf_url = f"http://127.0.0.1:{srv.server_address[1]}"
        ok, ev = await _traced(url, lf_url, lf.keys, wait_s=10)
        assert ok is True and ev.startswith("trace trace-") and "pod-console-smoke-" in ev
        marker = lf.queries[-1]
        assert marker.startswith("pod-console-smoke-") and marker in b.users
        assert len(lf.queries) >= 2  # listed only after its ingestion delay
        # a key pair Langfuse refuses
        ok, ev = await _traced(url, lf_url, ("pk-lf-test", "wrong"), wait_s=5)
        assert (ok, ev) == (False, "Langfuse refused the key pair (HTTP 401): "
                                   "LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY")
        # a gateway whose callback is off: the trace never comes
        lf.ingest_s = 3600
        t0 = time.monotonic()
        ok, ev = await _traced(url, lf_url, lf.keys, wait_s=1.5)
        assert ok is False and ev.endswith("after 2 s (no trace yet): is the gateway's "
                                           "langfuse callback on?")
        assert time.monotonic() - t0 < 15
    finally:
        srv.shutdown()
    # nothing listening
    ok, ev = await _traced(url, "http://127.0.0.1:9", lf.keys, wait_s=0.5)
    assert ok is False and "(connection refused)" in ev


async def test_the_trace_sink_is_skipped_without_a_gateway() -> None:
    async def never(marker: str) -> tuple[bool, str]:
        raise AssertionError("not asked")

    plan = SmokePlan(served={"tiny": "http://127.0.0.1:9"}, slots={}, trace_check=never,
                     timeout_s=1.0)
    client = HttpClient()
    try:
        report = await run_smoke(plan, client)
    finally:
        await client.aclose()
    [c] = [c for c in report.checks if c.name == "trace sink"]
    assert c.ok is None and "fed by the gateway" in c.evidence
