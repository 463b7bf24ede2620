"""What a poll writes to the terminal (issue 27's byte budget; issue 30 #8): a plot takes
each poll's new point without rewriting itself, and the header's ticking age costs its
own cells, not the header's whole line. Counted as the regions each widget asks Textual
to repaint: what the compositor then writes (``bench/tui_bench.py`` measures the bytes)."""

from __future__ import annotations

import math
from typing import Any

from textual.app import App, ComposeResult
from textual.geometry import Region

from console.model.history import History
from console.model.snapshot import PodSnapshot
from console.ui.widgets.header import AGE_ROOM, PodHeader
from console.ui.widgets.plot_widgets import DRAW_EVERY_S, SeriesPlot


def _record(widget: Any) -> list[Region | None]:
    """Every repaint the widget asks for: a region, or None for the whole widget."""
    asked: list[Region | None] = []
    refresh = widget.refresh

    def spy(*regions: Region, **kw: Any) -> Any:
        asked.extend(regions or [None])
        return refresh(*regions, **kw)

    widget.refresh = spy
    return asked


async def settle(pilot: Any) -> None:
    """Laid out at its size: a condition, not a delay."""
    for _ in range(200):
        await pilot.pause()
        if all(w.size.width for w in pilot.app.query("#h, #s")):
            return
    raise AssertionError("never laid out")


class Plots(App[None]):
    def compose(self) -> ComposeResult:
        yield PodHeader("p", demo=False, read_only=False, id="h")
        yield SeriesPlot("TTFT p95", "ttft_p95_s", unit="s", every_s=60, id="s")


async def test_a_poll_between_axis_steps_repaints_the_new_points_cells_alone() -> None:
    app = Plots()
    async with app.run_test(size=(60, 20)) as pilot:
        plot = app.query_one("#s", SeriesPlot)
        h = History(3600, 1)
        t = 1000.0
        for i in range(1200):  # 20 minutes: a full 15-minute axis
            t = 1000.0 + i
            h.add("A", "ttft_p95_s", t, 0.9 + 0.1 * math.sin(i / 9))
        plot.show(h, ["A"], t)
        await settle(pilot)
        asked = _record(plot)
        cells = plot.size.area
        end = plot.drawn.end if plot.drawn else None
        t += DRAW_EVERY_S  # the next drawing, still before the axis' next step
        h.add("A", "ttft_p95_s", t, 0.95)  # within the Y range: no new scale
        plot.show(h, ["A"], t)
        assert plot.drawn is not None and plot.drawn.end == end
        assert plot.drawn.newest == t  # the new point is drawn now, not at the next step
        assert asked and None not in asked, asked  # never the whole plot
        painted = sum(r.area for r in asked if r is not None)
        assert painted < cells / 10, (painted, cells)
        assert all(r.right >= plot.size.width - 12 for r in asked if r is not None), asked


async def test_the_headers_ticking_age_repaints_its_own_cells() -> None:
    app = Plots()
    async with app.run_test(size=(160, 20)) as pilot:
        header = app.query_one("#h", PodHeader)
        header.refresh_s = 1.0
        pod = PodSnapshot(pod_id="p1", status="RUNNING", cost_per_hr=4.18, fetched_at=1000.0)
        header.show(pod, 1003.0, age=3.0)
        await settle(pilot)
        asked = _record(header)
        for k, age in enumerate((4.0, 9.0, 10.0, None, 3.0)):
            header.show(pod, 1004.0 + k, age=age)
        # the age comes, ticks, grows a digit and goes: the rest of the line never moves
        assert asked and None not in asked, asked
        assert all(r.x >= 158 - AGE_ROOM for r in asked if r is not None), asked
        assert "read 3s ago" in header.render().plain and "RUNNING" in header.render().plain
