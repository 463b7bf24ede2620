"""A cooldown and what it explains on screen (issue 43, item 7): the alerts panel and
``A`` draw the fallbacks and 5xx indented under their cooldown and count the group as
one alert; in ``A`` enter acknowledges the alert under the cursor (a parent: its group)
and ``a`` still acknowledges every one."""

from __future__ import annotations

from console.ui.screens.alerts import AlertHistoryScreen
from console.ui.screens.main import MainScreen
from console.ui.widgets.panels import UNDER, AlertsPanel
from tests.screens import states
from tests.screens.host import ScreenHost, settle

PARENT = "q27/q27-a COOLDOWN at the gateway"
KIDS = ("gateway fallbacks rising", "gateway 5xx 5.04% of the gateway calls",
        "gateway 5xx 29% of q27 calls")


def _under_parent(text: str) -> None:
    lines = text.splitlines()
    top = next(i for i, line in enumerate(lines) if PARENT in line)
    for kid in KIDS:
        (line,) = [x for x in lines if kid in x]
        assert line.lstrip().startswith(UNDER.strip()), line
        assert lines.index(line) > top
        assert not line.startswith(("✖", "▲", "●", "◌"))  # not an alert line of its own


async def test_the_panel_draws_the_group_under_its_parent_and_counts_it_once() -> None:
    state = states.cooldown_group()
    app = ScreenHost(lambda: MainScreen(state))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        panel = app.top.query_one(AlertsPanel)
        _under_parent(panel.text)
        # the cooldown group, two TTFTs, the working hours: 4 alerts, not 7
        assert panel.border_title == "alerts (4 firing)", panel.border_title


async def test_a_draws_the_group_and_enter_acks_the_row_under_the_cursor() -> None:
    state = states.cooldown_group()
    app = ScreenHost(lambda: AlertHistoryScreen(state))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        text = str(app.top.query_one("#aactive").render())
        _under_parent(text)
        await pilot.press("enter")  # the cursor starts on the first: the cooldown
        await pilot.press("down", "down", "down", "down", "enter")  # past its group
        await pilot.press("up", "enter")  # one consequence alone
        await pilot.press("a")  # every one, as on the main screen
        await settle(pilot)
        kids = {a.key for a in state.alerts if a.parent == "gw-cooldown:q27-a"}
        asked = [x for x in app.asked if x[0] == "operation"]
        assert asked[0] == ("operation", "ack", {"alert": "gw-cooldown:q27-a"})
        assert asked[1] == ("operation", "ack", {"alert": "ttft:FLASH"})
        assert asked[2][2]["alert"] in kids
        assert asked[3] == ("operation", "ack", {})
