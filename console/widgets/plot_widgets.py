"""The plot widgets (plotext): TTFT p95, KV usage and acceptance over time; per-position bars.

Imported only once the console has loaded (``PlotGrid.mount_plots``): plotext and
textual-plotext cost ~60 ms of start-up that the first frame should not wait for.
"""

from __future__ import annotations

from textual_plotext import PlotextPlot

from ..history import History

PLOT_EVERY_S = 120.0
"""Default for ``Settings.plot_refresh_s``: a full redraw is several KB of terminal output,
and a plot of the last hour gains nothing from being repainted every refresh."""


class SeriesPlot(PlotextPlot):
    """One metric for every slot over the last minutes (x: minutes ago)."""

    DEFAULT_CSS = "SeriesPlot { height: 1fr; min-height: 8; }"
    _drawn_at: float = -1e18
    _drawn_key: tuple = ()

    def __init__(self, title: str, metric: str, scale: float = 1.0, unit: str = "",
                 every_s: float = PLOT_EVERY_S, **kw) -> None:
        super().__init__(**kw)
        self.every_s = every_s
        self.title = title
        self.metric = metric
        self.scale = scale
        self.unit = unit

    def show(self, history: History, slots: list[str], now: float, force: bool = False
             ) -> None:
        counts = tuple(len(history.series(s, self.metric)) >= 2 for s in slots)
        key = (tuple(slots), counts)
        if not force and key == self._drawn_key and now - self._drawn_at < self.every_s:
            return
        self._drawn_at, self._drawn_key = now, key
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(f"{self.title}{f' ({self.unit})' if self.unit else ''}")
        any_data = False
        for slot in slots:
            pts = list(history.series(slot, self.metric).points)
            if len(pts) < 2:
                continue
            xs = [(t - now) / 60 for t, _ in pts]
            ys = [v * self.scale for _, v in pts]
            plt.plot(xs, ys, label=slot, marker="braille")
            any_data = True
        if not any_data:
            plt.text("waiting for data", x=0, y=0)
        plt.xlabel("minutes ago")
        self.refresh()


class PositionBars(PlotextPlot):
    """Acceptance by draft position, one bar group per slot (the field: ~80 % → ~50 %)."""

    DEFAULT_CSS = "PositionBars { height: 1fr; min-height: 8; }"
    _last: tuple = ()
    _drawn_at: float = -1e18

    def __init__(self, every_s: float = PLOT_EVERY_S, **kw) -> None:
        super().__init__(**kw)
        self.every_s = every_s

    def show(self, per_slot: dict[str, tuple[float | None, ...]], now: float = 0.0) -> None:
        # whole percent is what the bars can show; redraw when that changes, at most
        # every plot_refresh_s unless a slot gains or loses data
        key = tuple((s, tuple(None if v is None else round(v * 100) for v in vals))
                    for s, vals in per_slot.items())
        shape = tuple((s, tuple(v is None for v in vals)) for s, vals in key)
        old_shape = tuple((s, tuple(v is None for v in vals)) for s, vals in self._last)
        if key == self._last or (shape == old_shape and now - self._drawn_at < self.every_s):
            return
        self._last, self._drawn_at = key, now
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("acceptance by draft position (%)")
        slots = [s for s, v in per_slot.items() if v and any(x is not None for x in v)]
        if not slots:
            plt.text("no speculative decoding data", x=0, y=0)
            self.refresh()
            return
        n = max(len(per_slot[s]) for s in slots)
        labels = [f"pos {i}" for i in range(n)]
        data = [[(per_slot[s][i] or 0.0) * 100 if i < len(per_slot[s]) else 0.0
                 for i in range(n)] for s in slots]
        plt.multiple_bar(labels, data, labels=slots)
        plt.ylim(0, 100)
        self.refresh()
