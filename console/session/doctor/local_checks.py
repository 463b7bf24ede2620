"""The checks of this machine: the config and the profiles load, the state directory and
the recordings' directory can be written and have room."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

from console.session.doctor.parts import Doctor
from console.session.doctor.report import Verdict, fail, ok, outside, skip, warn

DISK_FAIL_BYTES = 64 << 20
DISK_WARN_BYTES = 512 << 20


# -- config and profiles ----------------------------------------------------------------
async def config_valid(d: Doctor, timeout_s: float) -> Verdict:
    if d.config_error is not None:
        first = d.config_error.splitlines()[0]
        more = len(d.config_error.splitlines()) - 1
        return fail(outside(first) + (f" (and {more} more)" if more > 0 else ""),
                    "fix that key of the config file (docs/configuration.md, \"The "
                    "console\"), then run `pod-console doctor` again")
    src = d.s._source
    where = f"{src}" if src is not None else "no config file (defaults and environment)"
    ctx = f", context {d.s.context}" if d.s.context else ""
    return ok(f"settings read from {where}{ctx}")


async def profile_valid(d: Doctor, timeout_s: float) -> Verdict:
    if d.profile_error is not None:
        return fail(outside(d.profile_error.splitlines()[0]),
                    f"`pod-console profile check {d.s.profiles_dir}` names each problem "
                    "with its line")
    dep = d.deployment
    assert dep is not None
    return ok(f"profile {dep.today.name} ({len(dep.today.profile.slots)} slot(s)) of "
              f"{len(dep.profiles)} in {d.s.profiles_dir}")


# -- this machine -------------------------------------------------------------------
def _probe_dir(path: Path, sqlite: bool = False) -> None:
    """Create ``path`` if needed and write (and remove) a file in it, as the console
    does (``sqlite``: a small database, as the recorder writes)."""
    path.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".doctor-", dir=path)
    try:
        try:
            if not sqlite:
                os.write(fd, b"\0" * 65536)
                os.fsync(fd)
        finally:
            os.close(fd)
        if sqlite:
            db = sqlite3.connect(name)
            try:
                db.execute("CREATE TABLE t (x BLOB)")
                db.execute("INSERT INTO t VALUES (?)", (b"\0" * 65536,))
                db.commit()
            finally:
                db.close()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)


def _disk_verdict(label: str, path: Path, sqlite: bool, fix: str) -> Verdict:
    try:
        _probe_dir(path, sqlite)
    except (OSError, sqlite3.Error) as exc:
        code = getattr(exc, "errno", None)
        # sqlite says a full disk in words ("database or disk is full"), the OS by errno
        full = code == errno.ENOSPC or (isinstance(exc, sqlite3.Error)
                                        and "full" in str(exc).lower())
        what = "full" if full else "not writable"
        why = outside(getattr(exc, "strerror", None) or exc, 80)
        return fail(f"{label} {path} is {what} ({why})",
                    (f"free space on its filesystem, or {fix}" if full else
                     f"make it writable by this user, or {fix}"))
    free = shutil.disk_usage(path).free
    if free < DISK_FAIL_BYTES:
        return fail(f"{label} {path} has {free >> 20} MiB free",
                    f"free space on its filesystem, or {fix}")
    if free < DISK_WARN_BYTES:
        return warn(f"{label} {path} has only {free >> 20} MiB free",
                    f"free space on its filesystem, or {fix}")
    return ok(f"{label} {path} is writable, {free >> 30} GiB free")


async def disk_state_dir(d: Doctor, timeout_s: float) -> Verdict:
    return await asyncio.to_thread(
        _disk_verdict, "the state directory", d.s.state_dir, False,
        "set state_dir (POD_CONSOLE_STATE_DIR) to another directory")


async def recording_writable(d: Doctor, timeout_s: float) -> Verdict:
    from console.session.record.store import recordings_dir

    s = d.s
    if not s.record:
        return skip("recording is off (record: false)")
    v = await asyncio.to_thread(
        _disk_verdict, "the recordings directory", recordings_dir(s.state_dir), True,
        "turn recording off (record: false)")
    if v.status == "ok":
        free = shutil.disk_usage(recordings_dir(s.state_dir)).free
        if free < s.record_max_mb * (1 << 20):
            return warn(f"the recordings may fill the disk: {free >> 20} MiB free, "
                        f"record_max_mb is {s.record_max_mb:g}",
                        "lower record_max_mb below the free space, or free space")
    return v


