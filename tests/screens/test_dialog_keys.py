"""Issue 30 #2: keys always reach what the screen shows. A finished operation dialog
(✓ or ✗) no longer holds the keyboard: the next key closes it and goes on to the screen
beneath (``w`` then ``1`` extends the watchdog, ``L`` opens the log). A warning that
needs action (``pod stops in 5 min — w extends``) can be acted on from every screen,
and from a running operation's dialog."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from console.operations.registry import Outcome
from console.ui.screens.gpus import GpuScreen
from console.ui.screens.log import LogScreen
from console.ui.screens.main import MainScreen
from console.ui.screens.modals import ConfirmScreen, ProgressScreen, WatchdogScreen
from tests.support.static_app import build
from tests.support.waits import wait_for


def _app(tmp_path: Path, gate: asyncio.Event | None = None, ok: bool = True):
    """The static console with an agent (so ``w`` asks) and quick host checks / smoke."""
    app = build(tmp_path)
    app.ctx.agent = SimpleNamespace(configured=True)  # the flow's facts: an agent exists
    ran: list[str] = []

    def handler(name: str):
        async def run(args, progress) -> Outcome:
            ran.append(name)
            progress("probe", 0.5, "half way")
            if gate is not None:
                await gate.wait()
            return Outcome(ok, f"{name}: pod abc123xyz up" if ok else f"{name}: broken")
        return run

    for op in ("host_checks", "smoke"):
        app.ctx.registry.handlers[op] = handler(op)
    return app, ran


def _finished(app) -> bool:
    return isinstance(app.screen, ProgressScreen) and app.screen.done


async def _run_host_checks(app, pilot) -> None:
    assert await wait_for(pilot, lambda: app.ready and isinstance(app.screen, MainScreen), 20)
    await pilot.press("h")
    assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10)
    await pilot.press("y")
    assert await wait_for(pilot, lambda: _finished(app), 10), app.screen


async def test_a_finished_dialog_hands_w_then_1_to_the_watchdog(tmp_path: Path) -> None:
    app, ran = _app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await _run_host_checks(app, pilot)
        assert ran == ["host_checks"]
        await pilot.press("w")  # the stop warning fired while ✓ was on screen
        assert await wait_for(pilot, lambda: isinstance(app.screen, WatchdogScreen), 10), \
            f"w was swallowed by the finished dialog: {app.screen}"
        assert not any(isinstance(s, ProgressScreen) for s in app.screen_stack)
        await pilot.press("1")  # +1 h: the confirmation names the new stop
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10)
        assert "Keep pod" in app.screen.question
        await pilot.press("n")
        assert await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), 10)


async def test_a_failed_dialog_hands_l_to_the_log_and_escape_only_closes(
        tmp_path: Path) -> None:
    app, _ = _app(tmp_path, ok=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await _run_host_checks(app, pilot)
        await pilot.press("L")
        assert await wait_for(pilot, lambda: isinstance(app.screen, LogScreen), 10), \
            f"L was swallowed by the finished dialog: {app.screen}"
        assert not any(isinstance(s, ProgressScreen) for s in app.screen_stack)
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), 10)
        await _run_host_checks(app, pilot)
        await pilot.press("escape")  # a closing key closes, and does nothing else
        assert await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), 10)
        await pilot.pause(0.3)
        assert isinstance(app.screen, MainScreen) and len(app.screen_stack) == 1


async def test_the_stop_warning_can_be_acted_on_from_every_screen(tmp_path: Path) -> None:
    app, _ = _app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.ready and isinstance(app.screen, MainScreen),
                              20)
        for key, screen in (("L", LogScreen), ("g", GpuScreen)):
            await pilot.press(key)
            assert await wait_for(pilot, lambda s=screen: isinstance(app.screen, s), 10)
            await pilot.press("w")
            assert await wait_for(pilot, lambda: isinstance(app.screen, WatchdogScreen),
                                  10), f"w did nothing on {screen.__name__}"
            await pilot.press("escape")
            assert await wait_for(pilot, lambda s=screen: isinstance(app.screen, s), 10)
            await pilot.press("escape")
            assert await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), 10)


async def test_w_reaches_the_watchdog_while_an_operation_runs(tmp_path: Path) -> None:
    gate = asyncio.Event()
    app, ran = _app(tmp_path, gate=gate)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.ready and isinstance(app.screen, MainScreen),
                              20)
        await pilot.press("t")  # the smoke test: harmless, so no question first
        assert await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen), 10)
        assert await wait_for(pilot, lambda: ran == ["smoke"], 10)
        await pilot.press("x")  # any other key leaves a running dialog alone
        await pilot.pause(0.3)
        assert isinstance(app.screen, ProgressScreen)
        await pilot.press("w")
        assert await wait_for(pilot, lambda: isinstance(app.screen, WatchdogScreen), 10)
        assert any(w.group == "operation" and w.is_running for w in app.workers)
        await pilot.press("escape")
        gate.set()  # the smoke test goes on and ends, said in the log
        assert await wait_for(pilot, lambda: any(
            "Smoke test" in t and "pod abc123xyz up" in t for _, t, _ in app.log_lines), 10)
