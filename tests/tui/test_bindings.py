"""Every binding, in both modes, against the demo deployment (real agent, real registry)."""

from __future__ import annotations

import json

from console.commands.tui_cmd import demo_context
from console.ui.app import make_app
from console.ui.screens.detail import SlotDetailScreen
from console.ui.screens.main import MainScreen
from console.ui.screens.modals import (
    ConfirmScreen,
    HelpScreen,
    ProgressScreen,
    RebalanceScreen,
    WatchdogScreen,
)
from console.ui.screens.wall import WallScreen
from console.ui.widgets.header import PodHeader
from console.ui.widgets.slots import SlotsTable
from tests.support.waits import wait_for
from tests.tui.conftest import live

DANGEROUS = {"resume", "fallback", "host_checks", "rebalance", "watchdog", "bench"}


async def test_main_screen_shows_live_demo(demo) -> None:
    app = make_app(demo_context(demo, 1.0, stop_demo_on_exit=False))
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: live(app), 40)
        assert await wait_for(pilot, lambda: "RUNNING" in str(
            app.screen.query_one(PodHeader).render()))  # the pod's line, once drawn
        header = str(app.screen.query_one(PodHeader).render())
        assert "DEMO" in header and "RUNNING" in header and "rtx6000-2x" in header
        table = app.screen.query_one(SlotsTable)
        assert table.slots == ["FLASH", "Q27"]
        row = table.get_row("FLASH")
        assert "● UP" in row and "qwen3.8-flash-next" in row


async def test_every_main_binding(demo) -> None:
    ctx = demo_context(demo, 1.0, stop_demo_on_exit=False)
    app = make_app(ctx)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: live(app), 40)
        # ? → help generated from the bindings
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        help_text = str(app.screen.query_one("Static").render())
        for key in ("r ", "f ", "h ", "b ", "w ", "enter", "ctrl+r"):
            assert key in help_text
        await pilot.press("escape")
        # the help screen must be gone before enter (under load a key can outrun it)
        assert await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        # enter → slot detail, escape back. Under the pilot a key pressed just after a
        # modal closes is now and then dropped (Textual routes it while the old screen
        # unwinds); a person presses again, and so does the test, a bounded few times.
        for _ in range(5):
            await pilot.press("enter")
            if await wait_for(pilot, lambda: isinstance(app.screen, SlotDetailScreen), 2):
                break
        assert isinstance(app.screen, SlotDetailScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
        # dangerous keys ask first; "n" runs nothing
        # r on a RUNNING pod: said at once, nothing asked
        from console.ui.widgets.panels import ActionLog

        # (the pod's reading comes with its own poll: under load it can follow the slots')
        assert await wait_for(pilot, lambda: app.pod is not None
                              and app.pod.status == "RUNNING", 30)
        log = app.screen.query_one(ActionLog)

        def said() -> int:
            return sum("already RUNNING" in line.plain for line in list(log.lines))

        before = said()
        await pilot.press("r")
        # said at once: a new line (a start-up line of the demo's slots may come after
        # it: the last line is not always this one)
        assert await wait_for(pilot, lambda: said() > before), [
            line.plain for line in list(log.lines)[-5:]]
        assert isinstance(app.screen, MainScreen)
        for key in ("f", "h"):
            await pilot.press(key)
            assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen)), key
            await pilot.press("n")
            await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        assert not set(ctx.registry.executed) & DANGEROUS
        # b → editor, escape cancels
        await pilot.press("b")
        assert await wait_for(pilot, lambda: isinstance(app.screen, RebalanceScreen))
        await pilot.press("escape")
        # w → menu → disarm → confirm → really runs on the agent; then arm it back (the
        # menu offers only what can be done now: "arm" once it is disarmed)
        for key, armed in (("d", False), ("a", True)):
            done = sum(1 for _, a, o in ctx.registry.history if a == "watchdog" and o.ok)
            await pilot.press("w")
            assert await wait_for(pilot, lambda: isinstance(app.screen, WatchdogScreen))
            await pilot.press(key)
            assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen)), key
            await pilot.press("y")
            assert await wait_for(pilot, lambda done=done: sum(
                1 for _, a, o in ctx.registry.history if a == "watchdog" and o.ok) > done, 30)
            await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen)
                           and app.screen.done)
            await pilot.press("escape")
            app.action_refresh_now()
            assert await wait_for(pilot, lambda armed=armed: app.pod is not None
                                  and app.pod.watchdog_armed is armed, 30), key
        # ctrl+r → an extra poll; the registry's refresh action does the same
        before = app.polls
        await pilot.press("ctrl+r")
        assert await wait_for(pilot, lambda: app.polls > before)
        before = app.polls
        assert (await ctx.registry.invoke("refresh")).ok
        assert await wait_for(pilot, lambda: app.polls > before)
        records = ctx.registry.audit.records()
        assert [r["result"] for r in records if r["action"] == "watchdog"][-2:] == [
            "started", "ok"]
        assert all({"time", "user", "host", "action", "arguments", "result"} <= set(r)
                   for r in records)
        await pilot.press("q")
    assert app.return_code in (0, None)


async def test_host_checks_run_the_real_agent(demo) -> None:
    ctx = demo_context(demo, 1.0, stop_demo_on_exit=False)
    app = make_app(ctx)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: live(app), 40)
        await pilot.press("h")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen)
                              and app.screen.done, 60)
        _, action, out = ctx.registry.history[-1]
        assert action == "host_checks" and out.ok, out.message
        names = [c["name"] for c in out.data["report"]["checks"]]
        assert names == ["gpus", "driver_cuda", "gpu_health", "p2p", "pidfd",
                         "disk", "memory", "modules"]
        assert "driver_cuda ok" in out.message and "p2p ok" in out.message


async def test_wall_mode_is_read_only(demo) -> None:
    ctx = demo_context(demo, 1.0, wall=True, stop_demo_on_exit=False)
    before = len(ctx.registry.audit.records())  # the demo's audit log is shared
    app = make_app(ctx, wall=True)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.snapshot is not None and app.snapshot.slots, 30)
        assert isinstance(app.screen, WallScreen)
        assert "READ-ONLY" in str(app.screen.query_one(PodHeader).render())
        keys = {b.key for b in WallScreen.BINDINGS}
        assert not keys & {"r", "f", "h", "b", "w", "B"}
        for key in ("r", "f", "h", "b", "w", "B", "enter"):
            await pilot.press(key)
            await pilot.pause()  # the key handled (one turn of the loop, not a delay)
            assert isinstance(app.screen, WallScreen), key  # no dialog opened
        # invoking every registry action directly: dangerous ones are refused at the sender
        for action_id in list(ctx.registry.specs):
            out = await ctx.registry.invoke(action_id, {"cmd": "stop-now", "set": {"FLASH": 0.5}})
            if action_id in DANGEROUS:
                assert out.state == "refused"
        def refused() -> int:
            return sum(1 for r in ctx.registry.audit.records()[before:]
                       if r["action"] in DANGEROUS and r["result"] == "refused")

        direct = refused()
        for action_id in DANGEROUS:
            app.start_operation(action_id)
        # each asked through the app reached the sender and was refused there
        assert await wait_for(pilot, lambda: refused() >= direct + len(DANGEROUS))
        assert not set(ctx.registry.executed) & DANGEROUS
        assert ctx.transport is None  # wall mode never holds an agent connection
        palette = [c.title for c in app.get_system_commands(app.screen)]
        for spec in ctx.registry.specs.values():
            if spec.dangerous:
                assert spec.title not in palette
        audit = ctx.registry.audit.records()[before:]
        assert {r["result"] for r in audit if r["action"] in DANGEROUS} == {"refused"}
        assert {r["action"] for r in audit} >= DANGEROUS
        # rotation between the overview and each slot
        view = app.screen.view
        await pilot.press("space")
        assert app.screen.view == (view + 1) % 3
    lines = (demo.workdir / "state" / "audit.jsonl").read_text().splitlines()
    assert all(json.loads(x)["result"] in ("refused", "started", "ok", "failed", "rolled_back")
               for x in lines)
