"""The wall's time to the stop says its unit (issue 30, #14): ``29 min until the stop``,
not ``0 : 29 to the stop``."""

from __future__ import annotations

from textual.widgets import Digits, Label

from console.ui.screens.wall import WallScreen
from console.ui.widgets.board import Metric, stop_digits
from tests.screens import states
from tests.screens.host import ScreenHost, settle


def test_minutes_and_hours_say_which() -> None:
    assert stop_digits(29 * 60 + 5) == ("29", "min until the stop")
    assert stop_digits(6 * 3600 + 5 * 60) == ("6:05", "h:min until the stop")
    # the last minute (issue 47): seconds, not "0 min"
    assert stop_digits(45.5) == ("45", "s until the stop")


async def test_the_wall_says_29_min_until_the_stop() -> None:
    pod = states.pod(stop_plan=states.stop_plan(in_s=29 * 60 + 10, next_reason="idle"))
    app = ScreenHost(lambda: WallScreen(states.state(read_only=True, pod_=pod), rotate_s=0))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        stop = app.top.query_one(".m-stop", Metric)
        assert stop.query_one(Digits).value == "29"
        assert "min until the stop" in str(stop.query_one(Label).content)
