"""Recordings on disk: where they are, which is newest, and opening one as a tape.

Every way of opening a file goes through :func:`open_tape`, so what ``pod-console
replay`` and ``replay --list`` say about a file that is missing, unreadable or not a
recording is said once, here, as a :class:`NotARecording` naming the file and what is
wrong (never a traceback). The recorder's reader
(``reader.SqliteTape``) does the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from msgspec import Struct

from console.session.record.folder import NotARecording, recording_files
from console.session.record.tape import Marker, Tape

RECORDINGS = "recordings"
"""``STATE_DIR/recordings/``: where a console, a wall and ``pod-console record`` write."""
SQLITE_MAGIC = b"SQLite format 3\x00"


def recordings_dir(state_dir: Path) -> Path:
    return state_dir / RECORDINGS


def list_recordings(state_dir: Path) -> list[Path]:
    """The recordings under ``state_dir``, newest first (by when they were last written)."""
    return recording_files(recordings_dir(state_dir))


def newest_recording(state_dir: Path) -> Path:
    """The newest recording, or :class:`NotARecording` saying there is none (and where
    it looked)."""
    found = list_recordings(state_dir)
    if not found:
        raise NotARecording(f"no recordings in {recordings_dir(state_dir)} (a console "
                            "records while it runs; give a FILE to replay another)")
    return found[0]


def check_file(path: Path) -> bytes:
    """The file's first bytes, or :class:`NotARecording` when it cannot be one at all."""
    try:
        if path.is_dir():
            raise NotARecording(f"{path}: a directory, not a recording")
        with path.open("rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except FileNotFoundError:
        raise NotARecording(f"{path}: no such file") from None
    except PermissionError:
        raise NotARecording(f"{path}: not readable (permission denied)") from None
    except OSError as exc:
        raise NotARecording(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not head:
        raise NotARecording(f"{path}: empty, not a recording")
    if head != SQLITE_MAGIC:
        raise NotARecording(f"{path}: not a pod-console recording (not an SQLite file)")
    return head


def open_tape(path: Path) -> Tape:
    """The recording at ``path`` as a tape, or :class:`NotARecording`: the one place a
    file becomes a tape (the recorder's reader's own errors said as one sentence)."""
    from console.session.record import reader  # sqlite3 and zstandard: loaded on use

    check_file(path)
    try:
        tape: Tape = reader.SqliteTape(path)
    except reader.RecordingError as exc:  # its sentence names the file and the fault
        raise NotARecording(str(exc)) from None
    return tape


class Summary(Struct, frozen=True):
    """One line of ``replay --list``: the file, its span, its polls and its incidents."""

    path: Path
    size: int
    first: float | None = None
    last: float | None = None
    polls: int = 0
    incidents: tuple[str, ...] = ()
    """The alerts that fired (``HH:MM:SS title``), oldest first."""
    problem: str | None = None
    """Why it could not be read (the rest is then empty)."""


def is_incident(m: Marker) -> bool:
    """An alert (or Xid) that fired: ``CRIT Q27 down``; not ``cleared: …`` and the like."""
    return m.kind in ("alert", "xid") and not m.text.split(" ", 1)[0].endswith(":")


def summarize(path: Path, open_: Callable[[Path], Tape] | None = None) -> Summary:
    """What ``--list`` says about one file (a file it cannot read is listed with why)."""
    import time

    opener = open_tape if open_ is None else open_
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    try:
        tape = opener(path)
    except NotARecording as exc:
        return Summary(path, size, problem=str(exc))
    try:
        times = tape.times()
        fired = tuple(f"{time.strftime('%H:%M:%S', time.localtime(m.t))} {m.text}"
                      for m in tape.markers() if is_incident(m))
        return Summary(path, size, times[0] if times else None,
                       times[-1] if times else None, len(times), fired)
    except NotARecording as exc:
        return Summary(path, size, problem=str(exc))
    finally:
        tape.close()
