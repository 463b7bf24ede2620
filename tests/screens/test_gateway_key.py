"""``G`` in the console opens the gateway screen and says what to set when no gateway is
watched; it goes back on ``G`` or escape (issue 34)."""

from __future__ import annotations

from console.ui.screens.gateway import GatewayScreen
from console.ui.screens.main import MainScreen
from tests.support.static_app import build
from tests.support.waits import wait_for


async def test_g_opens_the_gateway(tmp_path) -> None:  # type: ignore[no-untyped-def]
    app = build(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: pilot.app.polls >= 1)
        await pilot.press("G")
        assert await wait_for(pilot, lambda: isinstance(app.screen, GatewayScreen)
                              and app.screen.is_mounted)
        await pilot.pause()
        text = "\n".join(s.text for s in app.screen._compositor.render_strips())
        assert "no gateway watched: set gateway_url" in text
        await pilot.press("G")
        assert await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
