"""The wall is read from across a room (issue 47, #7): big digits at every size, the
5-row figure font where the terminal is large, never a view of small text only."""

from __future__ import annotations

from textual.widgets import Digits

from console.ui.screens.wall import WallScreen
from console.ui.widgets.board import BigDigits, SlotCard, WallBoard, big_lines
from tests.screens import states
from tests.screens.host import ScreenHost, settle


def _shown(widget, screen) -> bool:
    """On screen: displayed down its whole tree, and inside the screen's region."""
    node = widget
    while node is not None and node is not screen:
        if not node.display:
            return False
        node = node.parent
    r = widget.region
    return r.height > 0 and r.y >= 0 and r.bottom <= screen.size.height


def test_the_big_font_is_five_rows_of_square_dots() -> None:
    rows = big_lines("950")
    assert len(rows) == 5
    assert rows[0] == "██████ ██████ ██████"  # three glyphs of 3 dots, 2 cells a dot
    assert big_lines("1.5")[4].split()[1] == "██"  # the point: one dot, low


async def test_at_80x24_every_view_of_the_wall_shows_big_digits() -> None:
    app = ScreenHost(lambda: WallScreen(states.state(read_only=True), rotate_s=0))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        wall = app.top
        for view in range(3):  # overview, FLASH, Q27
            names = [t.slot for t in wall.state.view.targets]
            focus = names[view - 1] if view else None
            cards = [c for c in wall.query(SlotCard) if _shown(c, wall)]
            assert [c.slot for c in cards] == ([focus] if focus else names), view
            for card in cards:
                digits = [d for d in card.query(Digits) if _shown(d, wall)]
                assert len(digits) == 3, (view, card.slot)
            wall.action_next()
            await settle(pilot)


async def test_a_large_terminal_draws_the_five_row_font() -> None:
    app = ScreenHost(lambda: WallScreen(states.state(read_only=True), rotate_s=0))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        wall = app.top
        assert wall.query_one(WallBoard).has_class("tall")
        big = [d for d in wall.query(BigDigits) if _shown(d, wall)]
        assert len(big) == 2 + 3 * 2 and all(d.region.height == 5 for d in big)
        assert not [d for d in wall.query(Digits) if _shown(d, wall)]
        # the plots keep their room below
        plots = wall.query_one("#wplots")
        assert _shown(plots, wall) and plots.region.height >= 8
    app = ScreenHost(lambda: WallScreen(states.state(read_only=True), rotate_s=0))
    async with app.run_test(size=(120, 40)) as pilot:  # 40 columns a card: too narrow
        await settle(pilot)
        assert not app.top.query_one(WallBoard).has_class("tall")


def test_a_slot_view_at_80x24_snapshot(snap_compare, monkeypatch) -> None:
    """The picture: FLASH's view of the wall at 80x24, the pod's and FLASH's digits."""
    import time as _time

    from tests.screens.host import run_before

    monkeypatch.setenv("TEXTUAL_COLOR_SYSTEM", "truecolor")
    monkeypatch.setenv("COLORTERM", "truecolor")
    monkeypatch.setenv("TZ", "UTC")
    _time.tzset()

    def next_view(pilot) -> None:
        pilot.app.top.action_next()

    try:
        assert snap_compare(ScreenHost(lambda: WallScreen(states.state(read_only=True),
                                                          rotate_s=0)),
                            terminal_size=(80, 24), run_before=run_before(next_view))
    finally:
        monkeypatch.undo()
        _time.tzset()
