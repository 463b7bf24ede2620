"""``$POD_CONSOLE_STATE_DIR/audit.jsonl``: every action, appended, flushed, fsynced.

Opened in append mode for each record and never rewritten, so a crash loses at
most the record being written and never an earlier one.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import time
from pathlib import Path
from typing import Any


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, action: str, args: dict[str, Any], result: str, **extra: Any) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        rec = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "t": round(time.time(), 3),
               "user": _user(), "host": socket.gethostname(), "action": action,
               "arguments": args, "result": result, **extra}
        line = json.dumps(rec, sort_keys=True, default=str) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def records(self) -> list[dict[str, Any]]:
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out
