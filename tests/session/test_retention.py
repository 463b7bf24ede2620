"""Issue 44, data lost: retention as the recorder runs it under a session.

- 3000 recordings in the directory: the pass is linear (one scan of the directory per
  pass, counted here), and the polls are written;
- a dangling symbolic link, and a file that vanishes between the listing and its
  ``stat``, are passed over: recording never pauses for them;
- the "recording paused" alert is marked in the recording when recording paused, not
  when it resumed.

The recorder, SQLite and the files are real; the session runs on the fake sources of
``world.py``."""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.session.record.reader import SqliteTape
from tests.session.world import World, world

T0 = 1_796_000_400.0
REFRESH = 2.0


def _figures(w: World) -> None:
    w.slots.values = {t.slot: {"ttft_p95_s": 0.5, "kv_cache_usage": 0.3}
                      for t in w.slots.targets}


async def _polls(w: World, n: int) -> None:
    for _ in range(n):
        w.clock.advance(REFRESH)
        assert await w.session.poll()


async def _started(tmp: Path, **settings: object) -> World:
    w = world(tmp, T0, refresh_s=REFRESH, **settings)
    _figures(w)
    assert await w.session.poll()
    rec = w.session.recorder
    assert rec is not None and await asyncio.to_thread(rec.flush)
    rec.chunk_polls = 2  # a pack (and its retention pass) every second poll
    return w


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every listing of a directory (``os.scandir``, ``os.listdir``: what ``glob`` and
    ``iterdir`` use), by path."""
    seen: list[str] = []
    real_scandir, real_listdir = os.scandir, os.listdir

    def scandir(path=".", *a, **kw):  # type: ignore[no-untyped-def]
        seen.append(str(path))
        return real_scandir(path, *a, **kw)

    def listdir(path=".", *a, **kw):  # type: ignore[no-untyped-def]
        seen.append(str(path))
        return real_listdir(path, *a, **kw)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "listdir", listdir)
    yield seen


async def test_three_thousand_recordings_one_scan_a_pass_and_the_polls_written(
        tmp_path: Path, scans: list[str]) -> None:
    w = await _started(tmp_path, record_max_mb=1.0)
    rec = w.session.recorder
    assert rec is not None and rec.path is not None
    d = rec.path.parent
    for i in range(3000):  # 3 MiB of older recordings, oldest first: 2 MiB must go
        p = d / f"20261101-{i:06d}-9-0.podrec"
        p.write_bytes(b"\0" * 1024)
        os.utime(p, (T0 - 86400 + i, T0 - 86400 + i))
    scans.clear()
    await _polls(w, 6)  # three packs: three retention passes
    assert await asyncio.to_thread(rec.flush, 60.0)
    of_dir = [s for s in scans if Path(s) == d]
    assert 1 <= len(of_dir) <= 3, len(of_dir)  # once a pass, not once a file
    assert rec.paused is None and rec.dropped == 0
    names = {p.name for p in d.iterdir()}
    assert "20261101-000000-9-0.podrec" not in names  # the oldest went first
    assert "20261101-002999-9-0.podrec" in names  # the newest stay
    kept = sum(p.stat().st_size for p in d.glob("20261101-*"))
    assert 0 < kept <= 1024 * 1024
    tape = SqliteTape(rec.path)
    assert len(tape.times()) == 7
    tape.close()
    await w.session.aclose()


async def test_a_dangling_link_never_pauses_recording(tmp_path: Path) -> None:
    w = await _started(tmp_path)
    rec = w.session.recorder
    assert rec is not None and rec.path is not None
    dead = rec.path.parent / "20261101-000000-1-0.podrec"
    dead.symlink_to(tmp_path / "moved-away.podrec")
    await _polls(w, 6)
    assert await asyncio.to_thread(rec.flush)
    await _polls(w, 1)  # a pause would be judged at this poll
    assert await asyncio.to_thread(rec.flush)
    assert rec.paused is None and "recording" not in w.session.failures
    assert not [t for t, _ in w.notes if "recording paused" in t]
    assert dead.is_symlink()  # not a recording of ours: left as it is
    tape = SqliteTape(rec.path)
    assert len(tape.times()) == 8
    tape.close()
    await w.session.aclose()


async def test_a_file_that_vanishes_during_the_pass_never_pauses_recording(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = await _started(tmp_path)
    rec = w.session.recorder
    assert rec is not None and rec.path is not None
    d = rec.path.parent
    real_scandir = os.scandir

    class Vanishing:
        """The directory's listing, where each ``vanish-`` file is removed by someone
        else right after it was listed (another console's retention, a user's rm)."""

        def __init__(self, path: object) -> None:
            self.it = real_scandir(path)  # type: ignore[call-overload]

        def __enter__(self) -> Vanishing:
            return self

        def __exit__(self, *exc: object) -> None:
            self.it.close()

        def close(self) -> None:
            self.it.close()

        def __iter__(self) -> Vanishing:
            return self

        def __next__(self) -> os.DirEntry[str]:
            e = next(self.it)
            if e.name.startswith("vanish-"):
                os.unlink(e.path)
            return e

    def scandir(path=".", *a, **kw):  # type: ignore[no-untyped-def]
        return Vanishing(path) if Path(path) == d else real_scandir(path, *a, **kw)

    made = 0
    monkeypatch.setattr(os, "scandir", scandir)
    for _ in range(3):
        for k in range(5):  # new ones before each pack
            (d / f"vanish-{made + k}.podrec").write_bytes(b"x")
        made += 5
        await _polls(w, 2)
        assert await asyncio.to_thread(rec.flush)
    await _polls(w, 1)
    assert await asyncio.to_thread(rec.flush)
    assert rec.paused is None and "recording" not in w.session.failures
    assert not list(d.glob("vanish-*"))  # they did vanish, during the passes
    tape = SqliteTape(rec.path)
    assert len(tape.times()) == 8
    tape.close()
    await w.session.aclose()


async def test_the_recording_paused_alert_is_marked_when_it_paused(tmp_path: Path) -> None:
    w = await _started(tmp_path)
    rec = w.session.recorder
    assert rec is not None and rec.path is not None
    await _polls(w, 3)
    assert await asyncio.to_thread(rec.flush)
    full = True

    def disk() -> None:
        if full:
            raise OSError(errno.ENOSPC, "No space left on device")

    rec.fault, rec.retry_s = disk, 0.0
    paused_at = w.clock() + REFRESH  # the next poll's write is the first that fails
    await _polls(w, 1)
    assert await asyncio.to_thread(rec.flush)
    await asyncio.sleep(0)  # the writer's news reaches the loop
    for _ in range(15):  # 30 s without a written poll; the alert fires in there
        await _polls(w, 1)
        assert await asyncio.to_thread(rec.flush)
    assert "recording" in {a.key for a in w.session.alerts.firing()}
    full = False
    resumed_at = w.clock() + REFRESH
    await _polls(w, 2)
    assert await asyncio.to_thread(rec.flush)
    assert rec.paused is None
    tape = SqliteTape(rec.path)
    marks = {(m.kind, m.text): m.t for m in tape.markers()}
    tape.close()
    assert marks[("recording", "recording paused: disk full")] == paused_at
    alert = marks[("alert", "WARN recording paused")]
    assert paused_at <= alert <= paused_at + 2 * REFRESH < resumed_at
    await w.session.aclose()
