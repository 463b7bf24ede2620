"""The watchdog dialog offers only what can be done now, and its arguments are said
cleanly (issue 30, #14)."""

from __future__ import annotations

from textual.widgets import Button

from console.ui.operation_flow import args_text
from console.ui.screens.main import MainScreen
from console.ui.screens.modals import WatchdogScreen
from tests.screens import states
from tests.screens.host import ScreenHost, settle


async def _buttons(armed: bool | None, extension: str | None) -> set[str]:
    app = ScreenHost(lambda: MainScreen(states.state()),
                     lambda: WatchdogScreen(armed, "2026-11-18T20:00:00+09:00", states.NOW,
                                            extension))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        ids = {b.id or "" for b in app.top.query(Button)}
        chosen: list = []
        app.top.dismiss = chosen.append  # type: ignore[method-assign]
        await pilot.press("c", "a")
        await pilot.pause()
        if not extension:
            assert {"cmd": "extend", "clear": True} not in chosen
        if armed:
            assert {"cmd": "arm"} not in chosen
        return ids


async def test_only_valid_actions_are_offered() -> None:
    ids = await _buttons(True, None)
    assert "clear" not in ids and "arm" not in ids and "disarm" in ids
    ids = await _buttons(False, "extended until 20:00 KST by alice: eval run")
    assert "clear" in ids and "arm" in ids and "disarm" not in ids


def test_an_empty_reason_is_not_said() -> None:
    assert args_text({"cmd": "extend", "until": "+1h", "reason": ""}) == "extend; until +1h"
    assert args_text({"cmd": "extend", "clear": True}) == "extend; clear"


async def test_r_makes_the_extensions_end_replace_the_next_stop() -> None:
    """The agent's ``--replaces-next-stop``, offered: ``r`` ticks it, ``1`` extends."""
    from textual.widgets import Checkbox

    for keys, want in ((("1",), None), (("r", "1"), True), (("r", "r", "2"), None)):
        app = ScreenHost(lambda: MainScreen(states.state()),
                         lambda: WatchdogScreen(*states.watchdog_args()))
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            box = app.top.query_one("#replaces", Checkbox)
            assert "its end replaces the next evening's stop" in str(box.label)
            chosen: list = []
            app.top.dismiss = chosen.append  # type: ignore[method-assign]
            await pilot.press(*keys)
            await pilot.pause()
            assert len(chosen) == 1 and chosen[0]["cmd"] == "extend", chosen
            assert chosen[0].get("replaces_next_stop") is want, (keys, chosen)
