"""The grid of four plots every screen shows, mounted once the console has loaded.

The plot widgets live in ``plot_widgets`` (braille text: ``plot_figure``) and
``position_bars`` (text); this module stays light so the first frame with live numbers
does not wait for them. Until ``mount_plots`` runs the grid shows one line saying the
plots are loading.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from textual.containers import Grid
from textual.widgets import Static

from console.model import catalog
from console.model.history import History

PLOT_MIN_ROWS = 8
"""A plot shorter than this has no room for its data under its title, frame and axis
(and its legend covers what data there is)."""


LIMIT_OF = {"kv_cache_usage": "kv_p99"}
"""A plotted figure whose threshold is another figure's: KV now is read against the KV
p99 limit (its p99 is what the alert compares; the plot shows the usage under it)."""


def plot_limits(metric: str, slots: list[str], thresholds: Mapping[str, Any]
                ) -> tuple[float, ...]:
    """The thresholds of ``metric`` in force for ``slots`` (each value once), unscaled."""
    fig = catalog.BY_KEY.get(LIMIT_OF.get(metric, metric))
    if fig is None or fig.threshold is None or fig.threshold.below:
        return ()
    out = {fig.threshold.limit(thresholds.get(s)) for s in slots if s in thresholds}
    return tuple(sorted(v for v in out if v is not None))


class PlotGrid(Grid):
    """The catalog's plotted figures over time, then acceptance by draft position:
    two rows, as many columns as they need; one row of them all where two rows of
    ``PLOT_MIN_ROWS`` do not fit (a wall in a 1280x720 browser window)."""

    DEFAULT_CSS = """
    PlotGrid { height: 1fr; min-height: 12; }
    PlotGrid > .plots-loading { color: $text-muted; }
    """

    def __init__(self, ready: bool, plot_refresh_s: float, **kw: Any) -> None:
        super().__init__(**kw)
        # one cell per plotted figure plus the position bars, on two rows
        self.styles.grid_size_columns = -(-(len(catalog.plots()) + 1) // 2)
        self.styles.grid_size_rows = 2
        self.ready = ready
        self.one_row = False
        """All plots side by side in one row (too short for two)."""
        """Plots mount now (the console has loaded) or on ``mount_plots``."""
        self.plot_refresh_s = plot_refresh_s

    def compose(self):
        if self.ready:
            yield from self._plots()
        else:
            loading = Static("plots: loading…", classes="plots-loading")
            loading.styles.column_span = self.styles.grid_size_columns
            loading.styles.row_span = 2
            yield loading

    def _plots(self) -> list[Any]:
        from console.ui.widgets.plot_widgets import SeriesPlot
        from console.ui.widgets.position_bars import PositionBars

        every = self.plot_refresh_s
        out: list[Any] = []
        for fig, p in catalog.plots():
            out.append(SeriesPlot(p.title, fig.key, scale=p.scale, unit=p.unit, every_s=every,
                                  classes=f"p-{fig.key}"))
        bars = PositionBars(classes="p-pos")
        out.append(bars)
        self._arrange(bars)
        return out

    def _arrange(self, bars: Any = None) -> None:
        """Two rows (the bars take the last two cells of an even count), or one row."""
        n = len(catalog.plots()) + 1
        rows = 1 if self.one_row else 2
        self.styles.grid_size_rows = rows
        self.styles.grid_size_columns = n if self.one_row else -(-n // 2)
        if bars is None:
            from console.ui.widgets.position_bars import PositionBars

            found = self.query(PositionBars)
            bars = found.first() if found else None
        if bars is not None:
            bars.styles.column_span = 2 if not self.one_row and (n - 1) % 2 == 0 else 1

    def on_resize(self) -> None:
        one_row = 0 < self.size.height < 2 * PLOT_MIN_ROWS
        if one_row != self.one_row:
            self.one_row = one_row
            self._arrange()

    async def mount_plots(self) -> None:
        """Replace the placeholder with the plots (the app calls this when it is ready)."""
        if self.query(".plots-loading"):
            await self.query(".plots-loading").remove()
            await self.mount_all(self._plots())

    def show(self, history: History, snap, slots: list[str], now: float,
             exact: bool = False, ahead: History | None = None,
             thresholds: Mapping[str, Any] | None = None) -> None:
        """``exact``: a recording is shown (replay, the live pause): drawn as of ``now``
        whenever that changes what is plotted, not once a ``plot_refresh_s``.
        ``ahead``: a replay's history reaching past ``now`` (``ReplayMark.ahead``): the
        series plots show the recorded hour around ``now``."""
        if not self.display or snap is None or self.query(".plots-loading"):
            return
        from console.ui.widgets.plot_widgets import SeriesPlot
        from console.ui.widgets.position_bars import PositionBars

        for plot in self.query(SeriesPlot):
            plot.show(ahead if ahead is not None else history, slots, now, exact=exact,
                      around=ahead is not None,
                      limits=plot_limits(plot.metric, slots, thresholds or {}))
        self.query_one(PositionBars).show({
            s.slot: (s.figures.spec_decode.per_position
                     if s.figures and s.figures.spec_decode else ())
            for s in snap.slots if s.slot in slots}, now, exact=exact)
