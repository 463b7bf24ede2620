"""The screens' contract with the app, without the app: state down (``show``), messages up
(an operation, a slot's detail, its log lines), and a dialog that validates as typed.
No process: each screen is hosted with a fixed ``ConsoleState`` from ``states.py``."""

from __future__ import annotations

from console.ui.screens.base import ConsoleScreen
from console.ui.screens.detail import SlotDetailScreen
from console.ui.screens.main import MainScreen
from console.ui.screens.modals import RebalanceScreen
from console.ui.widgets.panels import AlertsPanel
from console.ui.widgets.slots import SlotsTable
from tests.screens import states
from tests.screens.host import ScreenHost, settle
from tests.support.waits import pilot_until as _until

SIZE = (160, 48)


async def test_keys_ask_the_app_and_read_only_asks_nothing() -> None:
    for read_only in (False, True):
        app = ScreenHost(lambda ro=read_only: MainScreen(states.state(read_only=ro)))
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            table = app.top.query_one(SlotsTable)
            table.move_cursor(1)
            await pilot.press("enter", "b", "B")
            await pilot.pause()
            ops = [a for a in app.asked if a[0] == "operation"]
            assert ("detail", table.slots[1]) in app.asked
            if read_only:  # not allowed: the key does nothing, not even ask
                assert ops == []
            else:  # the per-slot one names the slot under the cursor
                assert ops == [("operation", "rebalance", {}),
                               ("operation", "bench", {"slot": table.slots[1]})]


async def test_a_new_state_is_drawn_and_the_detail_asks_for_its_log() -> None:
    app = ScreenHost(lambda: MainScreen(states.state()),
                     slot_log=["first line", "[bold]not markup[/]"])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen: ConsoleScreen = app.top
        table = screen.query_one(SlotsTable)
        assert "DOWN" not in str(table.get_row("Q27"))
        screen.show(states.state(down=("Q27",)))
        assert await _until(pilot, lambda: "DOWN" in str(table.get_row("Q27")))
        detail = SlotDetailScreen(states.state(), "Q27")
        await app.push_screen(detail)
        log = detail.query_one("#dlog")
        assert await _until(pilot, lambda: len(log.lines) == 2)
        shown = "\n".join(line.text for line in log.lines)
        assert "first line" in shown and "[bold]not markup[/]" in shown


async def test_log_lines_that_come_after_the_detail_closed_are_dropped() -> None:
    """The agent's answer can outlive the screen that asked (escape pressed meanwhile):
    it is dropped, not an error in the log (a NoMatches on ``#dlog`` was)."""
    app = ScreenHost(lambda: MainScreen(states.state()))
    app.held_logs = []
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        detail = SlotDetailScreen(states.state(), "Q27")
        await app.push_screen(detail)
        assert await _until(pilot, lambda: len(app.held_logs or []) == 1)
        await app.pop_screen()
        await pilot.pause()
        app.held_logs[0](["late line"])  # raises if the closed screen is still queried
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)


async def test_a_stalled_slot_says_so_in_its_row_and_R_offers_its_restart() -> None:
    app = ScreenHost(lambda: MainScreen(states.state(stalled=("Q27",))))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen: ConsoleScreen = app.top
        table = screen.query_one(SlotsTable)
        assert "STALLED" in str(table.get_row("Q27"))  # up on /health, and yet
        assert "STALLED" not in str(table.get_row("FLASH"))
        assert "UP" in str(table.get_row("FLASH"))
        panel = screen.query_one(AlertsPanel).text
        assert "Q27 STALLED: 3 request(s) stuck since" in panel, panel
        table.move_cursor(table.slots.index("Q27"))
        await pilot.press("R")
        await pilot.pause()
        assert ("operation", "restart", {"slot": "Q27"}) in app.asked
        # progress resumed: the next poll's state has no stall, the row says UP again
        screen.show(states.state())
        assert await _until(pilot, lambda: "STALLED" not in str(table.get_row("Q27")))


async def test_the_wall_card_of_a_stalled_slot_says_stalled() -> None:
    from console.ui.screens.wall import WallScreen
    from console.ui.widgets.board import SlotCard

    app = ScreenHost(lambda: WallScreen(states.state(read_only=True, stalled=("Q27",)),
                                        rotate_s=60))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)

        def title(slot: str) -> str:
            card = next(c for c in app.top.query(SlotCard) if c.slot == slot)
            return str(card.query_one(".title").render())

        assert await _until(pilot, lambda: "STALLED" in title("Q27")), title("Q27")
        assert "UP" in title("FLASH") and "STALLED" not in title("FLASH")


async def test_rebalance_validates_as_typed() -> None:
    rows, plan, predict = states.rebalance()
    app = ScreenHost(lambda: RebalanceScreen(rows, plan, predict))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        dialog: RebalanceScreen = app.top
        apply = dialog.query_one("#apply")

        def verdict() -> str:
            return str(dialog.query_one("#verdict").render())

        assert not apply.disabled and "valid split" in verdict()
        for flash, q27, why in (("0.80", "0.19", "GPU 0: sum 0.99 > 0.95"),
                                ("0.70", "0.19", "FLASH: below its minimum 0.74"),
                                ("x", "0.19", "FLASH: not a number"),
                                ("0.74", "0", "Q27: outside (0, 0.95]")):
            dialog.query_one("#u-FLASH").value = flash
            dialog.query_one("#u-Q27").value = q27
            assert await _until(pilot, lambda w=why: w in verdict()), (why, verdict())
            assert apply.disabled
            await pilot.press("ctrl+s")  # refused while invalid: the dialog stays
            assert app.screen is dialog
        dialog.query_one("#u-FLASH").value = "0.75"
        dialog.query_one("#u-Q27").value = "0.20"
        assert await _until(pilot, lambda: not apply.disabled)
        chosen: list = []
        dialog.dismiss = chosen.append  # what the app would be handed
        await pilot.press("ctrl+s")
        assert chosen == [{"FLASH": 0.75, "Q27": 0.20}]


async def test_the_log_screen_keeps_a_line_noted_before_it_was_drawn() -> None:
    """The app notes a poll's line to every console screen; one pushed but not yet
    drawn (composed and mounted later) must show it, not raise or drop it."""
    from textual.widgets import RichLog

    from console.ui.screens.log import LogScreen

    def pushed_then_noted() -> LogScreen:
        screen = LogScreen(states.state(), tuple(states.log_lines()))
        screen.log_line(1_800_000_000.0, "noted before the mount", "yellow")
        screen.log_line(1_800_000_001.0, "then replaced before the mount", "", replace=True)
        return screen

    app = ScreenHost(pushed_then_noted)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        log = app.top.query_one("#llog", RichLog)
        text = "\n".join(strip.text for strip in log.lines)
        assert "then replaced before the mount" in text
        assert "noted before the mount" not in text  # replaced, as the app asked
        app.top.log_line(1_800_000_002.0, "after the mount")
        assert await _until(pilot, lambda: any("after the mount" in s.text for s in log.lines))
