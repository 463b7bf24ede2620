"""The anchors' conventions on the main screen (htop, k9s): a numeric sort starts worst
first (KV, TTFT largest first), a kept filter is a crumb under the rows that says what it
matches (or that nothing does) and Esc clears it, a click on a column header sorts by it,
and the action log wraps a long line instead of cutting it."""

from __future__ import annotations

from typing import Any

from console.ui.screens.main import MainScreen
from console.ui.widgets.panels import ActionLog
from console.ui.widgets.slots import SlotsTable
from tests.screens import states
from tests.screens.host import ScreenHost, settle
from tests.support.waits import until


def screen_text(app: Any) -> str:
    return "\n".join(s.text for s in app.screen._compositor.render_strips())


def host() -> ScreenHost:
    return ScreenHost(lambda: MainScreen(states.state(), states.log_lines()))


async def test_a_numeric_sort_starts_worst_first() -> None:
    app = host()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.top.query_one(SlotsTable)
        seen: dict[str, bool] = {}
        for _ in range(len(table.columns) + 1):
            await pilot.press("greater_than_sign")
            await settle(pilot)
            if table.sort_key is not None:
                seen[table.sort_key] = table.sort_reverse
        assert seen["kv_p99"] is True and seen["ttft_p95_s"] is True  # largest first
        assert seen["acceptance_rate"] is False  # bad when low: smallest first
        assert seen["health"] is False and seen["slot"] is False  # worst / A first


async def test_a_kept_filter_is_a_crumb_and_esc_clears_it() -> None:
    app = host()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = app.top.query_one(SlotsTable)
        table.set_order(filter="fla")
        await until(pilot, lambda: "filter /fla: 1 of 2 slots · esc clears"
                    in screen_text(app), "the crumb")
        table.set_order(filter="nothing-like-it")
        await until(pilot, lambda: "no slot matches /nothing-like-it (of 2)"
                    in screen_text(app), "the no-match line")
        await pilot.press("escape")
        await until(pilot, lambda: table.filter == "" and table.slots == ["FLASH", "Q27"]
                    and "no slot matches" not in screen_text(app), "esc cleared it")


async def test_a_click_on_a_header_sorts_by_it_and_again_inverts() -> None:
    app = host()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.top.query_one(SlotsTable)
        x = table._header.plain.index("KV p99") + 1
        await pilot.click(SlotsTable, offset=(x, 0))
        await until(pilot, lambda: table.sort_key == "kv_p99", "sorted by KV p99")
        assert table.sort_reverse is True and "KV p99▼" in table._header.plain
        await pilot.click(SlotsTable, offset=(x, 0))
        await until(pilot, lambda: table.sort_reverse is False, "inverted")


async def test_the_action_log_wraps_a_long_line() -> None:
    app = host()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        tail = "and this is where the reason ends"
        app.top.log_line(states.NOW, "Rebalance gpu_util: rolled back — " + "x" * 40
                         + " FLASH did not come back within 600 s; " + tail)
        await settle(pilot)
        log = app.top.query_one(ActionLog)
        await until(pilot, lambda: tail in screen_text(app), "the whole line")
        assert log.size.width <= 80
