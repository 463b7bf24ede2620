"""A wall only shows: its session reads the spend book the consoles keep and never writes
``spend.json`` (it did, once a minute, from every wall and web-wall session on the state
directory). The book refuses a write itself, so no other path can make one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.session.session import POD_POLL_S, Session
from console.session.spend import SpendBook
from tests.session.world import inline, world

T0 = 1_790_000_000.0


async def test_a_wall_reads_the_spend_book_and_never_writes_it(tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    path = w.settings.spend_path
    assert path is not None
    # an earlier run today, recorded by a console
    path.parent.mkdir(parents=True, exist_ok=True)
    earlier = {"pod_id": "old", "started_at": T0 - 3 * 3600, "cost_per_hr": 2.0,
               "last_running": T0 - 2 * 3600}
    path.write_text(json.dumps([earlier]))
    before = path.read_bytes()
    wall = Session(w.ctx, wall=True, run_blocking=inline)
    w.pod.run(T0 - 600)
    for _ in range(3):  # a new run (saved at once by a console) and a minute after
        assert await wall.poll()
        w.clock.advance(POD_POLL_S + 30)
    assert path.read_bytes() == before
    assert not list(path.parent.glob("spend.*tmp"))
    # it still counts what the consoles recorded
    st = wall.state()
    assert st.pod is not None and (st.pod.spend_today(st.now) or 0) >= 2.0
    # a console on the same state dir records the run
    assert await w.session.poll()
    assert path.read_bytes() != before


def test_a_read_only_book_refuses_to_save(tmp_path: Path) -> None:
    book = SpendBook(tmp_path / "spend.json", read_only=True)
    assert not book.due(T0)
    with pytest.raises(PermissionError):
        book.save(T0)
    assert not (tmp_path / "spend.json").exists()
