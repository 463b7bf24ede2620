"""``pod-console replay`` in the console itself (``make_app`` on a
:class:`~console.session.record.replay.Replay`): the main, detail, GPU and wall screens on
a recording's states, read-only, the header saying REPLAY and the recorded time, and the
keys moving it (space, t/T, j/J, [/], 1/2/3). The recording is ten minutes of fixed
states (``states.replay_tape``): no process, no poll.

Snapshots: the replay header on the main screen at 80×24, 120×40 and 160×48.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from console.session.record.replay import Replay
from console.ui.app import PodConsoleApp, make_app
from console.ui.widgets.header import PodHeader
from tests.screens import states
from tests.support.waits import until


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch, tmp_path):
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def replay_app(wall: bool = False, at: float | None = None, **kw: Any) -> PodConsoleApp:
    return make_app(Replay(states.replay_tape(), at=at, **kw), wall=wall)


def header(app: PodConsoleApp) -> str:
    return app.screen.query_one(PodHeader).render().plain


def clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(t))


T0 = states.NOW - (states.REPLAY_POLLS - 1) * 60


async def test_keys_move_the_replay_and_the_header_says_where() -> None:
    app = replay_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: "REPLAY" in header(app), "the REPLAY header")
        assert clock(T0) in header(app) and "paused" in header(app)
        assert app.replay is not None
        c = app.replay.cursor
        await pilot.press("t")
        await until(pilot, lambda: clock(T0 + 60) in header(app), "one sample on")
        await pilot.press("t", "t", "T")
        assert c.t == T0 + 120
        await until(pilot, lambda: clock(T0 + 120) in header(app), "two samples on")
        # the next marker: Q27 stops answering; the first poll that shows it
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: c.t == states.NOW - 180, "at the first marker")
        assert any("marker" in text and "Q27" in text for _, text, _ in app.log_lines)
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert c.t == states.NOW - 60  # the restart, 90 s before the end
        await pilot.press("left_square_bracket")
        assert c.t == states.NOW - 180  # back to the Xid (the same poll)
        # j: a duration forward; J: a clock time
        await pilot.press("j")
        await until(pilot, lambda: type(app.screen).__name__ == "JumpScreen", "the dialog")
        await pilot.press(*"2m", "enter")
        await until(pilot, lambda: c.t == states.NOW - 60, "two minutes on")
        await pilot.press("J")
        await until(pilot, lambda: type(app.screen).__name__ == "JumpScreen", "the dialog")
        await pilot.press(*"soon", "enter")  # not a time
        assert type(app.screen).__name__ == "JumpScreen"  # stays, saying why
        err = str(app.screen.query_one("#jerror").render())
        assert "not" in err and "03:10" in err
        inp = app.screen.query_one("#jinput")
        inp.value = clock(T0 + 185)  # type: ignore[attr-defined]
        await pilot.press("enter")
        await until(pilot, lambda: c.t == T0 + 180, "at the clock time")
        assert type(app.screen).__name__ == "MainScreen"
        # 60×, play: a minute a real second
        await pilot.press("3", "space")
        assert c.playing and c.speed == 60
        await until(pilot, lambda: "60×" in header(app), "the header says 60×")
        await until(pilot, lambda: c.t >= T0 + 300, "playing on")
        await pilot.press("space")
        assert not c.playing
        await until(pilot, lambda: "paused" in header(app), "paused again")


async def test_a_replay_is_read_only_every_operation_refused_at_the_sender() -> None:
    app = replay_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: "REPLAY" in header(app), "the REPLAY header")
        state = app.console_state()
        assert state.view.read_only and not state.allowed
        await pilot.press("R", "f", "b")  # restart, fallback, rebalance: hidden and refused
        app.start_operation("restart", {"slot": "Q27"})  # even asked for directly
        from console.session.record.replay import ReplaySession

        assert isinstance(app.session, ReplaySession)
        reg = app.session.registry
        await until(pilot, lambda: bool(reg.history), "the refusal")
        assert not reg.executed
        assert [out.state for _, _, out in reg.history] == ["refused"]
        assert any("refused" in text for _, text, _ in app.log_lines)


async def test_detail_gpu_and_wall_screens_show_the_recording() -> None:
    app = replay_app(at=states.NOW)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: "REPLAY" in header(app), "the REPLAY header")
        await pilot.press("g")
        await until(pilot, lambda: type(app.screen).__name__ == "GpuScreen", "GPU screen")
        await until(pilot, lambda: "REPLAY" in header(app) and clock(states.NOW) in header(app),
                    "the GPU screen's header")
        await pilot.press("T")
        await until(pilot, lambda: clock(states.NOW - 60) in header(app), "stepped there")
        await pilot.press("escape")
        await until(pilot, lambda: type(app.screen).__name__ == "MainScreen", "main")
        await pilot.press("enter")
        await until(pilot, lambda: type(app.screen).__name__ == "SlotDetailScreen", "detail")
        await until(pilot, lambda: "REPLAY" in header(app), "the detail's header")
    wall = replay_app(wall=True)
    async with wall.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: type(wall.screen).__name__ == "WallScreen", "the wall")
        await until(pilot, lambda: "REPLAY" in header(wall), "the wall's header")
        await pilot.press("space")  # play, not the wall's next view
        assert wall.replay is not None and wall.replay.cursor.playing


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (160, 48)])
def test_replay_header_snapshot(snap_compare, size: tuple[int, int],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The main screen on a recording, paused on the poll after Q27 went down."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TEXTUAL_COLOR_SYSTEM", "truecolor")
    monkeypatch.setenv("COLORTERM", "truecolor")
    async def run_before(pilot: Any) -> None:
        app = pilot.app
        await until(pilot, lambda: "REPLAY" in header(app), "the REPLAY header")
        for _ in range(3):
            await pilot.pause()
        await pilot.wait_for_scheduled_animations()

    assert snap_compare(replay_app(at=states.NOW - 180), terminal_size=size,
                        run_before=run_before)


def test_help_lists_the_replay_keys_only_while_a_recording_is_shown() -> None:
    from console.ui.keys import help_rows

    def keys(**kw: Any) -> list[str]:
        return [k for k, *_ in help_rows(False, {}, lambda op: False, **kw)]

    live = keys()
    assert "p" in live and "T" not in live and "right_square_bracket" not in live
    replayed = keys(replay=True, live=False)
    assert replayed[:3] == ["space", "t", "T"] and "p" not in replayed
    for k in ("j", "J", "left_square_bracket", "right_square_bracket", "1", "2", "3"):
        assert k in replayed
    wall = [k for k, *_ in help_rows(True, {}, lambda op: False, replay=True, live=False)]
    assert wall.count("space") == 1  # plays; not the wall's next view


async def test_the_plots_show_the_recorded_hour_around_the_cursor() -> None:
    """At a poll in the middle of a recording the plots span half an hour either side of
    it, with the points recorded after it too, and a line where the tables are."""
    from console.ui.widgets.plot_widgets import AROUND_SPAN_S, SeriesPlot

    at = T0 + 6 * 60
    app = replay_app(at=at)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: "REPLAY" in header(app), "the REPLAY header")

        def kv() -> Any:
            return next(p for p in app.screen.query(SeriesPlot) if p.metric == "kv_cache_usage")

        await until(pilot, lambda: kv().drawn is not None, "the KV plot drawn")
        lay = kv().drawn
        assert lay.cursor == at and at < lay.end <= at + AROUND_SPAN_S / 2
        assert lay.end - lay.span_s <= at  # the cursor is on the axis
        assert lay.newest == at  # the tables' poll: the newest point at or before it
        after = [t for _, pts in lay.series for t, _ in pts if t + lay.end > at]
        assert after, "no point recorded after the cursor is drawn"
        # one step back: the axis follows the cursor
        await pilot.press("T")
        await until(pilot, lambda: kv().drawn is not None and kv().drawn.cursor == at - 60,
                    "the plot around the poll before")
