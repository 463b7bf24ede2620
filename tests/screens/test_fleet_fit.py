"""The fleet view (``F``) at a phone's 80 columns: every pod's context, state, $/h, today
and alerts whole (numbers first), the GPU's short name where it fits, no cell cut to …;
the lower-priority columns (month, pod id) come back on a wider terminal."""

from __future__ import annotations

import pytest

from console.ui.screens.fleet import FleetScreen, short_gpu
from tests.screens import states
from tests.screens.host import ScreenHost, settle


def fleet_screen() -> FleetScreen:
    return FleetScreen(states.state(contexts=("seoul", "tokyo", "oregon"), context="seoul",
                                    fleet_=states.fleet()))


def table_lines(app: ScreenHost) -> list[str]:
    lines = [s.text for s in app.screen._compositor.render_strips()]
    start = next(i for i, line in enumerate(lines) if "CONTEXT" in line)
    return lines[start:start + 4]


@pytest.mark.parametrize("width", [80, 100])
async def test_the_fleet_fits_the_terminal_numbers_first(width: int) -> None:
    app = ScreenHost(fleet_screen)
    async with app.run_test(size=(width, 24)) as pilot:
        await settle(pilot)
        lines = table_lines(app)
        text = "\n".join(lines)
        assert "…" not in text, text
        for word in ("CONTEXT", "STATE", "$/h", "TODAY", "ALERTS", "seoul", "tokyo",
                     "oregon", "RUNNING", "$4.18", "$37.62", "1 crit 1 warn"):
            assert word in text, (word, text)
        assert all(len(line.rstrip()) <= width for line in lines)


async def test_a_wide_terminal_shows_every_column_with_short_gpu_names() -> None:
    app = ScreenHost(fleet_screen)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        text = "\n".join(table_lines(app))
        assert "2× RTX PRO 6000 " in text and "Blackwell" not in text
        assert "MONTH" in text and "POD" in text and "abc123xyz" in text
    assert short_gpu(8, "NVIDIA H200 SXM5 141GB") == "8× H200"
