"""The slots table's sort marker (issue 30, #14): ▲ ascending, ▼ descending, beside the
column's label and never over it; worst first by default."""

from __future__ import annotations

from console.ui.screens.main import MainScreen
from console.ui.widgets.slots import SlotsTable
from tests.screens import states
from tests.screens.host import ScreenHost, settle


async def test_marker_direction_and_room_and_worst_first_default() -> None:
    app = ScreenHost(lambda: MainScreen(states.state(down=("Q27",))))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.top.query_one(SlotsTable)
        assert table.sort_key == "health" and table.slots == ["Q27", "FLASH"]
        assert "HEALTH▲" in table._header.plain
        for key, label in (("kv_p99", "KV p99"), ("gpus", "GPU")):
            table.set_order(sort_key=key, reverse=False)
            assert f"{label}▲" in table._header.plain, table._header.plain
            table.set_order(reverse=True)
            assert f"{label}▼" in table._header.plain, table._header.plain
