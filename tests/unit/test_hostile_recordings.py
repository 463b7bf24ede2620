"""Recordings are data (issue 44): ``replay`` of every crafted file of
``tests/fixtures/hostile/`` (``tests/support/hostile_fixtures.py`` says what each is) ends
with one sentence and status 1 or 2, within 2 s of CPU and 200 MB, imports nothing the
file names, writes nothing beside it; ``replay --list`` prints no escape of a marker."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO
from tests.support.hostile_fixtures import READABLE, SHAPES

HOSTILE = FIXTURES / "hostile"
BAD = sorted(set(SHAPES) - READABLE)
CONTROLS = ("\x1b", "\x07", "\x9b")


_CHILD = """import atexit, os, sys
def _hwm():
    kib = next(int(line.split()[1]) for line in open("/proc/self/status")
               if line.startswith("VmHWM:"))
    with open(os.environ["HWM_FILE"], "w") as fh:
        fh.write(str(kib))
atexit.register(_hwm)
from console.cli import main
sys.exit(main())
"""


def _replay(args: list[str], tmp: Path) -> tuple[int, str, str, float, int]:
    """``pod-console replay ARGS``: status, out, err, CPU seconds, peak RSS in bytes."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "POD_CONSOLE_STATE_DIR": str(tmp / "state"),
           "XDG_STATE_HOME": str(tmp / "xdg"), "XDG_CONFIG_HOME": str(tmp / "cfg")}
    env.pop("POD_CONSOLE_CONFIG", None)
    with open(tmp / "out", "wb") as out, open(tmp / "err", "wb") as err:
        # the peak RSS is the child's own (VmHWM, written at its exit): wait4's ru_maxrss
        # carries the parent's across fork and exec (a 3 GB test worker read as 3 GB)
        p = subprocess.Popen([sys.executable, "-c", _CHILD, "replay", *args],
                             stdin=subprocess.DEVNULL, stdout=out,
                             stderr=err, env={**env, "HWM_FILE": str(tmp / "hwm")}, cwd=tmp)
        deadline = time.monotonic() + 60
        while True:  # a bound for a broken build; the CPU bound below is the test's
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                p.wait()
                raise AssertionError(f"replay {args} still running after 60 s")
            time.sleep(0.02)
    rc = os.waitstatus_to_exitcode(status)
    p.returncode = rc
    cpu = usage.ru_utime + usage.ru_stime
    rss = int((tmp / "hwm").read_text()) * 1024
    return rc, (tmp / "out").read_text(errors="replace"), \
        (tmp / "err").read_text(errors="replace"), cpu, rss


@pytest.mark.parametrize("name", BAD)
def test_a_crafted_recording_ends_replay_with_one_sentence(tmp_path: Path, name: str) -> None:
    f = tmp_path / "ticket" / name
    f.parent.mkdir()
    shutil.copyfile(HOSTILE / name, f)
    rc, out, err, cpu, rss = _replay([str(f)], tmp_path)
    assert rc in (1, 2), (rc, out[-500:], err[-2000:])
    assert "Traceback" not in err and err.count("\n") == 1, err[-2000:]
    assert err.startswith("pod-console replay: ") and f.name in err, err
    assert not out
    assert cpu < 2.0, f"{name}: {cpu:.2f} s of CPU"
    assert rss < 200 * 1024 * 1024, f"{name}: {rss >> 20} MB"
    assert sorted(p.name for p in f.parent.iterdir()) == [name]  # no -wal, no -shm
    assert "pod-agent" not in err and "usage:" not in err  # pod_agent's CLI never ran


def test_the_import_shape_is_refused_by_name() -> None:
    from console.session.record.files import open_tape
    from console.session.record.store import RecordingError

    before = set(sys.modules)
    tape = open_tape(HOSTILE / "import.podrec")
    try:
        with pytest.raises(RecordingError, match="may not hold"):
            tape.state_at(0)
    finally:
        tape.close()
    assert "pod_agent.__main__" not in set(sys.modules) - before


def test_a_good_recording_still_reads(tmp_path: Path) -> None:
    """The base the shapes are cut from reads whole: what is refused is the shape."""
    from console.session.record.files import open_tape

    tape = open_tape(HOSTILE / "alert-escapes.podrec")
    try:
        n = len(tape.times())
        assert n == 70
        for i in (0, n // 2, n - 1):
            assert tape.state_at(i).view is not None
    finally:
        tape.close()
    assert sorted(p.name for p in HOSTILE.glob("alert-escapes.podrec*")) == [
        "alert-escapes.podrec"]


def test_list_prints_no_escape_of_a_recorded_marker(tmp_path: Path) -> None:
    f = tmp_path / "ticket" / "alert-escapes.podrec"
    f.parent.mkdir()
    shutil.copyfile(HOSTILE / "alert-escapes.podrec", f)
    rc, out, err, _, _ = _replay(["--list", str(f)], tmp_path)
    assert rc == 0, err
    assert "CRIT Q down" in out
    assert not any(c in out + err for c in CONTROLS), repr(out)
    assert sorted(p.name for p in f.parent.iterdir()) == [f.name]


def test_the_words_of_a_recorded_state_are_cleaned_when_read() -> None:
    from console.session.record.files import open_tape

    tape = open_tape(HOSTILE / "state-escapes.podrec")
    try:
        st = tape.state_at(0)
    finally:
        tape.close()
    assert st.stale is not None and st.stale.startswith("refused")
    assert st.snapshot is not None
    words = [st.stale, *(s.health_detail for s in st.snapshot.slots)]
    assert all(w.startswith(("refused", "200")) for w in words), words
    assert not any(c in w for w in words for c in CONTROLS), words


def test_every_type_the_state_can_hold_is_in_the_allow_list() -> None:
    """The allow-list is the state's types, field by field: a type added to the state
    (or to anything it holds) fails here, not in a recorder that refuses to write it."""
    import importlib
    import pkgutil
    import re

    from msgspec import Struct
    from pydantic import BaseModel

    import console
    from console.session.record.codec import RECORDED_TYPES
    from console.session.view import ConsoleState

    by_name: dict[str, set[type]] = {}
    for m in pkgutil.walk_packages(console.__path__, "console."):
        if any(part in m.name for part in (".ui", ".commands", ".demo", "cli")):
            continue  # not the state's: screens and commands only read it
        mod = importlib.import_module(m.name)
        for k, v in vars(mod).items():
            if isinstance(v, type) and v.__module__ == mod.__name__ and (
                    (issubclass(v, Struct) and v is not Struct)
                    or (issubclass(v, BaseModel) and v is not BaseModel)):
                by_name.setdefault(k, set()).add(v)
    seen: set[type] = set()
    todo: list[type] = [ConsoleState]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        annotations = ([str(a) for k in cls.__mro__
                        for a in vars(k).get("__annotations__", {}).values()]
                       if issubclass(cls, Struct)
                       else [str(f.annotation) for f in cls.model_fields.values()])
        for word in {w for a in annotations for w in re.findall(r"[A-Za-z_]\w*", a)}:
            todo.extend(by_name.get(word, ()))
    names = {f"{c.__module__}:{c.__qualname__}" for c in seen}
    assert names <= set(RECORDED_TYPES), sorted(names - set(RECORDED_TYPES))
