"""``$POD_CONSOLE_STATE_DIR/audit.jsonl``: every action, appended, flushed, fsynced.

Opened in append mode for each record and never rewritten, so a crash loses at
most the record being written and never an earlier one. A record is written
whole or not at all: a short write (a full disk) is completed or, when it
cannot be, cut back to where the record began, and :class:`AuditError` says
why. Callers decide what that means: nothing that spends money starts without
its record.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def current_user() -> str:
    """Who is at the keyboard, as the audit log names them."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def who() -> str:
    """``user@host``: who asked, as an audit record's two fields name them together."""
    return f"{current_user()}@{socket.gethostname()}"


class AuditError(Exception):
    """A record could not be written whole (full disk, read-only file system, …)."""


def _last_byte(fd: int, size: int) -> bytes | None:
    try:
        return os.pread(fd, 1, size - 1)
    except OSError:  # not seekable (a device): nothing to glue to
        return None


def write_record(path: Path, line: str) -> None:
    """Append ``line`` plus a newline, fsynced; all of it or (cut back) none of it."""
    data = (line.rstrip("\n") + "\n").encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError as exc:
        raise AuditError(f"{path}: {exc.strerror or exc}") from None
    try:
        start = os.fstat(fd).st_size
        if start and _last_byte(fd, start) not in (b"\n", None):
            # a record cut by kill -9 or a power cut: never glue this one to it
            data = b"\n" + data
        done = 0
        try:
            while done < len(data):
                n = os.write(fd, data[done:])
                if n <= 0:
                    raise OSError(28, "No space left on device")
                done += n
            os.fsync(fd)
        except OSError as exc:
            if done:  # never leave half a record for the next one to be glued to
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, start)
            raise AuditError(f"{path}: record not written ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


class AuditLog:
    def __init__(self, path: Path,
                 tags: Callable[[], dict[str, Any]] | None = None) -> None:
        self.path = path
        self.tags = tags
        """Fields every record carries, read when it is written: the context and the pod
        the operation acts on (a fallback moves the console to a new pod)."""
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        """Told of every record written (a recording's operation markers)."""

    def append(self, action: str, args: dict[str, Any], result: str, **extra: Any) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tags = {k: v for k, v in (self.tags() if self.tags else {}).items()
                if v is not None and k not in args}  # the operation's own word wins
        rec = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "t": round(time.time(), 3),
               "user": current_user(), "host": socket.gethostname(), **tags,
               "action": action, "arguments": args, "result": result, **extra}
        write_record(self.path, json.dumps(rec, sort_keys=True, default=str))
        for listener in self.listeners:
            listener(rec)

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


def audit_log_for(settings: Any) -> AuditLog:
    """The settings' audit log, each record tagged with the context and the pod it is
    about (``settings.pod.machine_id`` as it stands when the record is written)."""
    def tags() -> dict[str, Any]:
        return {"context": settings.context, "pod": settings.pod.machine_id}

    return AuditLog(settings.state_dir / "audit.jsonl", tags)
