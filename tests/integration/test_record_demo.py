"""Issue 32, "done when": the demo recorded with faults injected from its palette's list
(a slot dies, Xid 79, the gateway cools a slot down, traffic stops), then opened as a
tape. Every figure of every recorded poll, rebuilt from the stored samples by the
poller's own code, equals what the live session showed at that poll (the gateway's
reading included), and every fault is a marker: its injection (audited as
the palette audits it, with its title) and, for the slot and the GPU, the alert it fires.

Real parts: the demo's slots (HTTP, their real exposition), its agent and NVML stand-in,
the RunPod emulator, the poller, the session, the recorder's SQLite file. The polls run
back to back (a few a second) instead of one every 2 s: 300 polls, the equivalent of ten
minutes at the default refresh."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from console.session.record.reader import SqliteTape
from console.session.session import Session
from console.session.view import ConsoleState

pytestmark = pytest.mark.realtime

POLLS = 300
FAULTS = {40: "slot FLASH dies", 60: "gateway puts Q27 in cooldown", 110: "GPU 0 Xid 79",
          190: "traffic stops"}
"""Poll → the fault injected before it. The gateway's cooldown needs Q27's traffic (its
calls fail): 130 polls before the traffic stops, its alert's down_for_s well inside."""


def _same(live: ConsoleState, back: ConsoleState) -> None:
    """Everything a screen shows from the poll (the clock's ``now`` and the ages it
    makes are the moment a screen is drawn, not the poll's)."""
    assert back.snapshot == live.snapshot
    for name in ("pod", "alerts", "stale", "allowed", "alert_history", "thresholds",
                 "polled_at", "spend_month", "stop", "gpu_marks", "stalled", "view",
                 "gpus", "utils", "states", "operation", "ready",
                 # the demo's gateway (issue 34): its reading, users and deployments
                 "gateway", "idle_source", "active_window_s"):
        assert getattr(back, name) == getattr(live, name), name


async def test_demo_recorded_and_replayed_figure_for_figure(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    from console.commands.tui_cmd import demo_context
    from console.demo.deployment import DemoDeployment

    monkeypatch.setenv("POD_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    # a slot takes 4 s to start: the one killed is out (backoff, then starting) for ~6 s,
    # which polls slowed down by a loaded machine still see (at 1 s it was ~2 s, and a
    # slow poll could miss it and its alert)
    demo = DemoDeployment(workdir=tmp_path / "demo", seed=7, startup_s=4.0, rate=2.0,
                          clock_speed=60)
    await asyncio.to_thread(demo.start)
    try:
        ctx = demo_context(demo, refresh_s=2.0)
        session = Session(ctx)
        faults = {title: fn for title, _, fn in demo.faults()}
        # up and serving before the record starts counting
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            await session.poll()
            snap = session.snapshot
            if snap is not None and all(s.figures is not None for s in snap.slots):
                break
            await asyncio.sleep(0.2)
        live: list[ConsoleState] = []
        injected: dict[str, float] = {}
        # the live session's states from here (the recorder started with the first poll)
        assert session.recorder is not None
        assert await asyncio.to_thread(session.recorder.flush)
        first = session.recorder.written
        for i in range(POLLS):
            if i in FAULTS:  # as the palette injects one: audited, then caused
                title = FAULTS[i]
                injected[title] = time.time() - 0.01  # the audit's time is to the ms
                await asyncio.to_thread(ctx.registry.audit.append, "demo_fault",
                                        {"fault": title}, "started")
                faults[title]()
            assert await session.poll()
            live.append(session.state())
            await asyncio.sleep(0.15)
        rec = session.recorder
        assert rec is not None
        assert await asyncio.to_thread(rec.flush, 30.0)
        assert rec.dropped == 0 and rec.paused is None
        assert rec.path is not None
        tape = SqliteTape(rec.path)
        assert len(tape.times()) == first + POLLS
        rebuilt = 0
        for i, want in enumerate(live):
            _same(want, tape.state_at(first + i))
            stored, _ = tape.record(first + i)
            rebuilt += sum(1 for how in stored["fig"].values() if how[0] in "ds")
        # the figures were computed from the stored samples (d: this poll's, s: a stale
        # slot's last good poll), none stored as numbers
        assert rebuilt == sum(1 for st in live if st.snapshot
                              for s in st.snapshot.slots if s.figures is not None)
        # the plots: the recorded points up to the poll, the history's own way
        last = tape.state_at(first + POLLS - 1)
        assert last.history.series("FLASH", "ttft_p95_s").points
        markers = tape.markers()
        kinds = {(m.kind, m.key.split(":")[0]) for m in markers}
        after = {title: [m for m in markers if m.t >= t] for title, t in injected.items()}
        assert any(m.kind == "alert" and "FLASH" in m.text for m in after["slot FLASH dies"]), \
            kinds
        assert any(m.kind == "xid" and "79" in m.text for m in after["GPU 0 Xid 79"]), kinds
        # the demo's gateway was recorded with the rest, its cooldown fired as an alert
        assert all(st.gateway is not None for st in live)
        assert {"alice", "bob"} <= {u.name for u in live[-1].gateway.users}  # type: ignore[union-attr]
        assert any(m.kind == "alert" and m.key == "gw-cooldown:Q27"
                   for m in after["gateway puts Q27 in cooldown"]), kinds
        for title in FAULTS.values():  # each injection, where ] reaches it
            assert any(m.kind == "operation" and title in m.text
                       for m in after[title]), (title, kinds)
        tape.close()
        await session.aclose()
    finally:
        await asyncio.to_thread(demo._stop_all)
