"""Talk to the running supervisor over its Unix socket; print its events as JSON lines."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from . import paths
from .events import encode, event, parse_line

if TYPE_CHECKING:
    from .requests import AgentRequest, BadRequest


class NotRunning(Exception):
    pass


def request(req: AgentRequest, timeout: float | None = None) -> Iterator[dict[str, Any]]:
    """Send one request (its model: checked when it was made, read back with the same
    model by the supervisor) and yield its events until ``result`` or ``error``."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(paths.socket_path())
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        s.close()
        raise NotRunning(f"the supervisor is not running ({exc.strerror})") from None
    with s:
        s.sendall((json.dumps(req.wire()) + "\n").encode())
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                ev = parse_line(line.decode("utf-8", "replace"))
                yield ev
                if ev.get("kind") in ("result", "error"):
                    return


def relay(req: AgentRequest | BadRequest, out=None) -> int:
    """Stream a request's events to ``out``; exit 0 on result, 1 on error, 2 not running
    or a malformed request (``BadRequest``, from the command line: nothing is sent)."""
    out = out or sys.stdout
    final = None
    if isinstance(req, ValueError):
        out.write(encode(event("error", message=f"bad request: {req}")) + "\n")
        return 2
    try:
        for ev in request(req):
            out.write(encode(ev) + "\n")
            out.flush()
            final = ev.get("kind") if ev.get("kind") in ("result", "error") else final
    except NotRunning as exc:
        out.write(encode(event("error", message=str(exc), supervisor="not running")) + "\n")
        return 2
    if final is None:
        out.write(encode(event("error", message="the supervisor closed the connection")) + "\n")
        return 1
    return 0 if final == "result" else 1
