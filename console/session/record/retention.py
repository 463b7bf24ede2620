"""What retention may trust, and one scan of the recordings directory.

Retention (``Recorder._retain``) removes the oldest recordings past their age or the
directory's size. Issue 44 found it quadratic (a scan of the directory per file: with
3000 files a ``record`` wrote no poll), pausing recording on a dangling link or a file
that vanished mid-pass; issue 42 found a +8 days step of the wall clock deleting every
other recording. Here: one ``lstat`` scan a pass (:func:`listing`), removal that passes
over what is gone or cannot go (:func:`remove`), and the ages it can trust
(:class:`Retention`).
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path

from msgspec import Struct


def remove(path: Path) -> bool:
    """The recording and its SQLite side files; False when it could not be removed
    (gone already counts as removed)."""
    ok = True
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            p.unlink()
        except FileNotFoundError:
            continue
        except OSError:
            ok = ok and p != path
    return ok


class Entry(Struct, frozen=True):
    name: str
    path: Path
    mtime: float
    size: int
    link: bool
    """A symbolic link (never a recording of ours to age or remove)."""


def listing(directory: Path) -> list[Entry]:
    """The directory's entries as one scan reads them (``lstat``: a dangling link is an
    entry like any other); one that vanishes while read is left out."""
    out = []
    try:
        it = os.scandir(directory)
    except OSError:
        return []
    with it:
        for e in it:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            out.append(Entry(e.name, Path(e.path), st.st_mtime, st.st_size,
                             stat.S_ISLNK(st.st_mode)))
    return out


STEP_S = 60.0
"""The wall clock is judged stepped when it moved this much more (or less) than the
monotonic clock since the recorder started (NTP slews both alike; only a step parts
them)."""


class Retention:
    """What ages retention may trust (issue 42: a +8 days step of the wall clock once
    deleted every other recording, and part of the current one).

    - A file this process saw appear or change, with a time no older than the pass
      before (written between the two), is at most as old as the monotonic time since
      the pass that first saw it so; it is removed for age only once that is past
      ``keep_s``, whatever its time says. (One that appears with an older time was
      copied in, or its time set: its time stands.)
    - A file's time (its mtime) is the wall clock's of when it was written. Once the
      wall clock has stepped in this process's life, the times written before the step
      cannot be compared with the clock after it: those files are not removed for age
      (size still bounds the directory).
    """

    def __init__(self, wall: float, mono: float) -> None:
        self._offset = wall - mono
        self.stepped_at: float | None = None
        """The wall clock just after the last step seen (None: none seen)."""
        self._last_wall: float | None = None
        """The wall clock at the pass before."""
        self._seen: dict[str, tuple[float, float]] = {}
        """File name → (its mtime, the monotonic time of the pass that first saw it)."""

    def observe(self, wall: float, mono: float) -> None:
        offset = wall - mono
        if abs(offset - self._offset) > STEP_S:
            self.stepped_at = wall
            self._offset = offset

    def seen(self, files: list[Entry], wall: float, mono: float) -> None:
        before, self._last_wall = self._last_wall, wall
        names = set()
        for f in files:
            names.add(f.name)
            had = self._seen.get(f.name)
            if had is None or had[0] != f.mtime:
                # on the first pass nothing is known of when it was written: its time
                # stands alone; from then on a change is at most a pass old
                new = before is not None and f.mtime >= before - STEP_S
                self._seen[f.name] = (f.mtime, mono if new else -math.inf)
        for name in set(self._seen) - names:
            del self._seen[name]

    def old(self, f: Entry, wall: float, mono: float, keep_s: float) -> bool:
        """Whether ``f`` is past ``keep_s`` by every clock that can tell."""
        seen = self._seen.get(f.name)
        if seen is not None and mono - seen[1] <= keep_s:
            return False
        if self.stepped_at is not None and f.mtime < self.stepped_at:
            return False
        return wall - f.mtime > keep_s
