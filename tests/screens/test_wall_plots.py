"""The wall in a 1280x720 browser window (about 133x36 cells at 16 px): its plots are
tall enough to read and on screen, and the "all slots" box holds no empty rows the plots
need (issue 30, #8)."""

from __future__ import annotations

from console.ui.screens.wall import WallScreen
from console.ui.widgets.lines import TableLines
from console.ui.widgets.plot_widgets import SeriesPlot
from console.ui.widgets.plots import PLOT_MIN_ROWS, PlotGrid
from tests.screens import states
from tests.screens.host import ScreenHost, settle


async def test_the_walls_plots_are_readable_at_1280x720() -> None:
    size = (133, 36)
    app = ScreenHost(lambda: WallScreen(states.state(read_only=True), rotate_s=0))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        grid = app.top.query_one(PlotGrid)
        assert grid.display and grid.region.bottom <= size[1] - 1, grid.region
        plots = list(app.top.query(SeriesPlot))
        assert plots
        for plot in plots:
            assert plot.region.height >= PLOT_MIN_ROWS, (plot.metric, plot.region)
            assert plot.region.bottom <= size[1] - 1, (plot.metric, plot.region)
        box = app.top.query_one("#wfocus", TableLines)
        blank = sum(1 for line in box.text.splitlines() if not line.strip())
        assert blank <= 1, box.text
