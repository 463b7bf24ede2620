"""The live pause (atop's twin mode) in the console: ``p`` holds the screen on the poll
shown while polling goes on into the pause's tape; the replay keys move over what was
polled (after the pause too); ``p`` again shows live. The console runs on the session
tier's in-process sources (``world.py``): polls are made by the test, on its clock."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from console.ui.app import make_app
from console.ui.widgets.header import PodHeader
from console.ui.widgets.plot_widgets import SeriesPlot
from console.ui.widgets.slots import SlotsTable
from tests.session.world import world
from tests.support.waits import until

T0 = 1_795_000_000.0
LIMIT_S = 30.0


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def header(app: Any) -> str:
    return app.screen.query_one(PodHeader).render().plain


def clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(t))


def q27_health(app: Any) -> str:
    state = app.console_state()
    return next(s.health for s in state.snapshot.slots if s.slot == "Q27")


async def test_p_freezes_the_screen_while_polling_goes_on_and_p_returns(tmp_path: Path
                                                                         ) -> None:
    w = world(tmp_path, T0)
    app = make_app(w.ctx)

    async with app.run_test(size=(120, 40)) as pilot:
        async def poll() -> None:
            """A poll at the next time (the app's own timer may be polling: then again)."""
            w.clock.advance(2.0)
            deadline = time.monotonic() + LIMIT_S
            while not (app.live_tape.times() and app.live_tape.times()[-1] == w.clock.t):
                assert time.monotonic() < deadline, "no poll"
                await app.session.poll()
                await pilot.pause()

        await until(pilot, lambda: type(app.screen).__name__ == "MainScreen", "main screen")
        for _ in range(3):
            await poll()
        paused_at = w.clock.t
        await pilot.press("p")
        assert app.replay is not None and app.replay.live
        await until(pilot, lambda: "PAUSED" in header(app), "PAUSED in the header")
        assert clock(paused_at) in header(app)
        polls = app.session.polls
        w.slots.down.add("Q27")  # a slot dies while the screen is held
        for _ in range(3):
            await poll()
        assert app.session.polls >= polls + 3  # polling goes on
        assert app.live_tape.times()[-1] == w.clock.t  # and so does the recording
        await pilot.pause()
        assert clock(paused_at) in header(app) and q27_health(app) == "up"  # held
        await until(pilot, lambda: "6s behind live" in header(app), "how far behind")
        # the replay keys over what was polled, after the pause too
        await pilot.press("T")
        await until(pilot, lambda: clock(paused_at - 2) in header(app), "one poll back")
        # the plots end where the cursor is (not once a plot_refresh_s, as live)
        kv = next(p for p in app.screen.query(SeriesPlot) if p.metric == "kv_cache_usage")
        await until(pilot, lambda: kv.drawn is not None and kv.drawn.newest == paused_at - 2,
                    "the KV plot ends at the poll shown")
        await pilot.press("right_square_bracket")  # the alert that fired: Q27 down
        await until(pilot, lambda: q27_health(app) == "down", "at the marker")
        assert app.replay.cursor.t == paused_at + 2
        assert any("marker" in text and "Q27" in text for _, text, _ in app.log_lines)
        # no operation while paused; the operation keys are not the replay's
        app.start_operation("restart", {"slot": "Q27"})
        await until(pilot, lambda: any("not while paused" in text
                                       for _, text, _ in app.log_lines), "refused")
        assert not w.ctx.registry.executed
        await pilot.press("p")
        assert app.replay is None
        await until(pilot, lambda: "PAUSED" not in header(app), "live again")
        assert q27_health(app) == "down" and app.console_state().polled_at == w.clock.t


async def test_live_the_replay_keys_are_the_screens_own(tmp_path: Path) -> None:
    """``j`` moves the table's cursor and ``t`` is the smoke test, as before: the replay's
    bindings answer only while a recording is shown."""
    w = world(tmp_path, T0)
    app = make_app(w.ctx)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: type(app.screen).__name__ == "MainScreen", "main screen")
        w.clock.advance(2.0)
        await app.session.poll()
        table = app.screen.query_one(SlotsTable)
        await until(pilot, lambda: len(table.slots) == 2, "two slots")
        before = table.cursor
        await pilot.press("j")
        await until(pilot, lambda: table.cursor != before, "the cursor moved")
        assert app.replay is None
        assert not app.check_action("replay_step", (1,))
        assert app.check_action("live_pause", ())
