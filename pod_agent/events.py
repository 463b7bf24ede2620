"""The agent's JSON-lines protocol: one event per line on stdout.

Kinds: ``progress`` (step, fraction 0..1, message), ``log`` (a line of text),
``result`` (the final answer, once) and ``error`` (a failure, once, instead of
result). The console's transport parses exactly these; anything else on the
stream is shown as a log line.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from typing import IO, Any

KINDS = ("progress", "log", "result", "error")


def event(kind: str, **fields: Any) -> dict[str, Any]:
    if kind not in KINDS:
        raise ValueError(f"unknown event kind {kind!r}")
    return {"kind": kind, "t": round(time.time(), 3), **fields}


def encode(ev: dict[str, Any]) -> str:
    return json.dumps(ev, sort_keys=True, separators=(",", ":"), default=str)


class Emitter:
    """Writes events to a stream (stdout by default), flushing each line."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stdout

    def emit(self, kind: str, **fields: Any) -> dict[str, Any]:
        ev = event(kind, **fields)
        # A closed stream means the SSH session went away; the supervisor keeps the record.
        with contextlib.suppress(BrokenPipeError, ValueError):
            self.stream.write(encode(ev) + "\n")
            self.stream.flush()
        return ev

    def progress(self, step: str, fraction: float | None = None, message: str = "") -> None:
        self.emit("progress", step=step, fraction=fraction, message=message)

    def log(self, line: str, **fields: Any) -> None:
        self.emit("log", line=line, **fields)

    def result(self, **fields: Any) -> None:
        self.emit("result", **fields)

    def error(self, message: str, **fields: Any) -> None:
        self.emit("error", message=message, **fields)


def parse_line(line: str) -> dict[str, Any]:
    """Decode one line; anything that is not a known event becomes a ``log`` event."""
    try:
        obj = json.loads(line)
    except ValueError:
        return {"kind": "log", "line": line.rstrip("\n")}
    if not isinstance(obj, dict) or obj.get("kind") not in KINDS:
        return {"kind": "log", "line": line.rstrip("\n")}
    return obj
