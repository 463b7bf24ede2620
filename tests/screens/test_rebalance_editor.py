"""The rebalance editor (``b``) lands every key of a burst, says what applying the values
typed would do as they are typed, refuses a plan that changes nothing, and speaks words:
no Python dict, no planner jargon. Its result (the agent's end) is words too.

A terminal hands a fast typist's keys over in one read: they reach the app together,
before any of them is handled. ``burst`` posts them so (``pilot.press`` waits for each);
both are tried."""

from __future__ import annotations

from typing import Any

import pytest
from textual import events

from console.operations.split import plan_words, result_words
from console.ui.screens.main import MainScreen
from console.ui.screens.modals import RebalanceScreen
from tests.screens import states
from tests.screens.host import ScreenHost, settle
from tests.support.waits import until

SIZE = (120, 40)


def burst(app: Any, keys: list[str]) -> None:
    """Every key posted at once, as one read of the terminal delivers them."""
    for k in keys:
        app.post_message(events.Key(k, k if len(k) == 1 else None))


async def typed(pilot: Any, keys: list[str], how: str) -> None:
    if how == "press":
        await pilot.press(*keys)
    else:
        burst(pilot.app, keys)
    await settle(pilot)


def host() -> ScreenHost:
    rows, plan, predict = states.rebalance()
    return ScreenHost(lambda: MainScreen(states.state(), states.log_lines()),
                      lambda: RebalanceScreen(rows, plan, predict))


def text_of(dialog: RebalanceScreen, wid: str) -> str:
    return str(dialog.query_one(wid).render())


@pytest.mark.parametrize("how", ["press", "burst"])
async def test_a_burst_of_keys_lands_every_key_and_the_summary_follows(how: str) -> None:
    app = host()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        dialog: RebalanceScreen = app.top
        flash, q27 = dialog.query_one("#u-FLASH"), dialog.query_one("#u-Q27")
        assert app.focused is flash  # opened on the first field, its value selected
        await typed(pilot, ["0", ".", "8", "0"], how)
        assert flash.value == "0.80"
        await typed(pilot, ["tab", "0", ".", "1", "5"], how)
        assert (flash.value, q27.value) == ("0.80", "0.15"), (flash.value, q27.value)
        assert app.focused is q27
        await typed(pilot, ["shift+tab", "0", ".", "7", "8", "tab", "0", ".", "1", "7"], how)
        assert (flash.value, q27.value) == ("0.78", "0.17"), (flash.value, q27.value)
        # the summary is of the values typed, not of the planner's proposal
        summary = text_of(dialog, "#summary")
        assert "FLASH 0.76 → 0.78 (grows)" in summary, summary
        assert "Q27 0.19 → 0.17 (shrinks)" in summary and "restarts Q27 then FLASH" in summary
        assert not dialog.query_one("#apply").disabled


async def test_a_plan_that_changes_nothing_says_so_and_applies_nothing() -> None:
    app = host()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        dialog: RebalanceScreen = app.top
        await typed(pilot, ["0", ".", "7", "6", "tab", "0", ".", "1", "9"], "burst")
        assert "no change" in text_of(dialog, "#summary")
        assert "nothing to apply" in text_of(dialog, "#verdict")
        assert dialog.query_one("#apply").disabled
        chosen: list = []
        dialog.dismiss = chosen.append  # type: ignore[method-assign]  # what the app gets
        await pilot.press("ctrl+s")
        assert chosen == [] and app.screen is dialog  # no restart asked
        await typed(pilot, ["backspace", "8"], "burst")  # Q27 0.18: a change again
        await until(pilot, lambda: not dialog.query_one("#apply").disabled,
                    f"apply offered: {dialog.values()} {app.focused}")
        await pilot.press("ctrl+s")
        assert chosen == [{"FLASH": 0.76, "Q27": 0.18}]


def test_the_planner_and_the_result_speak_words() -> None:
    from console.operations.capacity import model_for
    from console.operations.planner import SlotInput, plan
    from tests.unit.test_planner import FIELD

    # KV read at one gpu_util per slot: no model yet, each keeps what runs
    one = {n: model_for(n, FIELD.slots[n], [(u, t)])
           for n, u, t in (("FLASH", 0.76, 239_000), ("Q27", 0.19, 190_000))}
    lines = plan(FIELD, [SlotInput("FLASH", 0.76, 0.05, one["FLASH"], 0.74, 10, (0, 1)),
                         SlotInput("Q27", 0.19, 0.02, one["Q27"], 0.17, 5, (0, 1))]).lines
    for line in lines:
        assert "floor" not in line and "capacity model" not in line, line
        assert "{" not in line
    assert any("read at one gpu_util only" in line for line in lines), lines
    assert plan_words({"A": 0.5}, {"A": 0.5}).startswith("no change")
    done = result_words({"changed": {"FLASH": 0.8, "Q27": 0.15},
                         "startup_s": {"FLASH": 41.2, "Q27": None}})
    assert done == "applied: FLASH now at 0.80 (back up in 41 s), Q27 now at 0.15"
    nothing = result_words({"changed": {}, "message": "nothing to do: split already applied"})
    assert nothing.startswith("no change") and "{" not in nothing
