"""The plot widgets (plotext): TTFT p95, KV usage and acceptance over time; per-position bars.

Imported only once the console has loaded (``PlotGrid.mount_plots``): plotext and
textual-plotext cost ~60 ms of start-up that the first frame should not wait for.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from textual.app import RenderResult
from textual_plotext import PlotextPlot

from console.model.history import History

PLOT_EVERY_S = 60.0
"""Default for ``Settings.plot_refresh_s``: a full drawing of the four plots is ~16-20 KB
of terminal output at 160x48, so once a minute keeps the console inside its 40 KB/min
budget (``bench/tui_bench.py``); each drawing ends at the last poll."""


SPAN_S = 15 * 60
"""The time axis at most: the last 15 minutes."""
MIN_AXIS_S = 60.0
"""The time axis at least. Between the two it spans the data: a console started two
minutes ago plots two minutes across the whole width, not a sliver at the right of a
mostly empty 15-minute axis."""
YOUNG_S = 60.0
"""A plot first drawn over less history than this is drawn again once that much has
gathered (then as it grows, see ``GROWTH``)."""
GROWTH = 1.25
"""While the axis spans the data (less than ``SPAN_S`` of history), a plot is drawn again
when its data has grown by this factor, not only every ``every_s``: a young plot fills
out as the data comes (about a dozen extra drawings in the first quarter hour)."""
PERCENT_UNITS = ("%",)
"""A plot in one of these units starts its Y axis at 0: a percentage read against a
range that starts at 0.4 % looks like a swing from empty to full."""
MARKERS_NO_COLOR = ("braille", "•", "×", "+", "o", "*")
"""Without colour (NO_COLOR) each series needs its own glyph to be told apart."""


def nice_ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    """About ``n`` round tick values covering [lo, hi] (1, 2 or 5 times a power of ten)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi - lo < 1e-12:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(1, n - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    return [round(first + i * step, 12) for i in range(math.ceil((hi - first) / step) + 1)]


PLOT_CHROME_ROWS = 4
"""Rows of a plot that are not data: title, top frame, x axis and its labels."""


def fit_ticks(ticks: list[float], rows: int) -> list[float]:
    """At most one labelled tick every other row. plotext, given more ticks than rows,
    keeps one per row in an order that changes from process to process (string hashing),
    so the same data would be labelled differently on each run."""
    room = max(2, (rows + 1) // 2)
    last = len(ticks) - 1
    for step in range(1, max(1, last) + 1):  # the ends always labelled
        if last % step == 0 and last // step + 1 <= room:
            return ticks[::step]
    return [ticks[0], ticks[-1]] if ticks else []


X_LABEL_ROOM = 14
"""Columns between time labels (the last, HH:MM:SS, is 8 wide): closer labels collide,
and plotext settles a collision differently from process to process."""


def time_ticks(width: int, span_s: float = SPAN_S) -> list[float]:
    """Offsets from the axis' right end for the time labels: four where they fit, else
    three, two."""
    data = max(1, width - 6)  # y labels and frame
    for n in (4, 3):
        if data / (n - 1) >= X_LABEL_ROOM:
            return [-span_s + i * span_s / (n - 1) for i in range(n - 1)] + [0.0]
    return [-span_s, 0.0]


def tick_label(v: float, step: float) -> str:
    """As many decimals as the tick step needs: 0.98, not 0.987500000000000044."""
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 0
    return f"{v:.{min(decimals, 6)}f}"


class FreshPlot(PlotextPlot):
    """A plot whose figure is built anew, from what it was last shown, at every render.

    plotext's figure keeps state from the sizes it was built at before (textual-plotext
    notes resizing "doesn't work right"): a plot first drawn during a layout change and
    then at its final size can place its ticks differently from one drawn at that size
    directly. Building from scratch at each render makes the picture a function of the
    data and the size alone. Renders happen on a new drawing or a resize, not per poll."""

    _draw: Callable[[Any, int], None] | None = None

    def paint(self, draw: Callable[[Any, int], None]) -> None:
        """``draw(plt, rows)`` builds the figure; ``rows`` is the height of its data area."""
        self._draw = draw
        self.refresh()

    def render(self) -> RenderResult:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        if self._draw is not None:
            self._draw(plt, max(1, self.size.height - PLOT_CHROME_ROWS))
        return super().render()


def sentence(plt: Any, text: str) -> None:
    """A plot with nothing to draw says so: no frame, no axes running −1…1 around
    nothing."""
    plt.frame(False)
    plt.xaxes(False, False)
    plt.yaxes(False, False)
    plt.xticks([])
    plt.yticks([])
    plt.text(text, x=0, y=0, alignment="center")


@dataclass(frozen=True)
class SeriesLayout:
    """What a series plot shows, decided from the data alone (``series_layout``)."""

    series: tuple[tuple[str, tuple[tuple[float, float], ...]], ...]
    """(name, ((seconds before ``end``, scaled value), …)) of each series with 2+ points."""
    end: float
    """The right end of the time axis: the newest point, i.e. the last poll."""
    span_s: float
    """How much time the axis spans, back from ``end``."""
    y_ticks: tuple[float, ...]
    """Round values from the bottom of the Y axis to its top."""


def series_layout(history: History, slots: list[str], metric: str, scale: float, unit: str,
                  now: float) -> SeriesLayout | None:
    """The plot of ``metric`` for ``slots``: every point of the last ``SPAN_S`` before the
    newest one, the axis ending at that newest point (the last poll), spanning the data
    (at least ``MIN_AXIS_S``), its Y range from 0 for a percentage. None: nothing to plot
    (no series with two points)."""
    kept = []
    for slot in slots:
        pts = [(t, v) for t, v in history.series(slot, metric).points if t <= now]
        if len(pts) >= 2:
            kept.append((slot, pts))
    if not kept:
        return None
    end = max(pts[-1][0] for _, pts in kept)
    start = end - SPAN_S
    kept = [(slot, [(t, v) for t, v in pts if t >= start]) for slot, pts in kept]
    kept = [(slot, pts) for slot, pts in kept if len(pts) >= 2]
    if not kept:
        return None
    first = min(pts[0][0] for _, pts in kept)
    span = min(SPAN_S, max(MIN_AXIS_S, end - first))
    series = tuple((slot, tuple((t - end, v * scale) for t, v in pts)) for slot, pts in kept)
    ys = [v for _, pts in series for _, v in pts]
    lo, hi = min(ys), max(ys)
    if unit in PERCENT_UNITS or (lo >= 0 and hi > 0 and lo < hi * 0.2):
        lo = min(lo, 0.0)
    return SeriesLayout(series, end, span, tuple(nice_ticks(lo, hi)))


def newest_at(points: Any, now: float) -> float:
    """The newest point's time at or before ``now`` (a replay shows the past of the
    history; live, the last point is it at once)."""
    for t, _ in reversed(points):
        if t <= now:
            return float(t)
    return -1e18


class SeriesPlot(FreshPlot):
    """One figure for every slot against clock time; the axis ends at the last poll.

    Drawn again when new points have come and ``every_s`` has passed since the last
    drawing (a full drawing is a few KB of terminal output: ``every_s`` keeps the plots
    inside the console's byte budget), or at once when the data's shape changes (a
    series gains or loses data, a backfill, a young plot's data grown by ``GROWTH``).
    Whenever it is drawn, its right edge is the newest point, labelled with its time."""

    DEFAULT_CSS = "SeriesPlot { height: 1fr; min-height: 8; }"
    _drawn_at: float = -1e18
    _drawn_key: tuple = ()
    _drawn_span: float = 0.0
    _drawn_end: float = -1e18
    layout: SeriesLayout | None = None
    """What was drawn last (None: nothing to plot)."""

    def __init__(self, title: str, metric: str, scale: float = 1.0, unit: str = "",
                 every_s: float = PLOT_EVERY_S, **kw) -> None:
        super().__init__(**kw)
        self.every_s = every_s
        self.title = title
        self.metric = metric
        self.scale = scale
        self.unit = unit

    def show(self, history: History, slots: list[str], now: float, force: bool = False,
             exact: bool = False) -> None:
        """``exact``: a recording is shown: drawn whenever the newest point at or before
        ``now`` is another than the one drawn (a replay moves at its user's pace; live,
        new points wait for ``every_s``)."""
        counts = tuple(len(history.series(s, self.metric)) >= 2 for s in slots)
        key = (tuple(slots), counts, history.backfills)
        span = self._span(history, slots, now)
        grown = (self._drawn_span < YOUNG_S <= span
                 or (self._drawn_span >= YOUNG_S and span >= self._drawn_span * GROWTH))
        newest = max((newest_at(history.series(s, self.metric).points, now) for s in slots),
                     default=-1e18)
        due = newest > self._drawn_end and now - self._drawn_at >= self.every_s
        if (exact or now < self._drawn_at) and newest != self._drawn_end:
            due = True  # a replay moved (back in time, too): the plot ends where it is
        if not (force or grown or due or key != self._drawn_key):
            return
        self._drawn_at, self._drawn_key, self._drawn_span = now, key, span
        self._drawn_end = newest
        layout = self.layout = series_layout(history, slots, self.metric, self.scale,
                                             self.unit, now)
        no_color = bool(os.environ.get("NO_COLOR"))
        title = f"{self.title}{f' ({self.unit})' if self.unit else ''}"

        def draw(plt: Any, rows: int) -> None:
            plt.title(title)
            if layout is None:
                sentence(plt, "waiting for data")
                return
            for i, (slot, pts) in enumerate(layout.series):
                marker = MARKERS_NO_COLOR[i % len(MARKERS_NO_COLOR)] if no_color else "braille"
                plt.plot([t for t, _ in pts], [v for _, v in pts], label=slot, marker=marker)
            plt.xlim(-layout.span_s, 0)
            xs = time_ticks(self.size.width, layout.span_s)
            fmt_ = "%H:%M" if layout.span_s >= 300 else "%H:%M:%S"
            plt.xticks(xs, [time.strftime(fmt_, time.localtime(layout.end + x))
                            for x in xs[:-1]]
                       + [time.strftime("%H:%M:%S", time.localtime(layout.end))])
            ticks = list(layout.y_ticks)
            if len(ticks) >= 2:
                plt.ylim(ticks[0], ticks[-1])
                shown = fit_ticks(ticks, rows)
                plt.yticks(shown, [tick_label(v, ticks[1] - ticks[0]) for v in shown])

        self.paint(draw)

    def _span(self, history: History, slots: list[str], now: float) -> float:
        """How far back the plotted data reaches (within the plot's window)."""
        oldest = [pts[0][0] for s in slots if (pts := history.series(s, self.metric).points)]
        return min(SPAN_S, now - min(oldest)) if oldest else 0.0


class PositionBars(FreshPlot):
    """Acceptance by draft position, one bar group per slot (the field: ~80 % → ~50 %)."""

    DEFAULT_CSS = "PositionBars { height: 1fr; min-height: 8; }"
    _last: tuple = ()
    _drawn_at: float = -1e18

    def __init__(self, every_s: float = PLOT_EVERY_S, **kw) -> None:
        super().__init__(**kw)
        self.every_s = every_s

    def show(self, per_slot: dict[str, tuple[float | None, ...]], now: float = 0.0,
             exact: bool = False) -> None:
        # whole percent is what the bars can show; redraw when that changes, at most
        # every plot_refresh_s unless a slot gains or loses data
        key = tuple((s, tuple(None if v is None else round(v * 100) for v in vals))
                    for s, vals in per_slot.items())
        shape = tuple((s, tuple(v is None for v in vals)) for s, vals in key)
        old_shape = tuple((s, tuple(v is None for v in vals)) for s, vals in self._last)
        if key == self._last or (shape == old_shape and not exact
                                 and 0 <= now - self._drawn_at < self.every_s):
            return
        self._last, self._drawn_at = key, now
        slots = [s for s, v in per_slot.items() if v and any(x is not None for x in v)]
        n = max((len(per_slot[s]) for s in slots), default=0)
        # short labels: plotext drops tick labels that might collide, and where "pos 1"
        # only just fits whether it is drawn varied with what the process drew before
        labels = [str(i) for i in range(n)]
        data = [[(per_slot[s][i] or 0.0) * 100 if i < len(per_slot[s]) else 0.0
                 for i in range(n)] for s in slots]

        def draw(plt: Any, rows: int) -> None:
            plt.title("acceptance by draft position (%)")
            if not slots:
                sentence(plt, "no speculative decoding data")
                return
            plt.multiple_bar(labels, data, labels=slots)
            plt.ylim(0, 100)
            ticks = fit_ticks([0, 25, 50, 75, 100], rows)
            plt.yticks(ticks, [str(t) for t in ticks])

        self.paint(draw)
