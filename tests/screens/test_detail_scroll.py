"""The slot detail scrolls as a whole: its top (the title, health, probe) is where it
opens and where PageUp, Home, ↑ and the mouse wheel bring it back to, at a phone's 80×24
and a laptop's 120×40, on a live state and on a replay's (a new state drawn while it is
read does not move it)."""

from __future__ import annotations

from typing import Any

import pytest
from textual import events

from console.ui.screens.detail import SlotDetailScreen
from tests.screens import states
from tests.screens.host import ScreenHost, settle
from tests.support.waits import until

SIZES = [(80, 24), (120, 40)]


def screen_text(app: Any) -> str:
    return "\n".join(s.text for s in app.screen._compositor.render_strips())


def top_shown(app: Any) -> bool:
    text = screen_text(app)
    return "slot FLASH" in text and "health" in text


def bottom_shown(app: Any) -> bool:
    return "recent log lines" in screen_text(app) and "KV tokens" not in screen_text(app)


async def to_bottom(pilot: Any) -> None:
    await pilot.press("end")
    await until(pilot, lambda: not top_shown(pilot.app), "the top scrolled away")


async def wheel_up(pilot: Any) -> None:
    # over the figures' box (the middle of the screen), as a user's wheel would be
    w, h = pilot.app.size
    await pilot._post_mouse_events([events.MouseScrollUp], offset=(w // 2, h // 2))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("replay", [False, True], ids=["live", "replay"])
async def test_the_detail_opens_at_its_top_and_every_way_up_returns_there(
        size: tuple[int, int], replay: bool) -> None:
    state = states.state(read_only=True) if replay else states.state()
    app = ScreenHost(lambda: SlotDetailScreen(state, "FLASH"))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        assert top_shown(app), screen_text(app)
        detail = app.top
        if replay:  # a replay draws a state at every step: the place read is kept
            await to_bottom(pilot)
            detail.show(states.state(read_only=True, down=("Q27",)))
            await settle(pilot)
            assert not top_shown(app)
        await to_bottom(pilot)
        await pilot.press("home")
        await until(pilot, lambda: top_shown(app), "Home shows the top")
        for key in ("pageup", "up"):
            await to_bottom(pilot)
            for _ in range(60):  # as many presses as a user would make, not one
                if top_shown(app):
                    break
                await pilot.press(key)
                await settle(pilot)
            assert top_shown(app), f"{key} never reaches the top:\n{screen_text(app)}"
        await to_bottom(pilot)
        for _ in range(60):
            if top_shown(app):
                break
            await wheel_up(pilot)
            await settle(pilot)
        assert top_shown(app), f"the wheel never reaches the top:\n{screen_text(app)}"


async def test_in_a_replay_the_detail_opens_at_its_top_and_home_returns_there() -> None:
    """``pod-console replay``'s own app: the detail opened with Enter, stepped with t."""
    from tests.screens.test_replay import replay_app

    app = replay_app(at=states.NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: type(app.screen).__name__ == "MainScreen", "main")
        await pilot.press("enter")
        await until(pilot, lambda: type(app.screen).__name__ == "SlotDetailScreen", "detail")
        slot = app.screen.slot
        await until(pilot, lambda: f"slot {slot}" in screen_text(app)
                    and "health" in screen_text(app), "the detail's top")
        await pilot.press("end")
        await until(pilot, lambda: f"slot {slot}" not in screen_text(app), "scrolled down")
        await pilot.press("T")  # a step back redraws the detail: the place read is kept
        await pilot.press("home")
        await until(pilot, lambda: f"slot {slot}" in screen_text(app), "Home shows the top")
