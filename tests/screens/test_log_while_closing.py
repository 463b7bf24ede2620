"""Issue 48: a poll that ends while the console quits writes its lines without a failure.

The fleet's ``enter`` on another pod ends the console (a new one opens on that pod); a
poll still running then ended during Textual's shutdown, which removes a screen's
widgets before the screen leaves the stack. The poll's alert line went to the main
screen, still in the stack and mounted, whose log widget was gone: ``poll failed:
NoMatches: No nodes match 'ActionLog' on MainScreen()``, and that line failed the same
way out of the poll, into the error boundary of a console that was quitting (a crash).
Seen under load only (the poll has to outlast the switch); driven here in that order:
the log's widget removed as the shutdown does, then a whole poll that raises an alert."""

from __future__ import annotations

from pathlib import Path

from msgspec.structs import replace
from textual.widgets import RichLog

from console.ui.screens.log import LogScreen
from console.ui.screens.main import MainScreen
from console.ui.widgets.panels import ActionLog
from tests.support.static_app import build
from tests.support.waits import wait_for


async def _poll_raising_an_alert(app, pilot) -> bool:
    """One whole poll whose pod reading raises an alert (its line goes to every
    screen): the agent stops answering."""
    pods = app.ctx.pod_collector
    pods.pod = replace(pods.pod, agent_error="agent command timed out after 10 s")
    assert await wait_for(pilot, lambda: not app.session.cycle.busy, 10)
    app.session.cycle.pod_reads.wanted = True  # the pod is read in this poll
    return await app.session.poll()


async def test_a_poll_ending_while_the_main_screen_closes_keeps_its_line(
        tmp_path: Path) -> None:
    app = build(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.ready and isinstance(app.screen, MainScreen),
                              20)
        main = app.screen
        before = len(app.log_lines)
        await main.query_one(ActionLog).remove()  # the shutdown's first step
        assert main in app.screen_stack and main.is_mounted
        assert await _poll_raising_an_alert(app, pilot), app.poll_failure
        assert app.poll_failure is None
        assert any("ALERT pod agent unreachable" in t for _, t, _ in app.log_lines), \
            list(app.log_lines)[-3:]
        assert not any("failed" in t for _, t, _ in app.log_lines), list(app.log_lines)
        assert app.crash is None and not app.error_boundary.failures
        # a log drawn again gets every line it had not shown, in order
        await main.query_one("#bottom").mount(ActionLog(id="log"))
        app.note("after")
        noted = [t for _, t, _ in list(app.log_lines)[before:]]
        assert noted[-1] == "after" and len(noted) >= 2
        shown = [line.plain.split(" ", 1)[1] for line in main.query_one(ActionLog).lines]
        assert shown == noted, (shown, noted)


async def test_a_line_noted_while_the_log_screen_closes_is_kept(tmp_path: Path) -> None:
    app = build(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.ready and isinstance(app.screen, MainScreen),
                              20)
        await pilot.press("L")
        assert await wait_for(pilot, lambda: isinstance(app.screen, LogScreen), 10)
        log = app.screen
        # both screens of the stack closing, as at the console's end
        await log.query_one("#llog", RichLog).remove()
        main = next(s for s in app.screen_stack if isinstance(s, MainScreen))
        await main.query_one(ActionLog).remove()
        assert await _poll_raising_an_alert(app, pilot), app.poll_failure
        assert any("ALERT pod agent unreachable" in t for _, t, _ in log.lines)
        assert app.crash is None and not app.error_boundary.failures

