"""Replay on a real recording (the recorder's SQLite file, read by its ``SqliteTape``
through ``files.open_tape``): every replayed poll's snapshot equals what the live
session showed at that poll, ``]`` reaches the alert that fired, ``--list`` names it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from console.session.record import files
from console.session.record.replay import Replay
from console.ui.app import make_app
from tests.session.world import world
from tests.support.waits import until

T0 = 1_796_000_000.0


async def test_a_recording_replays_as_it_was_shown(tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    w.slots.values = {t.slot: {"ttft_p95_s": 0.5, "kv_cache_usage": 0.3,
                               "generation_tps": 12.0} for t in w.slots.targets}
    live = []
    for i in range(40):
        if i == 20:
            w.slots.down.add("Q27")  # a slot dies: an alert, a marker
        assert await w.session.poll()
        live.append(w.session.state())
        w.clock.advance(2.0)
    rec: Any = getattr(w.session, "recorder", None)
    assert rec is not None and await asyncio.to_thread(rec.flush)
    await w.session.aclose()
    tape = files.open_tape(rec.path)
    assert len(tape.times()) == len(live)
    for i, st in enumerate(live):
        assert tape.state_at(i).snapshot == st.snapshot, i
    summary = files.summarize(rec.path)
    assert summary.polls == len(live) and any("Q27" in x for x in summary.incidents)
    app = make_app(Replay(tape, state_dir=tmp_path / "replay-state"))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: type(app.screen).__name__ == "MainScreen", "main")
        assert app.replay is not None
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: app.replay is not None and app.replay.cursor.index == 20,
                    "] at the poll where Q27 went down")
        health = {s.slot: s.health for s in app.console_state().snapshot.slots}
        assert health["Q27"] == "down" and app.console_state().snapshot == live[20].snapshot
