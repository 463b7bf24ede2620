"""The plot widgets (plotext): TTFT p95, KV usage and acceptance over time (the
per-position bars are text: ``position_bars``).

Imported only once the console has loaded (``PlotGrid.mount_plots``): plotext and
textual-plotext cost ~60 ms of start-up that the first frame should not wait for.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from plotext._dict import themes as PLOTEXT_THEMES  # where textual-plotext registers them
from rich.ansi import AnsiDecoder
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual_plotext import PlotextPlot

from console.model.history import History
from console.ui.private_reach import holds
from console.ui.themes import DEFAULT as DEFAULT_THEME
from console.ui.themes import no_color as env_no_color
from console.ui.themes import plotext_colour, theme_of
from console.ui.widgets.lines import Spans, changed_spans, cut, same, strip_of

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
MIN_AXIS_S = 60.0
"""The time axis at least. Between the two it spans the data: a console started two
minutes ago plots two minutes across most of the width, not a sliver at the right of a
mostly empty 15-minute axis."""
GROWTH = 1.5
"""While there is less than ``SPAN_S`` of data the axis starts at the oldest point and
spans ``MIN_AXIS_S`` times a power of this: when the data reaches its right end the axis
grows by this factor (one full drawing, ~8 KB of terminal output for the three plots:
seven in the first quarter hour), and at most a third of a young plot is empty."""
YOUNG_STEPS = 8
"""A young plot's axis ends at most 1/this of its span after the newest point."""
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
    """A plot whose figure is built anew, from what it was last shown, at every drawing,
    and whose drawing reaches the terminal as the cells that changed.

    plotext's figure keeps state from the sizes it was built at before (textual-plotext
    notes resizing "doesn't work right"): a plot first drawn during a layout change and
    then at its final size can place its ticks differently from one drawn at that size
    directly. Building from scratch each time makes the picture a function of the data
    and the size alone.

    A new drawing is compared with the last one line by line, and only the changed span
    of each line is repainted (as ``LinesView`` does): a poll that adds a point at the
    right edge of an axis that has not moved costs the few cells that point changes,
    not the ~3 KB of the whole plot.

    Each line is also converted for the terminal alone (``render_line``). Textual's own
    path converts every line of a widget whenever any region of it is dirty: for four
    plots redrawn every few seconds that was a seventh of the console's CPU."""

    _draw: Callable[[Any, int], None] | None = None
    _lines: list[Text] | None = None
    """The figure as last built, line by line (None: build it at the next render)."""
    _built_for: tuple[Size, str, bool] | None = None
    _strips: dict[int, tuple[Text, Strip]] | None = None
    """Line → (the line, its strip): converted once per line drawn."""
    _spans: dict[int, Spans] | None = None
    """Line → the cells that changed at the last drawing (the strip is cut there)."""

    def paint(self, draw: Callable[[Any, int], None]) -> None:
        """``draw(plt, rows)`` builds the figure; ``rows`` is the height of its data area."""
        self._draw = draw
        old = self._lines
        if old is None or not self.is_mounted or self._built_for != self._build_key():
            self._lines = None
            self.refresh()
            return
        new = self._build()
        if len(new) != len(old):
            self._spans = None
            self.refresh()
            return
        width = self.size.width
        spans: dict[int, Spans] = {}
        for y, (a, b) in enumerate(zip(old, new, strict=True)):
            if same(a, b):
                new[y] = a  # the same line object: its strip is kept
                continue
            runs = changed_spans(a, b, self.app.console, width)
            if runs:
                spans[y] = runs
                self.refresh(*(Region(x1, y, x2 - x1, 1) for x1, x2 in runs))
        self._spans = spans

    def _build_key(self) -> tuple[Size, str, bool]:
        # and whether textual-plotext has made the theme's plot colours yet: it makes them
        # when the app announces a new theme, which can come after a frame drawn in it
        name = getattr(self, "_get_plotext_theme_name", lambda t: t)(self.app.theme)
        return self.size, self.app.theme, name in PLOTEXT_THEMES

    def _build(self) -> list[Text]:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        if self._draw is not None:
            self._draw(plt, max(1, self.size.height - PLOT_CHROME_ROWS))
        self._built_for = self._build_key()
        self._lines = self._figure_lines()
        return self._lines

    def _figure_lines(self) -> list[Text]:
        """The figure, line by line: textual-plotext's ``render`` without its round trip
        (``Text.from_ansi`` joins the decoded lines into one text, which the line diff
        then splits again: a third of a drawing's CPU). Where that package's size and
        theme steps (private: ``console/ui/private_reach.py``) are not the code this was
        written against, its own ``render``."""
        plt = self.plt
        theme_name = getattr(self, "_get_plotext_theme_name", None)
        set_size = getattr(plt, "_set_size", None)
        if theme_name is None or set_size is None or not holds(
                "plot lines without a round trip"):
            text = super().render()
            assert isinstance(text, Text)
            return list(text.split("\n", allow_blank=True))
        width, height = self.size
        plt.plotsize(width, height)
        set_size(width, height)  # as textual-plotext's render does (its issue #5)
        plt.theme(theme_name(self.app.theme))
        return list(AnsiDecoder().decode(plt.build()))

    def render(self) -> Text:
        lines = self._lines
        if lines is None or self._built_for != self._build_key():
            lines = self._build()
        return Text("\n").join(lines)

    def render_line(self, y: int) -> Strip:
        lines = self._lines
        if lines is None or self._built_for != self._build_key():
            lines = self._build()
            self._spans = None
        strips = self._strips if self._strips is not None else {}
        self._strips = strips
        width = self.size.width
        if not 0 <= y < len(lines):
            return Strip.blank(width, self.rich_style)
        text = lines[y]
        hit = strips.get(y)
        if hit is None or hit[0] is not text:
            span = self._spans.get(y) if self._spans else None
            strip = cut(strip_of(text, self.app.console, width), span)
            hit = strips[y] = (text, strip.apply_style(self.rich_style))
        return hit[1]


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


class SeriesPlot(FreshPlot):
    """One figure for every slot against clock time; its newest point is the last poll.

    Drawn at every poll that brings a point (or at once when the slots shown or a
    backfill change it). The time axis moves in steps (``series_layout``: by ``every_s``,
    the settings' ``plot_refresh_s``, once 15 minutes are plotted), so a drawing between
    two steps differs from the last one by the new point's cells alone, and only those
    reach the terminal (``FreshPlot``); a step is one full drawing."""

    DEFAULT_CSS = "SeriesPlot { height: 1fr; min-height: 8; }"
    _drawn_key: tuple = ()
    _drawn_end: float = -1e18
    _drawn_at: float = -1e18
    _drawn_figure: tuple | None = None
    drawn: SeriesLayout | None = None
    """What was drawn last (None: nothing to plot). Not ``layout``: a widget's own
    ``layout`` is Textual's (how a container arranges its children)."""

    def __init__(self, title: str, metric: str, scale: float = 1.0, unit: str = "",
                 every_s: float = PLOT_EVERY_S, **kw) -> None:
        super().__init__(**kw)
        self.every_s = every_s
        self.title = title
        self.metric = metric
        self.scale = scale
        self.unit = unit

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
        layout = self.drawn = series_layout(history, slots, self.metric, self.scale,
                                             self.unit, now, self.every_s, self.size.width,
                                             cursor=now if around else None,
                                             limits=limits)
        # the figure is a function of what the layout draws, the size and the theme: a
        # new point that changes no column's lowest or highest dot (``thin``) draws the
        # same picture, and plotext is not asked to build it again
        drawn = (layout.series, layout.end, layout.span_s, layout.y_ticks, layout.cursor,
                 layout.limits) if layout is not None else None
        if not force and drawn == self._drawn_figure and self._lines is not None \
                and self._built_for == self._build_key():
            return
        self._drawn_figure = drawn
        title = f"{self.title}{f' ({self.unit})' if self.unit else ''}"

        def draw(plt: Any, rows: int) -> None:
            # the theme when drawn, not when asked: a theme switch draws it again
            # (a plot drawn before it is mounted, as a test draws one: the default's)
            theme = theme_of(self.app) if self.is_attached else DEFAULT_THEME
            no_color = not theme.colour or env_no_color()
            series = theme.series
            plt.title(title)
            if layout is None:
                sentence(plt, "waiting for data")
                return
            for i, (slot, pts) in enumerate(layout.series):
                marker = MARKERS_NO_COLOR[i % len(MARKERS_NO_COLOR)] if no_color else "braille"
                # no colour: the terminal's own text colour (plotext's "default")
                colour = ({"color": "default"} if no_color else
                          {"color": plotext_colour(series[i % len(series)])} if series else {})
                plt.plot([t for t, _ in pts], [v for _, v in pts], label=slot, marker=marker,
                         **colour)
            plt.xlim(-layout.span_s, 0)
            for limit in layout.limits:  # the threshold: yellow cells, then an alert
                plt.hline(limit, plotext_colour(theme.limit) if not no_color else None)
            if layout.cursor is not None:  # where the replay is: the tables' moment
                plt.vline(layout.cursor - layout.end,
                          plotext_colour(theme.cursor) if not no_color else None)
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
