"""``pod-console replay`` and ``replay --list``: clear sentences and exit statuses for a
missing, empty, foreign, truncated or not-yet-readable file and a bad ``--at``; the
newest recording by default; ``--at`` placing the cursor; ``--list`` naming the
incidents. The file reader is ``files.open_tape`` (here a tape of states built in the
test where a file should open: the SQLite reader plugs in there)."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from console import cli
from console.commands import replay_cmd, tui_cmd
from console.session.record import files
from console.session.record.tape import Marker, MemoryTape
from tests.unit.test_replay_cursor import T0, state


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.delenv("POD_CONSOLE_CONFIG", raising=False)
    monkeypatch.delenv("POD_CONSOLE_STATE_DIR", raising=False)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    return tmp_path / "state" / "pod-console" / "recordings"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def sqlite_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE polls (seq INTEGER)")
    db.commit()
    db.close()
    return path


@pytest.mark.parametrize(("content", "says"), [
    (None, "no such file"),
    (b"", "empty, not a recording"),
    (b"# HELP vllm:num_requests_running\n", "not a pod-console recording"),
    (b"SQLite for", "not a pod-console recording"),
])
def test_a_file_that_is_no_recording_gets_one_sentence(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        content: bytes | None, says: str) -> None:
    f = tmp_path / "x.podrec"
    if content is not None:
        f.write_bytes(content)
    code, out, err = run(["replay", str(f)], capsys)
    assert code == 1 and not out
    assert err.strip() == f"pod-console replay: {f}: {says}" or says in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_an_sqlite_file_that_is_no_recording_says_so(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = sqlite_file(tmp_path / "r.podrec")
    code, _, err = run(["replay", str(f)], capsys)
    assert code == 1 and "not a pod-console recording" in err and "Traceback" not in err


def test_no_recordings_says_where_it_looked(home: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["replay"], capsys)
    assert code == 1 and f"no recordings in {home}" in err
    code, out, _ = run(["replay", "--list"], capsys)
    assert code == 0 and f"no recordings in {home}" in out


MARKS = (Marker(T0 + 30, "alert", "CRIT Q27 down", "down:Q27"),
         Marker(T0 + 40, "xid", "CRIT XID 79 on GPU1", "xid:1"),
         Marker(T0 + 90, "alert", "cleared: Q27 down", "down:Q27"))


@pytest.fixture()
def readable(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """``open_tape`` reads any SQLite file as a tape of 100 polls, 2 s apart."""
    opened: list[Path] = []

    def open_tape(path: Path) -> MemoryTape:
        files.check_file(path)
        opened.append(path)
        return MemoryTape([state(T0 + 2 * i) for i in range(100)], MARKS)
    monkeypatch.setattr(files, "open_tape", open_tape)
    return opened


def test_the_newest_recording_opens_at_the_time_asked(
        home: Path, readable: list[Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    old = sqlite_file(home / "a.podrec")
    new = sqlite_file(home / "b.podrec")
    os.utime(old, (T0, T0))
    os.utime(new, (T0 + 60, T0 + 60))
    apps: list[Any] = []
    monkeypatch.setattr(tui_cmd, "run_console", lambda app: apps.append(app) or 0)
    code, _, err = run(["replay", "--at", "11:07:30"], capsys)  # T0 is 11:06:40 UTC
    assert code == 0, err
    assert readable == [new]
    (app,) = apps
    assert app.replay.cursor.t == T0 + 50 and not app.replay.cursor.playing
    assert app.console_state().view.read_only and not app.console_state().allowed
    for at, t in (("-10s", T0 + 188), ("1m", T0 + 60), ("end", T0 + 198), ("start", T0)):
        apps.clear()
        assert run(["replay", str(old), f"--at={at}"], capsys)[0] == 0
        assert apps[0].replay.cursor.t == t, at


def test_a_bad_at_is_one_sentence(home: Path, readable: list[Path],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    f = sqlite_file(home / "a.podrec")
    code, _, err = run(["replay", str(f), "--at", "teatime"], capsys)
    assert code == 2 and "'teatime' is not a time" in err and "Traceback" not in err


def test_list_names_every_recording_and_its_incidents(
        home: Path, readable: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    sqlite_file(home / "a.podrec")
    (home / "junk.podrec").write_bytes(b"junk")
    (home / "notes.txt").write_text("not listed")
    code, out, _ = run(["replay", "--list"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert any("a.podrec" in ln and "100 polls" in ln and "2 incidents" in ln for ln in lines)
    assert "    11:07:10 CRIT Q27 down" in lines and "    11:07:20 CRIT XID 79 on GPU1" in lines
    assert not any("cleared" in ln for ln in lines)
    assert any("junk.podrec" in ln and "not a pod-console recording" in ln for ln in lines)
    assert not any("notes.txt" in ln for ln in lines)


def test_start_at_a_clock_time_before_the_start_is_the_next_day() -> None:
    from console.session.record.cursor import ReplayCursor

    tape = MemoryTape([state(T0 + 3600 * i) for i in range(20)])  # 11:06 → next day 06:06
    c = ReplayCursor(tape)
    replay_cmd.start_at(c, "02:00")
    assert time.strftime("%d %H:%M", time.gmtime(c.t)) == "19 01:06"


def test_a_recording_with_no_polls_says_so(home: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    f = sqlite_file(tmp_path / "new.podrec")
    monkeypatch.setattr(files, "open_tape", lambda path: MemoryTape([]))
    code, _, err = run(["replay", str(f)], capsys)
    assert code == 1 and "no polls" in err and "Traceback" not in err


def test_replay_keeps_its_crash_reports_and_errors_under_the_state_dir(
        home: Path, tmp_path: Path, readable: list[Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 44: replay wrote crash reports and errors.log to the XDG default, not to
    POD_CONSOLE_STATE_DIR."""
    state = tmp_path / "elsewhere"
    monkeypatch.setenv("POD_CONSOLE_STATE_DIR", str(state))
    f = sqlite_file(tmp_path / "r.podrec")
    apps: list[Any] = []
    monkeypatch.setattr(tui_cmd, "run_console", lambda app: apps.append(app) or 0)
    code, _, err = run(["replay", str(f)], capsys)
    assert code == 0, err
    (app,) = apps
    assert app.ctx is None and app.error_boundary.state_dir() == state
