"""``pod-console status --json`` against slots whose HTTP is odd but legal, or illegal.

A proxy in front of a pod may send ``103 Early Hints`` before the answer: the slot's
figures must come through and it must be ``up``. Two different ``Content-Length``
headers must be refused (RFC 9112 §6.3) and said, with no figures.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import FIXTURES, REPO
from tests.support.rawtcp import RawServer

EXPOSITION = (FIXTURES / "vllm-0.32.0-cpu" / "plain" / "metrics-after-load.txt").read_bytes()


class Slot(RawServer):
    """A raw-socket vLLM stand-in: keep-alive, and a chosen way of framing /metrics."""

    def __init__(self, model: str, metrics_mode: str) -> None:
        self.model = model
        self.mode = metrics_mode
        super().__init__()

    def handle(self, conn: socket.socket) -> None:
        buf = b""
        while not self.stop.is_set():
            while b"\r\n\r\n" not in buf:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
            head, _, buf = buf.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            while len(buf) < length:
                buf += conn.recv(65536)
            buf = buf[length:]
            conn.sendall(self._answer(head.split(b" ")[1].decode()))

    def _answer(self, path: str) -> bytes:
        def ok(body: bytes, ctype: str = "application/json") -> bytes:
            return (f"HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\n"
                    f"content-length: {len(body)}\r\n\r\n").encode() + body

        if path == "/health":
            return ok(b"")
        if path == "/v1/models":
            return ok(json.dumps({"data": [{"id": self.model}]}).encode())
        if path == "/v1/chat/completions":
            return ok(json.dumps({"choices": [{"message": {"content": "OK"}}]}).encode())
        body = EXPOSITION.replace(b'model_name="tiny-main"',
                                  f'model_name="{self.model}"'.encode())
        if self.mode == "early-hints":
            return (b"HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n"
                    + ok(body, "text/plain; version=0.0.4"))
        return (b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n"
                b"content-length: %d\r\ncontent-length: %d\r\n\r\n" % (len(body), len(body) + 1)
                + body)


def test_status_through_early_hints_and_conflicting_lengths(tmp_path: Path) -> None:
    hints, bad = Slot("hinted-model", "early-hints"), Slot("bad-model", "two-lengths")
    try:
        prof = tmp_path / "profiles"
        prof.mkdir()
        doc = {"gpu_type_ids": ["GPU A1"], "gpu_count": 2, "image": "sim/vllm:latest",
               "slots": {
                   "HINTS": {"served_model_name": "hinted-model", "hf_repo_id": "sim/a",
                             "port": hints.port, "gpus": [0, 1], "gpu_util": 0.4,
                             "max_model_len": 4096},
                   "BAD": {"served_model_name": "bad-model", "hf_repo_id": "sim/b",
                           "port": bad.port, "gpus": [0, 1], "gpu_util": 0.4,
                           "max_model_len": 4096}}}
        (prof / "10-test.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        cfg = tmp_path / "config.yaml"
        cfg.write_text(f"profiles_dir: {prof}\nstate_dir: {tmp_path / 'state'}\n"
                       "pod:\n  host: 127.0.0.1\n")
        env = dict(os.environ, PYTHONPATH=str(REPO))
        r = subprocess.run([sys.executable, "-m", "console.cli", "status", "--json",
                            "--config", str(cfg), "--sample", "1"], capture_output=True,
                           text=True, timeout=120, env=env, cwd=REPO)
        # without --sample the two polls are milliseconds apart: no window, so no rates
        # (a rate over 9 ms read 0 tok/s), and the figures are lifetime values
        quick = subprocess.run([sys.executable, "-m", "console.cli", "status", "--json",
                                "--config", str(cfg)], capture_output=True, text=True,
                               timeout=120, env=env, cwd=REPO)
        table = subprocess.run([sys.executable, "-m", "console.cli", "status", "--config",
                                str(cfg)], capture_output=True, text=True, timeout=120,
                               env=env, cwd=REPO)
    finally:
        hints.close()
        bad.close()
    assert r.returncode == 0, r.stderr
    slots = {s["slot"]: s for s in json.loads(r.stdout)["slots"]}
    assert slots["HINTS"]["health"] == "up" and slots["HINTS"]["figures"] is not None
    # the same exposition twice: no new observations, so gauges only (quantiles are null)
    assert slots["HINTS"]["figures"]["kv_cache_usage"] is not None
    assert slots["HINTS"]["error"] is None
    assert slots["BAD"]["figures"] is None
    assert "Content-Length" in slots["BAD"]["error"], slots["BAD"]
    assert quick.returncode == 0, quick.stderr
    hinted = {s["slot"]: s for s in json.loads(quick.stdout)["slots"]}["HINTS"]
    assert hinted["rates"]["window_s"] is None
    assert hinted["rates"]["generation_tps"] is None and hinted["rates"]["prompt_tps"] is None
    assert hinted["figures"]["generation_tokens"] > 0  # the lifetime counter, even with no window
    # without --json: a table a person reads, the broken slot's reason under it
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:2] == ["SLOT", "HEALTH"] and "TTFT" in lines[0]
    assert any(ln.split()[:2] == ["HINTS", "UP"] for ln in lines), table.stdout
    assert any(ln.startswith("BAD:") and "Content-Length" in ln for ln in lines)
