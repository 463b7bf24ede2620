"""The SLO column (issue 45): there where a slot has a target, gone where none has one
(a column of – says nothing), dropped first-but-not-last by a narrow terminal, and
sortable worst first like the other figures."""

from __future__ import annotations

import pytest

from console.ui.screens.main import MainScreen
from console.ui.widgets.slots import SlotsTable
from tests.screens import states
from tests.screens.host import ScreenHost, settle


@pytest.mark.parametrize(("targets", "width", "shown"), [
    (True, 160, True), (True, 120, True), (True, 80, False), (False, 160, False)])
async def test_the_slo_column_is_there_where_a_slot_has_a_target(
        targets: bool, width: int, shown: bool) -> None:
    st = states.slo_state() if targets else states.state()
    app = ScreenHost(lambda: MainScreen(st))
    async with app.run_test(size=(width, 40)) as pilot:
        await settle(pilot)
        table = app.top.query_one(SlotsTable)
        assert ("slo_attainment" in table.columns) is shown, (width, table.columns)
        assert ("SLO" in table._header.plain.split()) is shown
        if shown:
            lines = {slot: table._lines[slot].plain for slot in table.slots}
            assert " 100.0% " in lines["FLASH"] and " 83.3% " in lines["Q27"], lines
            # acceptance-like: a figure bad when low sorts smallest (worst) first
            table.set_order(sort_key="slo_attainment", reverse=False)
            assert table.slots == ["Q27", "FLASH"]
