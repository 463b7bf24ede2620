"""``/`` on the main screen: the prompt shows what is typed, the table follows each key,
and a line says what the prompt does (issue 30, #9)."""

from __future__ import annotations

from console.ui.screens.main import MainScreen
from console.ui.widgets.slots import SlotsTable
from tests.screens import states
from tests.screens.host import ScreenHost, settle
from tests.support.waits import pilot_until as _until


def _row(app: ScreenHost, y: int) -> str:
    strip = app.screen._compositor.render_strips()[y]
    return "".join(seg.text for seg in strip if not seg.control)


async def test_the_filter_shows_what_is_typed_and_filters_as_you_type() -> None:
    app = ScreenHost(lambda: MainScreen(states.state(), states.log_lines()))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.top.query_one(SlotsTable)
        assert table.slots == ["FLASH", "Q27"]
        await pilot.press("slash")
        prompt = app.top.query_one("#filter")
        assert await _until(pilot, lambda: prompt.has_focus)
        await settle(pilot)
        screen_text = "\n".join(_row(app, y) for y in range(48))
        assert "enter keeps" in screen_text and "escape clears" in screen_text, screen_text
        await pilot.press("q", "2")
        # the table follows at once, before enter
        assert await _until(pilot, lambda: table.slots == ["Q27"]), table.slots
        await settle(pilot)
        region = prompt.region
        assert region.height >= 1
        rows = [_row(app, y)[region.x:region.right] for y in range(region.y, region.bottom)]
        assert any("q2" in r for r in rows), rows  # the typed text is drawn
        await pilot.press("enter")
        assert await _until(pilot, lambda: not prompt.display and table.has_focus)
        assert table.slots == ["Q27"] and table.filter == "q2"
        await pilot.press("slash", "escape")
        assert await _until(pilot, lambda: table.slots == ["FLASH", "Q27"]), table.slots
