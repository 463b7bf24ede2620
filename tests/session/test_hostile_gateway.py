"""A hostile LiteLLM (issue 44): its ``/metrics/`` carries terminal escapes in every label
a screen shows (``tests/fixtures/hostile/litellm_metrics_hostile.txt``), and the console
is told the gateway's URL with a password in it. Served on loopback; read by the real
collector, session, recorder, export, ``G`` screen, ``status`` and ``metrics``. No ESC,
BEL or 8-bit CSI reaches what is drawn or printed, and the password (nor the key in an
``api_base``'s query) is in nothing shown, printed or stored."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml
import zstandard
from msgspec.structs import replace

from console.config.settings import GatewaySettings
from console.session.record.export import export, secrets_of
from console.sources.collect.http import HttpClient
from tests.conftest import FIXTURES, REPO
from tests.support.hostile_fixtures import CANARY_KEY, CANARY_PASSWORD

HOSTILE = (FIXTURES / "hostile" / "litellm_metrics_hostile.txt").read_text()
CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e")
T0 = 1_800_000_000.0


class _Gateway(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/health"):
            body = b'{"status":"healthy","db":"Not connected"}'
        elif self.path == "/metrics/":
            body = HOSTILE.encode()
        else:
            self.send_response(307)
            self.send_header("Location", "/metrics/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class Serving:
    """The hostile gateway on 127.0.0.1, in a thread of its own (the commands below are
    other processes); its URL as a user would configure it, with a password."""

    def __enter__(self) -> Serving:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://admin:{CANARY_PASSWORD}@127.0.0.1:{self.port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def _clean(text: str, where: str) -> None:
    found = [c for c in CONTROLS if c in text]
    assert not found, f"{where}: {found!r} in {text[:300]!r}"
    assert CANARY_PASSWORD not in text, f"{where}: the gateway's password"
    assert CANARY_KEY not in text, f"{where}: the api_base's key"


async def test_the_g_screen_draws_no_escape_and_no_password(tmp_path: Path) -> None:
    from console.sources.collect.gateway import GatewayCollector
    from console.ui.screens.gateway import GatewayScreen
    from tests.screens import states
    from tests.screens.host import ScreenHost, settle

    with Serving() as gw:
        col = GatewayCollector(gw.url, GatewaySettings(), 300.0, 5.0)
        try:
            snap = await col.poll(T0)
        finally:
            await col.aclose()
    assert snap.live and snap.metrics_error is None, snap.metrics_error
    assert {d.model_id for d in snap.deployments} >= {"tiny-a", "tiny-b"}  # cleaned, kept
    _clean(json.dumps(snap.as_json(), ensure_ascii=False), "the snapshot")
    state = replace(states.state(), gateway=snap, now=T0)
    app = ScreenHost(lambda: GatewayScreen(state))
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        strips = app.screen._compositor.render_strips()
        text = "\n".join(s.text for s in strips)
        segs = "".join(seg.text for s in strips for seg in s)
    assert "tiny-a" in text and "alice" in text and "ops" in text
    assert f"http://***@127.0.0.1:{gw.port}" in text
    _clean(text + segs, "the G screen")
    # drawn again from a reading nobody cleaned (an older console's recording): the
    # screen is a boundary of its own
    raw = replace(snap, url=gw.url, deployments=tuple(
        replace(d, model_id=d.model_id + "\x1b]0;T\x07", group=d.group + "\x1b[2J",
                api_base=f"http://u:{CANARY_PASSWORD}@h:1/\x07") for d in snap.deployments),
        users=tuple(replace(u, name=u.name + "\x1b]52;c;eA==\x07", team="t\x9b2J")
                    for u in snap.users))
    app = ScreenHost(lambda: GatewayScreen(replace(state, gateway=raw)))
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        strips = app.screen._compositor.render_strips()
        text = "\n".join(s.text for s in strips)
        segs = "".join(seg.text for s in strips for seg in s)
    assert "tiny-a" in text and "alice" in text
    _clean(text + segs, "the G screen of a raw reading")


def _closed_port() -> int:
    """A loopback port nothing listens on (the slot is down: the gateway is the point)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(tmp: Path, url: str) -> Path:
    prof = tmp / "profiles"
    prof.mkdir()
    doc = {"gpu_type_ids": ["GPU A1"], "gpu_count": 1, "image": "sim/vllm:latest",
           "slots": {"TINY": {"served_model_name": "tiny", "hf_repo_id": "sim/a",
                              "port": _closed_port(), "gpus": [0], "gpu_util": 0.4,
                              "max_model_len": 4096}}}
    (prof / "10-test.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    cfg = tmp / "config.yaml"
    cfg.write_text(f"profiles_dir: {prof}\nstate_dir: {tmp / 'state'}\n"
                   f"pod:\n  host: 127.0.0.1\ngateway_url: {url}\n")
    return cfg


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LITELLM", "POD_CONSOLE"))}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "console.cli", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=REPO)


def test_status_and_metrics_print_no_escape_and_no_password(tmp_path: Path) -> None:
    with Serving() as gw:
        cfg = _config(tmp_path, gw.url)
        js = _cli("status", "--json", "--config", str(cfg))
        table = _cli("status", "--config", str(cfg))
        metrics = _cli("metrics", f"http://127.0.0.1:{gw.port}/metrics/", "--gateway")
    assert js.returncode == 0, js.stderr
    block = json.loads(js.stdout)["gateway"]
    assert block["url"] == f"http://***@127.0.0.1:{gw.port}"
    assert block["live"] and block["metrics_error"] is None
    # JSON escapes a control as \u001b: what it holds is checked, not only its bytes
    _clean(json.dumps(block, ensure_ascii=False), "status --json")
    _clean(js.stdout + js.stderr, "status --json (bytes)")
    assert table.returncode == 0, table.stderr
    assert "gateway up" in table.stdout
    _clean(table.stdout + table.stderr, "status")
    assert metrics.returncode == 0, metrics.stderr
    assert "tiny-a" in metrics.stdout and "alice" in metrics.stdout
    _clean(metrics.stdout + metrics.stderr, "metrics --gateway")


def _frames(path: Path) -> bytes:
    """The file's bytes and every frame in it decompressed (its dictionary included)."""
    out = [path.read_bytes()]
    db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        dicts = {i: zstandard.ZstdCompressionDict(bytes(b))
                 for i, b in db.execute("SELECT id, body FROM dicts")}
        out += [bytes(b) for (b,) in db.execute("SELECT body FROM dicts")]
        for body, pts, d in db.execute("SELECT body, points, dict FROM chunks"):
            z = zstandard.ZstdDecompressor(dict_data=dicts.get(d)) if d is not None \
                else zstandard.ZstdDecompressor()
            out += [z.decompress(bytes(body)), z.decompress(bytes(pts))]
        for (body,) in db.execute("SELECT body FROM layouts"):
            out.append(zstandard.ZstdDecompressor().decompress(bytes(body)))
        out += [f"{k} {v}".encode() for k, v in db.execute("SELECT key, value FROM meta")]
        out += [f"{t} {x}".encode() for t, x in db.execute("SELECT kind, text FROM markers")]
    finally:
        db.close()
    return b"\n".join(out)


async def test_no_recording_and_no_export_holds_the_password(tmp_path: Path) -> None:
    from console.session.record.store import PollItem
    from tests.session.world import world

    with Serving() as gw:
        w = world(tmp_path, T0, gateway_url=gw.url, gateway=GatewaySettings(cooldown_s=30))
        w.slots.client = HttpClient()  # type: ignore[attr-defined]
        try:
            for _ in range(30):  # past the dictionary's training (24 polls)
                assert await w.session.poll()
                w.clock.advance(2.0)
            st = w.session.state()
            assert st.gateway is not None and st.gateway.live
            assert st.gateway.url == f"http://***@127.0.0.1:{gw.port}"
            rec = w.session.recorder
            assert rec is not None
            # a word from outside holding a URL with a token in its query (an error text)
            rec.poll(PollItem(replace(st, stale="webhook http://hooks.example/x?"
                                              f"token={CANARY_KEY}&a=1 refused")))
            assert await asyncio.to_thread(rec.flush)
            assert rec.path is not None
            path = rec.path
        finally:
            await w.session.aclose()
            await w.slots.client.aclose()  # type: ignore[attr-defined]
    raw = _frames(path)
    assert b"***@127.0.0.1" in raw  # the gateway is in the recording, its password not
    assert CANARY_PASSWORD.encode() not in raw
    assert CANARY_KEY.encode() in raw  # the live file keeps the poll's words as they were
    out = tmp_path / "ticket.podrec"
    assert export(path, out, T0, T0 + 1000, secrets_of(w.settings)) > 0
    shipped = _frames(out)
    assert CANARY_PASSWORD.encode() not in shipped
    assert CANARY_KEY.encode() not in shipped  # a token in a query: masked on export
    assert b"token=***" in shipped
