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


async def test_the_fleet_shows_each_pods_lowest_slo_attainment_coloured_by_band() -> None:
    """SLO (issue 45): the lowest attainment of a pod's slots with its slot, in the
    wall's band colours; "no req" for a pod whose slots had no request; "–" for a pod
    that could not be read."""
    from console.model import slo
    from console.ui.screens.fleet import fleet_columns

    app = ScreenHost(fleet_screen)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        lines = table_lines(app)
    head, seoul, tokyo, oregon = lines
    at = head.index(" SLO ") + 1  # not SLOTS
    assert seoul[at:].startswith("83.3% Q27"), seoul
    assert tokyo[at:].startswith("no req"), tokyo
    assert oregon[at:].startswith("–"), oregon
    [(_, _, _, cells)] = [c for c in fleet_columns(states.fleet()) if c[0] == "SLO"]
    assert str(cells[0].style) == slo.STYLES["red"]
    assert "dim" in str(cells[1].style)
