"""Issue 32: the recorder under a session, and what goes wrong with files.

The session drives the fake sources of ``world.py`` (their figures are stored as numbers:
they come with no scrape); the recorder, SQLite, zstd and the reader are the real ones."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from console.session.record.export import export, secrets_of
from console.session.record.reader import SqliteTape, list_recordings
from console.session.record.store import RecordingError
from console.sources.collect.http import RELAY_ENV
from tests.conftest import REPO
from tests.session.world import World, world

T0 = 1_796_000_000.0


def _figures(w: World) -> None:
    w.slots.values = {t.slot: {"ttft_p95_s": 0.5, "kv_cache_usage": 0.3,
                               "generation_tps": 12.0} for t in w.slots.targets}


async def _polls(w: World, n: int) -> None:
    for _ in range(n):
        assert await w.session.poll()
        w.clock.advance(2.0)


async def _recorded(tmp: Path, n: int = 70) -> tuple[World, Path]:
    w = world(tmp, T0)
    _figures(w)
    await _polls(w, n)
    rec = w.session.recorder
    assert rec is not None and await asyncio.to_thread(rec.flush)
    assert rec.path is not None
    return w, rec.path


async def test_two_sessions_on_one_state_dir_write_files_of_their_own(tmp_path: Path) -> None:
    a = world(tmp_path, T0)
    b = world(tmp_path, T0)
    assert a.settings.state_dir == b.settings.state_dir
    _figures(a)
    a.slots.values["FLASH"]["ttft_p95_s"] = 0.111
    _figures(b)
    for _ in range(5):
        assert await a.session.poll() and await b.session.poll()
    for w in (a, b):
        assert w.session.recorder is not None
        assert await asyncio.to_thread(w.session.recorder.flush)
    pa, pb = a.session.recorder.path, b.session.recorder.path  # type: ignore[union-attr]
    assert pa is not None and pb is not None and pa != pb
    for path, w in ((pa, a), (pb, b)):
        tape = SqliteTape(path)
        assert len(tape.times()) == 5
        assert tape.state_at(4).snapshot == w.session.state().snapshot
        tape.close()
    listed = list_recordings(pa.parent)
    assert {i.path for i in listed} == {pa, pb} and all(i.live for i in listed)
    await a.session.aclose()
    await b.session.aclose()
    assert not any(i.live for i in list_recordings(pa.parent))


async def test_web_wall_tabs_record_once_and_a_tab_takes_over_when_the_recorder_goes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tabs of the web wall read their slots through one scrape relay: one of them
    records for all, and when its process goes another carries on."""
    monkeypatch.setenv(RELAY_ENV, "http://127.0.0.1:9 token")
    tabs = [world(tmp_path, T0, wall=True) for _ in range(3)]
    for w in tabs:
        _figures(w)
    for _ in range(3):
        for w in tabs:
            assert await w.session.poll()
    recording = [w for w in tabs if w.session.recorder is not None]
    assert len(recording) == 1, "every tab recorded its own copy"
    first = recording[0]
    assert first.session.recorder is not None
    assert await asyncio.to_thread(first.session.recorder.flush)
    first_path = first.session.recorder.path
    assert first_path is not None
    await first.session.aclose()  # its tab closes: another tab records from its next poll
    rest = [w for w in tabs if w is not first]
    for w in rest:
        assert await w.session.poll()
    now_recording = [w for w in rest if w.session.recorder is not None]
    assert len(now_recording) == 1
    rec = now_recording[0].session.recorder
    assert rec is not None and await asyncio.to_thread(rec.flush)
    assert rec.path is not None and rec.path != first_path
    for w in rest:
        await w.session.aclose()
    assert len(list(first_path.parent.glob("*.podrec"))) == 2


async def test_a_full_disk_pauses_recording_with_an_alert_and_a_marker(tmp_path: Path) -> None:
    w, path = await _recorded(tmp_path, 3)
    rec = w.session.recorder
    assert rec is not None
    full = True

    def disk() -> None:
        if full:
            raise OSError(errno.ENOSPC, "No space left on device")

    rec.fault, rec.retry_s = disk, 0.0
    await _polls(w, 2)
    assert await asyncio.to_thread(rec.flush)
    await asyncio.sleep(0)  # the writer's news reaches the loop
    await _polls(w, 1)  # the console goes on; the next poll judges it
    assert await asyncio.to_thread(rec.flush)
    assert rec.paused == "disk full"
    assert "recording" in {a.key for a in w.session.alerts.firing()}
    full = False
    await _polls(w, 2)
    assert await asyncio.to_thread(rec.flush)
    await asyncio.sleep(0)
    assert rec.paused is None
    await _polls(w, 1)
    w.clock.advance(3600)  # past the alert's hold
    await _polls(w, 1)
    assert "recording" not in {a.key for a in w.session.alerts.firing()}
    assert await asyncio.to_thread(rec.flush)
    tape = SqliteTape(path)
    texts = [m.text for m in tape.markers() if m.kind == "recording"]
    assert texts[0] == "recording paused: disk full"
    assert texts[1].startswith("recording resumed")
    assert len(tape.times()) == 3 + 4  # before, and from the first write that worked on
    for i in range(len(tape.times())):
        tape.state_at(i)
    await w.session.aclose()


async def test_export_holds_numbers_names_and_markers_never_a_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-live-7f3a9c1d2e4b"
    token = "hook-token-55aa66bb"
    monkeypatch.setenv("VLLM_API_KEY", key)
    w = world(tmp_path, T0, webhook_url=f"https://hooks.example/{token}")
    _figures(w)
    # a server that echoes the key back in its error, and a URL with credentials
    w.slots.down = {"Q27"}
    await _polls(w, 30)
    snap = w.session.snapshot
    assert snap is not None
    rec = w.session.recorder
    assert rec is not None and await asyncio.to_thread(rec.flush)
    assert rec.path is not None
    # what the live file holds of it (the poll's own words) is put there on purpose:
    from msgspec.structs import replace

    from console.session.record.store import PollItem
    st = w.session.state()
    bad = replace(st, stale=f"401 for key {key} at http://admin:{token}@10.0.0.1/")
    rec.poll(PollItem(bad))
    assert await asyncio.to_thread(rec.flush)
    out = tmp_path / "ticket.podrec"
    secrets = secrets_of(w.settings)
    assert key in secrets and any(token in s for s in secrets)
    n = export(rec.path, out, T0 + 10, T0 + 1000, secrets)
    assert n == 26
    blob = out.read_bytes()
    assert key.encode() not in blob and token.encode() not in blob
    tape = SqliteTape(out)
    assert [round(t - T0) for t in tape.times()][:2] == [10, 12]
    last = tape.state_at(len(tape.times()) - 1)
    assert last.stale is not None and key not in last.stale and token not in last.stale
    assert "[redacted]" in last.stale
    live = SqliteTape(rec.path)
    assert tape.state_at(0).snapshot == live.state_at(5).snapshot
    grep = subprocess.run(["grep", "-c", key, str(out)], capture_output=True, text=True)
    assert grep.stdout.strip() == "0"
    await w.session.aclose()


async def test_retention_drops_the_oldest_chunks_by_age(tmp_path: Path) -> None:
    w, path = await _recorded(tmp_path, 130)
    old = path.parent / "20000101-000000-1-0.podrec"
    old.write_bytes(path.read_bytes())
    os.utime(old, (T0 - 30 * 86400, T0 - 30 * 86400))
    rec = w.session.recorder
    assert rec is not None
    rec.keep_s = 100.0  # everything but the last 100 s is old
    await _polls(w, 60)  # the next chunk runs retention
    assert await asyncio.to_thread(rec.flush)
    assert not old.exists()
    tape = SqliteTape(path)
    assert tape.times()[0] >= w.clock() - 100 - 2 * 60 * 2
    tape.state_at(len(tape.times()) - 1)
    await w.session.aclose()


def _expect(path: Path, words: str) -> None:
    """Opening and reading every poll either works or says ``words``: never another
    exception, never a hang (a bound on the time)."""
    began = time.monotonic()
    with pytest.raises(RecordingError, match=words):
        tape = SqliteTape(path)
        for i in range(len(tape.times())):
            tape.state_at(i)
        tape.markers()
        raise RecordingError("read whole")
    assert time.monotonic() - began < 10


async def test_bad_files_get_a_clear_error(tmp_path: Path) -> None:
    w, path = await _recorded(tmp_path, 130)
    await w.session.aclose()  # checkpointed: one file
    good = path.read_bytes()
    (tmp_path / "empty.podrec").write_bytes(b"")
    _expect(tmp_path / "empty.podrec", "truncated")
    (tmp_path / "text.podrec").write_text("slot,ttft\nFLASH,0.2\n" * 50)
    _expect(tmp_path / "text.podrec", "not an SQLite file")
    foreign = tmp_path / "foreign.podrec"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE notes (x)")
    db.commit()
    db.close()
    _expect(foreign, "not a pod-console recording")
    future = tmp_path / "future.podrec"
    future.write_bytes(good)
    db = sqlite3.connect(future)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'version'")
    db.commit()
    db.close()
    _expect(future, "newer pod-console")
    cut = tmp_path / "cut.podrec"
    cut.write_bytes(good[:len(good) // 2])
    _expect(cut, "corrupt|truncated|not in the file")
    bad = tmp_path / "bad.podrec"
    mid = len(good) // 2
    bad.write_bytes(good[:mid] + bytes(range(256)) * 16 + good[mid + 4096:])
    _expect(bad, "corrupt|truncated|read whole")
    _expect(tmp_path / "nothing.podrec", "no such file")
    listed = {i.path.name: i.error for i in list_recordings(tmp_path)}
    assert "newer pod-console" in (listed["future.podrec"] or "")


RECORDING_CHILD = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from tests.session.world import world
    async def main():
        w = world(Path(sys.argv[1]), 1_796_000_000.0)
        w.slots.values = {t.slot: {"ttft_p95_s": 0.5} for t in w.slots.targets}
        n = 0
        while True:
            assert await w.session.poll()
            w.clock.advance(2.0)
            n += 1
            await asyncio.to_thread(w.session.recorder.flush)
            print(n, w.session.recorder.path, flush=True)
    asyncio.run(main())
""")


def test_kill_9_loses_at_most_the_last_poll(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    child = subprocess.Popen([sys.executable, "-c", RECORDING_CHILD, str(tmp_path)],
                             stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
    assert child.stdout is not None
    last = ""
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            last = child.stdout.readline()
            if int(last.split()[0]) >= 75:  # past a packed chunk, in the next one
                break
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    n, path = int(last.split()[0]), Path(last.split()[1])
    tape = SqliteTape(path)
    assert len(tape.times()) >= n
    for i in (0, n - 1, len(tape.times()) - 1):
        st = tape.state_at(i)
        assert st.snapshot is not None


@pytest.mark.realtime
def test_headless_record_then_export(tmp_path: Path) -> None:
    """``pod-console record`` (no screen) on a deployment at 127.0.0.1, then ``record
    export`` of what it wrote: a file that opens on its own."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {REPO / 'profiles'}\nstate_dir: {tmp_path / 'state'}\n"
                   "refresh_s: 1\npod:\n  host: 127.0.0.1\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-m", "console.cli", "record", "--config", str(cfg),
                        "--for", "3"], capture_output=True, text=True, timeout=120, env=env,
                       cwd=REPO)
    assert r.returncode == 0, r.stderr
    path = Path(r.stdout.split("recording to ", 1)[1].split()[0])
    (info,) = list_recordings(path.parent)
    assert info.path == path and info.polls >= 2 and not info.live
    out = tmp_path / "ticket.podrec"
    r = subprocess.run([sys.executable, "-m", "console.cli", "record", "export", "--config",
                        str(cfg), "--from", "10m ago", "--to", "now", str(out)],
                       capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert r.returncode == 0, r.stderr
    tape = SqliteTape(out)
    assert len(tape.times()) == info.polls
    st = tape.state_at(len(tape.times()) - 1)
    assert st.snapshot is not None and {s.slot for s in st.snapshot.slots} == {"FLASH", "Q27"}


async def test_retention_by_size_drops_this_files_oldest_chunks(tmp_path: Path) -> None:
    w, path = await _recorded(tmp_path, 250)
    rec = w.session.recorder
    assert rec is not None
    rec.max_bytes = 1  # far under: all but the chunk being written go
    await _polls(w, 60)  # the next chunk runs retention
    assert await asyncio.to_thread(rec.flush)
    tape = SqliteTape(path)
    times = tape.times()
    assert times[0] > T0 + 2 * 200  # the oldest polls went
    assert times[-1] == w.clock() - 2.0  # the newest stay, and read
    tape.state_at(len(times) - 1)
    await w.session.aclose()


async def test_record_false_records_nothing(tmp_path: Path) -> None:
    w = world(tmp_path, T0, record=False)
    _figures(w)
    await _polls(w, 3)
    assert w.session.recorder is None
    assert not (w.settings.state_dir / "recordings").exists()


@pytest.fixture
def tiny_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A 4 MiB filesystem of its own (tmpfs), where this machine lets the test mount
    one; skipped elsewhere (the injected ENOSPC above covers the same path). Filled to
    the last byte by the test, whatever its size; large enough that, once the filler is
    gone, the recording's next chunk and its WAL fit (at 512 KiB the database took up to
    350 KiB, and the writes after the resume filled the disk again about one run in two)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


async def test_a_really_full_disk_pauses_and_resumes(tiny_disk: Path) -> None:
    w = world(tiny_disk, T0)
    _figures(w)
    await _polls(w, 5)
    rec = w.session.recorder
    assert rec is not None and await asyncio.to_thread(rec.flush)
    rec.retry_s = 0.0
    filler = tiny_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    await _polls(w, 80)  # more than a chunk: every write meets the full disk
    assert await asyncio.to_thread(rec.flush)
    await _polls(w, 1)
    assert rec.paused == "disk full"
    assert "recording" in {a.key for a in w.session.alerts.firing()}
    filler.unlink()
    await _polls(w, 5)
    assert await asyncio.to_thread(rec.flush)
    assert rec.paused is None
    assert rec.path is not None
    tape = SqliteTape(rec.path)
    assert [m.text for m in tape.markers() if m.kind == "recording"] == [
        "recording paused: disk full", "recording resumed (was: disk full)"]
    assert len(tape.times()) >= 10
    tape.state_at(len(tape.times()) - 1)
    await w.session.aclose()
