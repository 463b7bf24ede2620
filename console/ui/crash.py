"""What a failure leaves behind: a line in ``errors.log`` for one the console survived,
a crash report (traceback, time, version) for one it did not. Both in the state
directory, written whole or not at all; never raising (a full disk costs the record,
not the exit)."""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import time
import traceback
from pathlib import Path

from console import __version__

ERRORS_LOG = "errors.log"
ERRORS_LOG_MAX = 1 << 20
"""``errors.log`` is cut to its last half past this size."""


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))


def format_error(err: BaseException) -> str:
    return "".join(traceback.format_exception(type(err), err, err.__traceback__))


def append_error(state_dir: Path, where: str, err: BaseException,
                 t: float | None = None) -> Path | None:
    """One survived failure, appended to ``STATE_DIR/errors.log``."""
    return append_note(state_dir, f"{where} failed (the console went on)", format_error(err), t)


def append_note(state_dir: Path, headline: str, body: str,
                t: float | None = None) -> Path | None:
    """One entry of ``STATE_DIR/errors.log``: a stamped headline, then ``body``."""
    t = time.time() if t is None else t
    path = state_dir / ERRORS_LOG
    text = (f"--- {_stamp(t)} pod-console {__version__} pid {os.getpid()}: {headline}\n"
            f"{body.rstrip()}\n")
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            if path.stat().st_size > ERRORS_LOG_MAX:
                keep = path.read_bytes()[-ERRORS_LOG_MAX // 2:]
                path.write_bytes(keep)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, text.encode("utf-8", "replace"))
        finally:
            os.close(fd)
        return path
    except OSError:
        return None


def write_crash_report(state_dir: Path, trace: str, command: list[str] | None = None,
                       t: float | None = None) -> Path | None:
    """``STATE_DIR/crash-YYYYmmdd-HHMMSS-PID.txt``: what ended the console, when, which
    version; its path, or None when it could not be written."""
    t = time.time() if t is None else t
    name = time.strftime("crash-%Y%m%d-%H%M%S", time.localtime(t)) + f"-{os.getpid()}.txt"
    path = state_dir / name
    body = "\n".join([
        "pod-console crash report",
        f"time: {_stamp(t)}",
        f"version: pod-console {__version__}",
        f"python: {sys.version.split()[0]} on {platform.platform()}",
        f"command: {' '.join(command if command is not None else sys.argv)}",
        "",
        trace.rstrip(),
        "",
    ])
    tmp = path.with_name(path.name + ".tmp")
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, body.encode("utf-8", "replace"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        return path
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return None
