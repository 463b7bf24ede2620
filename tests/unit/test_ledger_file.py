"""The ledger file itself: a line that is not a record is reported once and skipped, a
record is never glued to one cut by a crash, and its lock refuses a second holder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.operations.ledger import Busy, Ledger, exclusive, in_progress
from tests.conftest import REPO

BAD = ['{"t": "abc", "event": "created", "name": "x", "pod": "p9"}', "null", "[1]",
       '{"t": null, "event": "create-requested", "name": "y"}',
       '{"t": 1, "event": "created", "name": {"a": 1}, "pod": "p8"}',
       '{"t": 1e999, "event": "create-requested", "name": "z"}']


def test_lines_that_are_not_records_are_skipped_and_said(tmp_path: Path) -> None:
    path = tmp_path / "pods.jsonl"
    good = [{"t": 10.0, "event": "create-requested", "name": "n1"},
            {"t": 11.0, "event": "created", "name": "n1", "pod": "p1", "cost": 4.18}]
    path.write_text("\n".join([BAD[0], json.dumps(good[0]), *BAD[1:],
                               json.dumps(good[1])]) + "\n")
    ledger = Ledger(path)
    [entry] = ledger.open_entries()  # raised ValueError/TypeError on the first bad line
    assert (entry.pod_id, entry.name, entry.cost) == ("p1", "n1", 4.18)
    assert [b.number for b in ledger.bad_lines()] == [1, 3, 4, 5, 6, 7]
    # reported once: a "skipped" record says which, and the next reading is quiet
    for b in ledger.bad_lines():
        ledger.record("skipped", line=b.number, why=b.why)
    assert ledger.bad_lines() == [] and len(ledger.open_entries()) == 1


def test_a_nan_cost_in_the_ledger_is_no_cost(tmp_path: Path) -> None:
    path = tmp_path / "pods.jsonl"
    path.write_text('{"t": 1, "event": "created", "name": "n", "pod": "p", "cost": NaN}\n')
    [entry] = Ledger(path).open_entries()
    assert entry.cost is None and "$" not in entry.describe()


def test_a_record_is_never_glued_to_one_cut_by_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "pods.jsonl"
    path.write_text('{"t": 1, "event": "create-requested", "name": "old"}\n{"t": 2, "ev')
    ledger = Ledger(path)
    ledger.record("create-requested", name="after-the-crash")
    names = [e.name for e in ledger.open_entries()]
    assert names == ["old", "after-the-crash"]  # the new one was lost, glued to the cut
    assert [b.number for b in ledger.bad_lines()] == [2]


def test_the_lock_refuses_a_second_holder_and_names_the_first(tmp_path: Path) -> None:
    with exclusive(tmp_path, "pod-console up"):
        with pytest.raises(Busy, match=r"another pod-console up/down.*pod-console up"), \
                exclusive(tmp_path, "console f"):
            pass
        # another process too (flock is per open file, across processes alike)
        code = ("import sys; from pathlib import Path; "
                "from console.operations.ledger import Busy, exclusive\n"
                "try:\n  with exclusive(Path(sys.argv[1]), 'down'): print('held')\n"
                "except Busy as e: print('busy', e)")
        r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
        assert r.stdout.startswith("busy") and "pod-console up" in r.stdout, r.stderr
    with exclusive(tmp_path, "console f"):
        pass  # free again once the first let go


def test_who_holds_the_lock_is_read_without_taking_it(tmp_path: Path) -> None:
    assert in_progress(tmp_path) is None
    code = ("import sys, time; from pathlib import Path; "
            "from console.operations.ledger import exclusive\n"
            "with exclusive(Path(sys.argv[1]), 'pod-console up'):\n"
            "    print('held', flush=True); time.sleep(120)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert in_progress(tmp_path) == f"pid {holder.pid}: pod-console up"
        # reading it took nothing: the holder still holds it
        with pytest.raises(Busy), exclusive(tmp_path, "down"):
            pass
    finally:
        holder.kill()  # as kill -9: its line stays, its pid is gone
        holder.wait(30)
    assert in_progress(tmp_path) is None
    with exclusive(tmp_path, "console f"):
        assert in_progress(tmp_path) is not None
    assert in_progress(tmp_path) is None  # released: cleared
