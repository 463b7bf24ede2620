"""A folder of recordings: which files in it are recordings, newest first, and the error a
file that is not one raises. Below both ``files`` (finding and opening a recording) and
``reader`` (reading one back), which each list a folder."""

from __future__ import annotations

from pathlib import Path

SUFFIX = ".podrec"


class NotARecording(Exception):
    """A file ``replay`` cannot open: the message names it and says what is wrong."""


def recording_files(d: Path) -> list[Path]:
    """The recordings in the folder ``d``, newest first (by when they were last written):
    the one listing behind ``replay --list``, ``replay`` without a file and ``record
    export``."""
    try:
        files = [p for p in d.iterdir() if p.suffix == SUFFIX and p.is_file()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise NotARecording(f"{d}: cannot be read ({exc.strerror})") from None

    def written(p: Path) -> float:
        try:
            return p.stat().st_mtime
        except OSError:
            return 0.0
    return sorted(files, key=lambda p: (written(p), p.name), reverse=True)
