"""The series plots: TTFT p95, KV usage and acceptance over time, drawn as braille text
(``plot_figure``; the per-position bars beside them are text too: ``position_bars``).

Imported only once the console has loaded (``PlotGrid.mount_plots``): the first frame
with live numbers does not wait for them.
"""

from __future__ import annotations

import math
import time
from typing import Any

from msgspec import Struct
from textual.strip import Strip

from console.model.history import History
from console.ui.themes import DEFAULT as DEFAULT_THEME
from console.ui.themes import no_color as env_no_color
from console.ui.themes import theme_of
from console.ui.widgets.lines import LinesView
from console.ui.widgets.plot_figure import CHROME_ROWS, Figure, Rule, Series, draw
from console.ui.widgets.position_bars import SLOT_COLORS

PLOT_EVERY_S = 60.0
"""Default for ``Settings.plot_refresh_s``: how far a full plot's time axis moves on at a
time. New points are drawn at every poll and cost the cells they change; a move of the
axis shifts every point, a full drawing of the plots (~10 KB of terminal output at
160x48), so once a minute keeps the console inside its 40 KB/min budget
(``bench/tui_bench.py``)."""


SPAN_S = 15 * 60
"""The time axis at most: the last 15 minutes."""
AROUND_SPAN_S = 60 * 60
"""A replay's axis at most: the recorded hour around its cursor (half an hour either
side, as far as the recording goes)."""
MIN_AXIS_S = 90.0
"""The time axis at least. Between the two it spans the data: a console started two
minutes ago plots two minutes across most of the width, not a sliver at the right of a
mostly empty 15-minute axis."""
GROWTH = 1.5
"""While there is less than ``SPAN_S`` of data the axis starts at the oldest point and
spans ``MIN_AXIS_S`` times a power of this: when the data reaches its right end the axis
grows by this factor (one full drawing, ~8 KB of terminal output for the three plots:
seven in the first quarter hour), and at most a third of a young plot is empty."""
YOUNG_STEPS = 6
"""A young plot's axis ends at most 1/this of its span after the newest point, and moves
on by that much at a time. Each move draws the whole plot again (every point shifts): a
young plot moves about ``YOUNG_STEPS`` times per span of time, the larger part of the
console's terminal output in its first minutes (``bench/tui_bench.py``); at 8 moves a
span (and a 60 s first axis) the console wrote ~24 KB/min in its first three minutes."""
DRAW_EVERY_S = 5.0
"""New points are drawn at most this often (and at once when the slots shown change or
a backfill comes): a drawing costs ~10-15 ms of CPU for each of the four plots, which
the console's 3 % CPU budget (``bench/tui_bench.py``) affords every few seconds, not
every second. The newest point drawn is at most this much older than the table's."""
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


def fit_ticks(ticks: list[float], rows: int) -> list[float]:
    """At most one labelled tick every other row, the ends always labelled: labels on
    adjacent rows read as one column of numbers, not as marks on an axis."""
    room = max(2, (rows + 1) // 2)
    last = len(ticks) - 1
    for step in range(1, max(1, last) + 1):  # the ends always labelled
        if last % step == 0 and last // step + 1 <= room:
            return ticks[::step]
    return [ticks[0], ticks[-1]] if ticks else []


X_LABEL_ROOM = 14
"""Columns between time labels (the last, HH:MM:SS, is 8 wide): closer labels collide
(``plot_figure`` leaves out one that would touch the label before it)."""


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


class SeriesLayout(Struct, frozen=True):
    """What a series plot shows, decided from the data alone (``series_layout``)."""

    series: tuple[tuple[str, tuple[tuple[float, float], ...]], ...]
    """(name, ((seconds before ``end``, scaled value), …)) of each series with 2+ points."""
    end: float
    """The right end of the time axis: at the newest point or at most one axis step
    (``step_s``) after it; it stays put between steps, so a poll's new point does not
    shift the points already drawn."""
    span_s: float
    """How much time the axis spans, back from ``end``."""
    y_ticks: tuple[float, ...]
    """Round values from the bottom of the Y axis to its top."""
    newest: float = 0.0
    """The newest point's time: the last poll, drawn wherever the axis is (a replay: the
    newest at or before its cursor)."""
    cursor: float | None = None
    """A replay's cursor (its time), drawn as a line in the middle of the axis."""
    limits: tuple[float, ...] = ()
    """The figure's thresholds in force (scaled), each a line across the plot; the Y
    axis reaches them, so how far the data is from one is read at a glance."""


def young_span(data_s: float) -> float:
    """A young plot's axis: ``MIN_AXIS_S`` times the smallest power of ``GROWTH`` that
    holds ``data_s``, at most ``SPAN_S``."""
    span = MIN_AXIS_S
    while span < data_s and span < SPAN_S:
        span *= GROWTH
    return min(span, SPAN_S)


def thin(pts: list[tuple[float, float]], start: float, bucket_s: float
         ) -> list[tuple[float, float]]:
    """At most two points per ``bucket_s`` of time from ``start`` (a column of braille
    dots): its lowest and highest, in time order. What a column shows is the span from
    its lowest to its highest point; plotting every one of 900 points per series costs
    ~50 ms a drawing. Buckets are fixed in time, so a new point changes only the last."""
    if bucket_s <= 0:
        return pts
    out: list[tuple[float, float]] = []
    group: list[tuple[float, float]] = []
    key = None
    for p in [*pts, (math.inf, 0.0)]:
        k = math.floor((p[0] - start) / bucket_s) if p[0] != math.inf else None
        if k != key and group:
            lo, hi = min(group, key=lambda q: q[1]), max(group, key=lambda q: q[1])
            out.extend(sorted({lo, hi}))
            group = []
        key = k
        group.append(p)
    return out


def series_layout(history: History, slots: list[str], metric: str, scale: float, unit: str,
                  now: float, step_s: float = PLOT_EVERY_S, columns: int = 0,
                  cursor: float | None = None, limits: tuple[float, ...] = ()
                  ) -> SeriesLayout | None:
    """The plot of ``metric`` for ``slots``: every point up to the newest one (the last
    poll), on an axis that moves in steps so that most polls only add a point:

    * less than ``SPAN_S`` of data: the axis starts at the oldest point and spans the
      data (``young_span``: at least ``MIN_AXIS_S``, growing by ``GROWTH``);
    * more: the last ``SPAN_S``, ending at the newest point rounded up to ``step_s``
      (the axis moves on by ``step_s`` at a time).

    Its Y range starts at 0 for a percentage. ``columns``: the plot's width, where known:
    each series keeps two points per column of dots (``thin``). None: nothing to plot (no
    series with two points)."""
    if cursor is not None:  # a replay: the recorded hour around its cursor
        return _around(history, slots, metric, scale, unit, cursor, columns, limits)
    kept = []
    for slot in slots:
        pts = [(t, v) for t, v in history.series(slot, metric).points if t <= now]
        if len(pts) >= 2:
            kept.append((slot, pts))
    if not kept:
        return None
    newest = max(pts[-1][0] for _, pts in kept)
    oldest = min(pts[0][0] for _, pts in kept)
    if newest - oldest < SPAN_S:
        # the axis ends near now (at most an eighth of it after the newest point, not
        # a third): what room a young plot has is on its left, before the data began.
        # Its end moves by that eighth (a full drawing each time, a few a minute while
        # the plot is young); its span still grows by GROWTH
        span = young_span(newest - oldest)
        step = max(1.0, min(step_s, span / YOUNG_STEPS))
        end = min(math.ceil(newest / step) * step, oldest + span)
    else:
        span = SPAN_S
        step = max(1.0, min(step_s, SPAN_S / 4))
        end = math.ceil(newest / step) * step
    start = end - span
    bucket = span / (2 * columns) if columns > 0 else 0.0
    kept = [(slot, thin([(t, v) for t, v in pts if t >= start], start, bucket))
            for slot, pts in kept]
    kept = [(slot, pts) for slot, pts in kept if len(pts) >= 2]
    return _laid_out(kept, end, span, scale, unit, newest, limits=limits)


def _laid_out(kept: list[tuple[str, list[tuple[float, float]]]], end: float, span: float,
              scale: float, unit: str, newest: float, cursor: float | None = None,
              limits: tuple[float, ...] = ()) -> SeriesLayout | None:
    """The kept points as seconds before ``end``, scaled, with the Y ticks (from 0 for
    a percentage): the one ending of ``series_layout`` live and replayed."""
    if not kept:
        return None
    series = tuple((slot, tuple((t - end, v * scale) for t, v in pts)) for slot, pts in kept)
    ys = [v for _, pts in series for _, v in pts]
    lo, hi = min(ys), max(ys)
    limits = tuple(sorted({v * scale for v in limits}))
    if limits:  # the thresholds are on the axis: the distance to one is what is read
        lo, hi = min(lo, *limits), max(hi, *limits)
    if unit in PERCENT_UNITS or (lo >= 0 and hi > 0 and lo < hi * 0.2):
        lo = min(lo, 0.0)
    return SeriesLayout(series, end, span, tuple(nice_ticks(lo, hi)), newest, cursor, limits)


def _around(history: History, slots: list[str], metric: str, scale: float, unit: str,
            cursor: float, columns: int, limits: tuple[float, ...] = ()
            ) -> SeriesLayout | None:
    """``series_layout`` for a replay: the points recorded up to half an hour either
    side of the cursor (``ReplayMark.ahead``), on an axis that spans them (a recording
    of two minutes is not a sliver of an hour), the cursor always on it."""
    half = AROUND_SPAN_S / 2
    near = [(slot, [(t, v) for t, v in history.series(slot, metric).points
                    if cursor - half <= t <= cursor + half]) for slot in slots]
    near = [(slot, pts) for slot, pts in near if pts]
    if not near:
        return None
    start = min(pts[0][0] for _, pts in near)
    end = max(cursor, max(pts[-1][0] for _, pts in near))
    start = min(start, cursor)
    if end - start < MIN_AXIS_S:
        end = start + MIN_AXIS_S
    span = end - start
    bucket = span / (2 * columns) if columns > 0 else 0.0
    kept = []
    newest = -1e18
    for slot, pts in near:
        before = [t for t, _ in pts if t <= cursor]
        if before:
            newest = max(newest, before[-1])
        pts = thin(pts, start, bucket)
        if len(pts) >= 2:
            kept.append((slot, pts))
    return _laid_out(kept, end, span, scale, unit, newest, cursor, limits)


def newest_at(points: Any, now: float) -> float:
    """The newest point's time at or before ``now`` (a replay shows the past of the
    history; live, the last point is it at once)."""
    for t, _ in reversed(points):
        if t <= now:
            return float(t)
    return -1e18


class SeriesPlot(LinesView):
    """One figure for every slot against clock time; its newest point is the last poll.

    Drawn at every poll that brings a point (or at once when the slots shown or a
    backfill change it). The time axis moves in steps (``series_layout``: by ``every_s``,
    the settings' ``plot_refresh_s``, once 15 minutes are plotted), so a drawing between
    two steps differs from the last one by the new point's cells alone, and only those
    reach the terminal (``LinesView``); a step is one full drawing."""

    DEFAULT_CSS = "SeriesPlot { height: 1fr; min-height: 8; }"
    _drawn_key: tuple = ()
    _drawn_end: float = -1e18
    _drawn_at: float = -1e18
    drawn: SeriesLayout | None = None
    """What was drawn last (None: nothing to plot). Not ``layout``: a widget's own
    ``layout`` is Textual's (how a container arranges its children)."""
    _said: str | None = None
    """Shown instead of the figure (``say``): why there is none."""
    _theme: str = ""
    """The app's theme the lines were built in."""
    _built: tuple | None = None
    """What the lines were built from (the layout, what is said, the size, the theme):
    a drawing that would build the same lines builds nothing."""

    def __init__(self, title: str, metric: str, scale: float = 1.0, unit: str = "",
                 every_s: float = PLOT_EVERY_S, **kw) -> None:
        super().__init__(**kw)
        self.every_s = every_s
        self.title = title
        self.metric = metric
        self.scale = scale
        self.unit = unit

    @property
    def heading(self) -> str:
        return f"{self.title}{f' ({self.unit})' if self.unit else ''}"

    def show(self, history: History, slots: list[str], now: float, force: bool = False,
             exact: bool = False, around: bool = False, limits: tuple[float, ...] = ()
             ) -> None:
        """``exact``: a recording is shown: drawn whenever the newest point at or before
        ``now`` is another than the one drawn (a replay moves at its user's pace; live,
        new points are drawn every ``DRAW_EVERY_S`` at most). ``around``: the axis is
        the recorded hour around ``now`` (a replay's cursor), ``history`` holding the
        points after it too."""
        counts = tuple(len(history.series(s, self.metric)) >= 2 for s in slots)
        key = (tuple(slots), counts, history.backfills, now if around else None, limits)
        newest = max((newest_at(history.series(s, self.metric).points, now) for s in slots),
                     default=-1e18)
        due = newest != self._drawn_end and not 0 <= now - self._drawn_at < DRAW_EVERY_S
        if (exact or now < self._drawn_at) and newest != self._drawn_end:
            due = True  # a replay moved (back in time, too): the plot ends where it is
        if not (force or due or key != self._drawn_key):
            return
        self._drawn_key, self._drawn_end, self._drawn_at = key, newest, now
        self.drawn = series_layout(history, slots, self.metric, self.scale, self.unit, now,
                                   self.every_s, self.size.width,
                                   cursor=now if around else None, limits=limits)
        self._paint()

    def say(self, why: str | None) -> None:
        """Show ``why`` under the title instead of the figure (None: the figure again)."""
        self._said = why
        self._paint()

    def _paint(self) -> None:
        width, height = self.size.width, self.size.height
        if not width or not height:
            return  # not laid out yet: drawn at its first size (on_resize)
        theme = theme_of(self.app) if self.is_attached else DEFAULT_THEME
        no_color = not theme.colour or env_no_color()
        key = (self.drawn, self._said, width, height, theme.name, no_color)
        if key == self._built:
            return
        self._built = key
        self._theme = self.app.theme if self.is_attached else ""
        self.show_lines(draw(self.figure(theme.series or SLOT_COLORS, theme.limit,
                                         theme.cursor, no_color), width, height))

    def figure(self, colours: tuple[str, ...], limit: str | None = None,
               cursor: str | None = None, no_color: bool = False) -> Figure:
        """What the plot shows, as a ``plot_figure.Figure`` for its width."""
        layout = self.drawn
        if self._said is not None or layout is None:
            return Figure(self.heading, sentence=self._said or "waiting for data")
        series = tuple(
            Series(slot, pts,
                   None if no_color else colours[i % len(colours)],
                   MARKERS_NO_COLOR[i % len(MARKERS_NO_COLOR)] if no_color and i else None)
            for i, (slot, pts) in enumerate(layout.series))
        xs = time_ticks(self.size.width, layout.span_s)
        fmt_ = "%H:%M" if layout.span_s >= 300 else "%H:%M:%S"
        x_labels = [time.strftime(fmt_, time.localtime(layout.end + x)) for x in xs[:-1]]
        x_labels.append(time.strftime("%H:%M:%S", time.localtime(layout.end)))
        ticks = list(layout.y_ticks)
        rows = max(1, self.size.height - CHROME_ROWS)
        step = ticks[1] - ticks[0] if len(ticks) >= 2 else 1.0
        if len(ticks) >= 2:
            y_range = (ticks[0], ticks[-1])
            y_ticks = tuple((v, tick_label(v, step)) for v in fit_ticks(ticks, rows))
        else:
            y_range, y_ticks = (0.0, 1.0), ()
        return Figure(
            self.heading, series, x_range=(-layout.span_s, 0.0), y_range=y_range,
            x_ticks=tuple(zip(xs, x_labels, strict=True)), y_ticks=y_ticks,
            # the threshold: yellow cells, then an alert; the replay's cursor: the
            # tables' moment
            across=tuple(Rule(v, None if no_color else limit, tick_label(v, step))
                         for v in layout.limits),
            down=(() if layout.cursor is None else
                  (Rule(layout.cursor - layout.end, None if no_color else cursor),)))

    def on_resize(self) -> None:
        self._paint()
        super().on_resize()

    def render_line(self, y: int) -> Strip:
        # a theme switch repaints every widget: the plot's colours are the theme's (built
        # again only then: this runs for every line Textual draws)
        if self._built is not None and self.is_attached and self.app.theme != self._theme:
            self._paint()
        return super().render_line(y)
