"""Issue 30 #1: the console is never lost. Every worker, palette provider, palette
command and timer runs under one error boundary: a failure is shown (a notification
and a line in the action log), its traceback goes to ``STATE_DIR/errors.log``, and the
console goes on. What the boundary cannot survive ends the console with a crash report
and a non-zero status.

The palette's race (on a loaded machine its hit-gathering worker ran after it closed:
``NoMatches: No nodes match 'CommandList'`` ended the console with status 0; two Enters
dismissed it twice and popped the main screen, leaving a blank console that ignored
``q``) is driven here in the order the load produced."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.command import CommandList, CommandPalette

from console.ui.screens.log import LogScreen
from console.ui.screens.main import MainScreen
from tests.support.static_app import build
from tests.support.waits import wait_for


def _alive(app) -> bool:
    return not app.exiting and app.crash is None and app.return_code is None


async def _main(app, pilot) -> None:
    assert await wait_for(pilot, lambda: app.ready and isinstance(app.screen, MainScreen), 20)


async def _keys_work(app, pilot) -> None:
    """The console still answers keys: L opens the log, escape goes back."""
    await pilot.press("L")
    assert await wait_for(pilot, lambda: isinstance(app.screen, LogScreen), 10), app.screen
    await pilot.press("escape")
    assert await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), 10), app.screen


def _told(app, text: str) -> bool:
    noted = any(text in t and "failed" in t for _, t, _ in app.log_lines)
    notified = any(text in str(n.message) for n in app._notifications)
    return noted and notified


async def test_a_worker_that_exits_on_error_does_not_end_the_console(tmp_path: Path) -> None:
    app = build(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await _main(app, pilot)

        async def explode() -> None:
            raise ValueError("provider exploded")

        app.run_worker(explode(), group="provider")  # Textual's default: exit on error
        assert await wait_for(pilot, lambda: _told(app, "provider exploded"), 10)
        assert _alive(app)
        assert await wait_for(pilot, lambda: (tmp_path / "errors.log").exists() and
                              "provider exploded" in (tmp_path / "errors.log").read_text(), 10)
        assert "Traceback" in (tmp_path / "errors.log").read_text()
        await _keys_work(app, pilot)


async def test_a_failing_timer_is_shown_and_keeps_its_beat(tmp_path: Path) -> None:
    app = build(tmp_path)
    calls: list[int] = []
    async with app.run_test(size=(160, 48)) as pilot:
        await _main(app, pilot)

        def tick() -> None:
            calls.append(1)
            raise RuntimeError("timer tripped")

        app.set_interval(0.3, tick)
        assert await wait_for(pilot, lambda: _told(app, "timer tripped"), 10)
        assert await wait_for(pilot, lambda: len(calls) >= 3, 10)  # it goes on beating
        assert _alive(app)
        await _keys_work(app, pilot)


async def test_the_palette_gathering_after_it_closed_is_not_a_crash(tmp_path: Path) -> None:
    app = build(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await _main(app, pilot)
        await pilot.press("ctrl+p")
        assert await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), 10)
        palette = app.screen
        await pilot.press(*"help")
        palette.dismiss()  # Enter picked the only hit …
        await pilot.pause()
        palette._gather_commands("help k")  # … and the load let a gathering start late
        await pilot.pause(0.5)
        assert _alive(app), app.crash
        assert isinstance(app.screen, MainScreen)
        await _keys_work(app, pilot)


async def test_two_enters_close_the_palette_once_and_run_the_command_once(
        tmp_path: Path) -> None:
    app = build(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await _main(app, pilot)
        ran: list[int] = []
        app.action_refresh_now = lambda: ran.append(1)  # "Refresh now" in the palette
        await pilot.press("ctrl+p")
        assert await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), 10)
        palette = app.screen
        await pilot.press(*"Refresh now")

        def on_the_hit() -> bool:
            # the search for the whole text is over and its hit is highlighted: under load a
            # partial query's longer list can still be up, and a key then picks another
            # command (a run read ran == [] that way)
            hits = palette.query_one(CommandList)
            searching = any(w.node is palette and w.group == palette._GATHER_COMMANDS_GROUP
                            and not w.is_finished for w in app.workers)
            return (palette._list_visible and not searching and hits.highlighted is not None
                    and "Refresh now" in str(hits.get_option_at_index(hits.highlighted).prompt))
        assert await wait_for(pilot, on_the_hit, 10)
        palette._select_or_command()  # Enter: picks the hit …
        palette._select_or_command()  # … Enter again, before the first was drawn
        palette._select_or_command()
        await pilot.pause(0.5)
        assert await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), 10), \
            app.screen_stack
        assert len(app.screen_stack) == 1, app.screen_stack  # main, the app's first
        assert ran == [1]
        assert _alive(app)
        await _keys_work(app, pilot)


async def test_a_palette_command_that_raises_is_shown_and_the_console_goes_on(
        tmp_path: Path) -> None:
    app = build(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await _main(app, pilot)

        def broken() -> None:
            raise KeyError("no such slot")

        app.action_help = broken  # "Help: keys" in the palette
        await pilot.press("ctrl+p")
        assert await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), 10)
        await pilot.press(*"Help: keys")
        assert await wait_for(pilot, lambda: app.screen._list_visible, 10)
        await pilot.press("down", "enter")
        assert await wait_for(pilot, lambda: _told(app, "no such slot"), 10)
        assert _alive(app)
        await _keys_work(app, pilot)


async def test_what_the_boundary_cannot_survive_is_a_crash_with_status_1(
        tmp_path: Path) -> None:
    """An exception in the main screen's own message loop: the console ends, with the
    traceback kept for the crash report and a non-zero status (never 0)."""
    app = build(tmp_path)
    with pytest.raises(RuntimeError, match="the main screen broke"):  # the pilot re-raises
        async with app.run_test(size=(160, 48)) as pilot:
            await _main(app, pilot)

            def boom() -> None:
                raise RuntimeError("the main screen broke")

            app.screen.call_later(boom)
            assert await wait_for(pilot, lambda: app.crash is not None, 10)
    assert app.return_code == 1
    assert "the main screen broke" in app.crash and "Traceback" in app.crash


def test_a_crash_leaves_a_report_and_a_non_zero_status(tmp_path: Path, capsys) -> None:
    from console import __version__
    from console.commands.tui_cmd import run_console

    class Crashing:
        crash: str | None = None
        return_code: int | None = None

        def run(self) -> None:
            raise RuntimeError("the driver fell over")

        class error_boundary:  # the app's collaborator, as the app holds it
            @staticmethod
            def state_dir() -> Path:
                return tmp_path / "state"

    assert run_console(Crashing()) == 1  # type: ignore[arg-type]
    reports = list((tmp_path / "state").glob("crash-*.txt"))
    assert len(reports) == 1
    text = reports[0].read_text()
    assert "the driver fell over" in text and "Traceback" in text
    assert f"pod-console {__version__}" in text and "time: " in text
    assert str(reports[0]) in capsys.readouterr().err
