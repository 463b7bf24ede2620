"""The watchdog dialog offers only what can be done now, and its arguments are said
cleanly (issue 30, #14)."""

from __future__ import annotations

from msgspec.structs import replace
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


async def test_the_stop_now_question_names_the_slots_the_users_and_the_billing() -> None:
    """Issue 47: ``w s`` asked "Watchdog: stop-now on pod …?" and nothing of what stops
    with it. Now: the slots and the requests they serve, who used the gateway lately,
    what billing stops and what it does not (the volume)."""
    from textual.widgets import Static

    from console.model.gateway import who_text
    from console.operations.operation import OperationFacts
    from console.operations.ops.watchdog import question
    from console.ui.screens.modals import ConfirmScreen

    st = states.gateway_state()
    busy = st.snapshot.slots[0]
    assert busy.figures is not None  # 3 requests running on FLASH
    busy = replace(busy, figures=replace(busy.figures, values={**busy.figures.values,
                                                               "running": 3.0}))
    st = replace(st, snapshot=replace(st.snapshot, slots=(busy, *st.snapshot.slots[1:])))
    who = who_text(st.gateway, st.now, st.active_window_s)
    assert who and "alice" in who
    facts = OperationFacts(states.NOW, st.pod, st.snapshot, states.settings(),
                           st.view.profile_name, states.profile(), st.view.targets, True,
                           who=who)
    text = question(facts, {"cmd": "stop-now"})
    app = ScreenHost(lambda: MainScreen(st), lambda: ConfirmScreen("Watchdog", text))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        shown = " ".join(" ".join(str(w.render()) for w in app.top.query(Static)).split())
    assert "2 slots (FLASH, Q27) stop serving" in shown, shown
    assert "3 requests running on them now" in shown and "alice (0 s ago" in shown, shown
    gb = states.profile().volume_gb
    assert "Billing of $4.18/h stops" in shown and f"{gb} GB volume" in shown, shown
    # no gateway, both slots down: said so, not a count of requests nobody serves
    down = states.state(down=tuple(states.profile().slots))
    facts = OperationFacts(states.NOW, down.pod, down.snapshot, states.settings(),
                           down.view.profile_name, states.profile(), down.view.targets, True)
    text = question(facts, {"cmd": "stop-now"})
    assert "none of them up now" in text and "gateway" not in text.lower(), text
