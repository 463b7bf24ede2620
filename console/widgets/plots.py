"""The grid of four plots every screen shows, mounted once the console has loaded.

The plot widgets live in ``plot_widgets`` (plotext); this module stays light so the
first frame with live numbers does not wait for them. Until ``mount_plots`` runs the
grid shows one line saying the plots are loading.
"""

from __future__ import annotations

from typing import Any

from textual.containers import Grid
from textual.widgets import Static

from ..history import History


class PlotGrid(Grid):
    """TTFT p95, KV usage, acceptance over time and per-position bars (2×2)."""

    DEFAULT_CSS = """
    PlotGrid { grid-size: 2 2; height: 1fr; min-height: 12; }
    PlotGrid > .plots-loading { column-span: 2; row-span: 2; color: $text-muted; }
    """

    def __init__(self, ready: bool, plot_refresh_s: float, **kw: Any) -> None:
        super().__init__(**kw)
        self.ready = ready
        """Plots mount now (the console has loaded) or on ``mount_plots``."""
        self.plot_refresh_s = plot_refresh_s

    def compose(self):
        if self.ready:
            yield from self._plots()
        else:
            yield Static("plots: loading…", classes="plots-loading")

    def _plots(self) -> list[Any]:
        from .plot_widgets import PositionBars, SeriesPlot

        every = self.plot_refresh_s
        return [SeriesPlot("TTFT p95", "ttft_p95", unit="s", every_s=every, classes="p-ttft"),
                SeriesPlot("KV cache usage", "kv", scale=100, unit="%", every_s=every,
                           classes="p-kv"),
                SeriesPlot("speculative acceptance", "acceptance", scale=100, unit="%",
                           every_s=every, classes="p-acc"),
                PositionBars(every_s=every, classes="p-pos")]

    async def mount_plots(self) -> None:
        """Replace the placeholder with the plots (the app calls this when it is ready)."""
        if self.query(".plots-loading"):
            await self.query(".plots-loading").remove()
            await self.mount_all(self._plots())

    def force_redraw(self) -> None:
        """The next ``show`` draws every plot, whatever their refresh interval says."""
        from .plot_widgets import PositionBars, SeriesPlot

        for plot in self.query(SeriesPlot):
            plot._drawn_key = ()
        for bars in self.query(PositionBars):
            bars._last = ()

    def show(self, history: History, snap, slots: list[str], now: float) -> None:
        if not self.display or snap is None or self.query(".plots-loading"):
            return
        from .plot_widgets import PositionBars, SeriesPlot

        for plot in self.query(SeriesPlot):
            plot.show(history, slots, now)
        self.query_one(PositionBars).show({
            s.slot: (s.figures.spec_decode.per_position
                     if s.figures and s.figures.spec_decode else ())
            for s in snap.slots if s.slot in slots}, now)
