"""The agent's Unix socket against wrongly typed requests (issue 31, finding 22), through
a real ``pod-agent serve``: each is answered ``bad request: …`` like any malformed
request, ``serve.log`` holds no traceback, and the agent goes on answering."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pod_agent.requests import BadRequest, parse, parse_line
from tests.conftest import PROFILES, REPO

WRONG = {
    "logs, lines null": b'{"op": "logs", "slot": "FLASH", "lines": null}',
    "rebalance, set a list": b'{"op": "rebalance", "set": [["FLASH", 0.5]]}',
    "restart, slot an object": b'{"op": "restart", "slot": {"FLASH": 1}}',
    "30k-deep list": b"[" * 30000 + b"]" * 30000,
    "rebalance, NaN util": b'{"op": "rebalance", "set": {"FLASH": NaN}}',
    "watchdog, clear a string": b'{"op": "watchdog", "cmd": "extend", "clear": "yes"}',
    "attach, id a number": b'{"op": "attach", "action_id": 7}',
    "not an object": b'"status"',
    "not UTF-8": b'{"op": "status", "x": "\xff"}',
}
SAYS = {
    "logs, lines null": "lines: Input should be a valid integer (got NoneType)",
    "rebalance, set a list": "set: Input should be a valid dictionary (got list)",
    "restart, slot an object": "slot: Input should be a valid string (got dict)",
    "30k-deep list": "nested too deeply",
    "rebalance, NaN util": "set.FLASH: Input should be a finite number",
    "watchdog, clear a string": "clear: Input should be a valid boolean",
    "attach, id a number": "action_id: Input should be a valid string (got int)",
    "not an object": "request must be an object",
    "not UTF-8": "utf-8",
}


def ask(sock_path: Path, line: bytes, timeout_s: float = 20.0) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(str(sock_path))
        s.sendall(line + b"\n")
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    assert buf, f"no answer to {line[:60]!r}"
    return json.loads(buf.split(b"\n", 1)[0])


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    root = tmp_path_factory.mktemp("agent")
    home = root / "home"
    home.mkdir()
    vllm = root / "vllm"
    vllm.write_text("#!/bin/sh\nexec sleep 300\n")
    vllm.chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if k not in ("RUNPOD_API_KEY", "RUNPOD_POD_ID", "POD_AGENT_WEBHOOK_URL")}
    env.update(POD_AGENT_HOME=str(home), PYTHONPATH=str(REPO))
    with open(root / "serve.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pod_agent", "serve", "--profile",
             str(PROFILES / "10-rtx6000-2x.yaml"), "--vllm", str(vllm), "--no-patches",
             "--watchdog-interval", "3600"], stdout=log, stderr=subprocess.STDOUT, env=env,
            cwd=root, start_new_session=True)
    from pod_agent.paths import socket_path_for

    sock = Path(socket_path_for(str(home)))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not sock.exists():
            assert proc.poll() is None, (root / "serve.log").read_text()
            time.sleep(0.1)
        assert sock.exists(), (root / "serve.log").read_text()
        yield {"sock": sock, "log": root / "serve.log", "proc": proc}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.mark.parametrize("case", list(WRONG))
def test_a_wrongly_typed_request_is_a_bad_request(agent, case) -> None:
    ev = ask(agent["sock"], WRONG[case])
    assert ev["kind"] == "error" and ev["message"].startswith("bad request: "), ev
    assert SAYS[case] in ev["message"], ev["message"]
    # the agent is still there, and its log holds no traceback
    assert ask(agent["sock"], b'{"op": "status"}')["kind"] == "result"
    assert agent["proc"].poll() is None
    log = agent["log"].read_text(errors="replace")
    assert "Traceback" not in log and "Unhandled exception" not in log, log[-3000:]


def test_well_typed_requests_still_work(agent) -> None:
    ev = ask(agent["sock"], b'{"op": "logs", "slot": "FLASH", "lines": 5}')
    assert ev["kind"] == "result" and ev["slot"] == "FLASH"
    ev = ask(agent["sock"], b'{"op": "restart", "slot": "NOPE"}')
    assert ev["kind"] == "error" and ev["message"] == "unknown slot 'NOPE'"
    ev = ask(agent["sock"], b'{"op": "frobnicate"}')
    assert ev["kind"] == "error" and ev["message"] == "unknown op 'frobnicate'"


def test_the_command_line_refuses_the_same_before_sending(tmp_path, monkeypatch) -> None:
    """``pod-agent`` parses into the same models: a malformed request is refused, with
    the field named, without a supervisor at all (nothing is sent)."""
    from pod_agent import cli

    monkeypatch.setenv("POD_AGENT_HOME", str(tmp_path))  # no socket here
    for argv, says in ((["watchdog", "mem-floor", "nan"], "watchdog mem-floor: value: "),
                       (["watchdog", "extend"], "extend needs +1h"),
                       (["rebalance", "--set", "FLASH=inf"], "set.FLASH: Input should be "
                                                             "a finite number")):
        out = io.StringIO()
        monkeypatch.setattr("sys.stdout", out)
        assert cli.main(argv) == 2
        last = json.loads(out.getvalue().splitlines()[-1])
        assert last["kind"] == "error" and last["message"].startswith("bad request: ")
        assert says in last["message"], last["message"]
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    assert cli.main(["status", "--json"]) == 2  # well formed: reaches for the supervisor
    assert "not running" in out.getvalue()


def test_a_field_this_agent_does_not_know_is_ignored_not_refused() -> None:
    """The console may replace the package under a running (older) supervisor: a field
    a newer command line sends is no error, and every field it reads is still checked."""
    req = parse({"op": "watchdog", "cmd": "extend", "until": "+1h", "clear": False,
                 "by": "erin", "reason": "", "a_newer_field": [1, 2]})
    assert req.wire() == {"op": "watchdog", "cmd": "extend", "until": "+1h", "clear": False,
                          "by": "erin", "reason": "", "replaces_next_stop": False}
    with pytest.raises(BadRequest, match="unknown op"):
        parse_line(b"")  # an empty line: the supervisor says "unknown op None"
    with pytest.raises(BadRequest):
        parse(["op", "status"])


def test_a_home_too_deep_for_a_socket_path_gets_a_short_private_one(tmp_path) -> None:
    """A unix socket's path is at most ~104 bytes: a deep home (a test's temporary
    directory under a worker's, a long volume path) made the agent die at start with
    "AF_UNIX path too long". Agent and clients derive the same short path instead."""
    import os
    import socket
    import stat

    from pod_agent.paths import SUN_PATH_MAX, socket_path_for

    short = tmp_path / "h"
    assert socket_path_for(str(short)) == str(short / "agent.sock")
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "agent"
    path = socket_path_for(str(deep))
    assert len(os.fsencode(path)) <= SUN_PATH_MAX and path == socket_path_for(str(deep))
    assert path != socket_path_for(str(tmp_path / ("d" * 60) / ("f" * 60) / "agent"))
    folder = os.lstat(os.path.dirname(path))
    assert folder.st_uid == os.getuid() and not folder.st_mode & 0o077
    with socket.socket(socket.AF_UNIX) as s:  # it binds where the long one could not
        s.bind(path)
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    os.unlink(path)
