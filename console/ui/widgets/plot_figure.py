"""A line plot drawn as text: braille dots for the data (two columns by four rows of dots
in a cell), a frame with ticks, the labels, a legend in the title row.

The plots were plotext figures. plotext builds a whole canvas of styled cells, renders it
to ANSI codes, and those were decoded back into styled text: ~10-15 ms of CPU a plot a
drawing, the largest part of the console's steady CPU (``bench/tui_bench.py``). Here the
figure goes straight to the styled lines the widget diffs and writes, in well under a
millisecond at the sizes a terminal gives, so a plot can follow every poll.

Pure: no Textual here (the widget is ``plot_widgets.SeriesPlot``). The picture is a
function of the figure and the size alone: the same data draws the same cells, in any
process.
"""

from __future__ import annotations

import math

from msgspec import Struct
from rich.text import Text

BRAILLE = 0x2800
DOT_BITS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
"""The bit of a braille character's dot, by column (left, right), then row from the top."""
FULL = chr(BRAILLE + 0xFF)


class Series(Struct, frozen=True):
    """One line of the plot."""

    name: str
    points: tuple[tuple[float, float], ...]
    """(x, y) in order of x; a point that is not finite breaks the line."""
    colour: str | None = None
    """A Rich colour (a name or ``#rrggbb``); None: the text's own."""
    marker: str | None = None
    """None: braille dots. A character: the line drawn with it, a cell at a time (how
    series are told apart without colour)."""


class Rule(Struct, frozen=True):
    """A line across (a threshold: ``at`` is a y) or down (a replay's cursor: an x)."""

    at: float
    colour: str | None = None
    label: str | None = None
    """A threshold's value, written on the axis at its row (in its colour)."""


class Figure(Struct, frozen=True):
    title: str
    series: tuple[Series, ...] = ()
    x_range: tuple[float, float] = (0.0, 1.0)
    y_range: tuple[float, float] = (0.0, 1.0)
    x_ticks: tuple[tuple[float, str], ...] = ()
    """(x, label) under the frame: each label centred on its tick, the last one ending
    where the axis ends, a label that would touch the one before it left out."""
    y_ticks: tuple[tuple[float, str], ...] = ()
    across: tuple[Rule, ...] = ()
    down: tuple[Rule, ...] = ()
    sentence: str | None = None
    """Nothing to plot: this sentence under the title, no frame and no axes."""


CHROME_ROWS = 4
"""Rows that are not data: the title, the frame's top and bottom, the time labels."""


def _scale(v: float, lo: float, hi: float, dots: int) -> int:
    """Where ``v`` falls on an axis of ``dots`` dots from ``lo`` to ``hi`` (may be off it)."""
    if hi <= lo:
        return 0
    return round((v - lo) / (hi - lo) * (dots - 1))


def _segment(x0: int, y0: int, x1: int, y1: int) -> list[tuple[int, int]]:
    """The dots from one point to the next (Bresenham), both ends included."""
    out = []
    dx, dy = abs(x1 - x0), -abs(y1 - y0)
    sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
    err = dx + dy
    while True:
        out.append((x0, y0))
        if x0 == x1 and y0 == y1:
            return out
        e2 = 2 * err
        if e2 >= dy:
            err += dy
            x0 += sx
        if e2 <= dx:
            err += dx
            y0 += sy


class _Canvas:
    """Cells of dots, each with the colour of what was drawn in it last."""

    def __init__(self, cols: int, rows: int) -> None:
        self.cols, self.rows = cols, rows
        self.bits = [[0] * cols for _ in range(rows)]
        self.colour: list[list[str | None]] = [[None] * cols for _ in range(rows)]
        self.glyph: list[list[str | None]] = [[None] * cols for _ in range(rows)]

    def dot(self, x: int, y: int, colour: str | None, marker: str | None) -> None:
        """Dot ``x`` from the left, ``y`` from the bottom; off the canvas: nothing."""
        if not (0 <= x < 2 * self.cols and 0 <= y < 4 * self.rows):
            return
        col, row = x // 2, self.rows - 1 - y // 4
        if marker is None:
            self.bits[row][col] |= DOT_BITS[x % 2][3 - y % 4]
            self.glyph[row][col] = None
        else:
            self.glyph[row][col] = marker
        self.colour[row][col] = colour

    def line(self, row: int) -> Text:
        out = Text(no_wrap=True, end="")
        run: list[str] = []
        run_style: str | None = None
        for col in range(self.cols):
            glyph = self.glyph[row][col]
            bits = self.bits[row][col]
            ch = glyph or (chr(BRAILLE + bits) if bits else " ")
            style = self.colour[row][col] if ch != " " else None
            if style != run_style and run:
                out.append("".join(run), style=run_style or "")
                run = []
            run_style = style
            run.append(ch)
        if run:
            out.append("".join(run), style=run_style or "")
        return out


def _legend(series: tuple[Series, ...]) -> list[tuple[str, str | None]]:
    pieces: list[tuple[str, str | None]] = []
    for s in series:
        pieces.append(("  ", None))
        pieces.append((s.marker or FULL, s.colour))
        pieces.append((f" {s.name}", None))
    return pieces


def _title(fig: Figure, width: int) -> Text:
    """The title, then each series' mark and name where they fit (names cut first)."""
    out = Text(fig.title, no_wrap=True, end="")
    legend = _legend(fig.series) if fig.series else []
    room = width - len(fig.title)
    names = [s.name for s in fig.series]
    while legend and sum(len(p) for p, _ in legend) > room:
        longest = max(range(len(names)), key=lambda i: len(names[i]))
        if len(names[longest]) <= 4:
            legend = []
            break
        names[longest] = names[longest][:len(names[longest]) - 2] + "…"
        legend = _legend(tuple(Series(n, (), s.colour, s.marker)
                               for n, s in zip(names, fig.series, strict=True)))
    for piece, colour in legend:
        out.append(piece, style=colour or "")
    out.align("center", width)
    return out


def draw(fig: Figure, width: int, height: int) -> list[Text]:
    """The figure as ``height`` lines of ``width`` cells."""
    if width <= 0 or height <= 0:
        return []
    title = _title(fig, width)
    if fig.sentence is not None or height < CHROME_ROWS + 1:
        said = Text(fig.sentence or "", style="dim", no_wrap=True, end="")
        said.align("center", width)
        blank = Text("", end="")
        body = [blank] * max(0, height - 1)
        if body:
            body[(len(body) - 1) // 2] = said
        return [title, *body][:height]
    labels = [label for _, label in fig.y_ticks] + [r.label for r in fig.across if r.label]
    left = max((len(s) for s in labels), default=0) + 1
    cols, rows = width - left - 2, height - CHROME_ROWS
    if cols < 2:
        return [title] + [Text("", end="")] * (height - 1)
    canvas = _Canvas(cols, rows)
    (x_lo, x_hi), (y_lo, y_hi) = fig.x_range, fig.y_range
    xdots, ydots = 2 * cols, 4 * rows
    for rule in fig.across:
        y = _scale(rule.at, y_lo, y_hi, ydots)
        for x in range(0, xdots, 2):  # every other dot: a rule reads apart from data
            canvas.dot(x, y, rule.colour, None)
    for rule in fig.down:
        x = _scale(rule.at, x_lo, x_hi, xdots)
        for y in range(0, ydots, 2):
            canvas.dot(x, y, rule.colour, None)
    for s in fig.series:
        last: tuple[int, int] | None = None
        for px, py in s.points:
            if not (math.isfinite(px) and math.isfinite(py)):
                last = None
                continue
            here = (_scale(px, x_lo, x_hi, xdots), _scale(py, y_lo, y_hi, ydots))
            for x, y in _segment(*(last or here), *here):
                canvas.dot(x, y, s.colour, s.marker)
            last = here
    tick_rows: dict[int, tuple[str, str | None]] = {}
    for rule in fig.across:  # a threshold's row says its value, whatever tick is there
        y = _scale(rule.at, y_lo, y_hi, ydots)
        if rule.label and 0 <= y < ydots:
            tick_rows.setdefault(rows - 1 - y // 4, (rule.label, rule.colour))
    for v, label in fig.y_ticks:
        y = _scale(v, y_lo, y_hi, ydots)
        if 0 <= y < ydots:
            tick_rows.setdefault(rows - 1 - y // 4, (label, None))
    lines = [title, Text(" " * left + "┌" + "─" * cols + "┐", no_wrap=True, end="")]
    for row in range(rows):
        tick = tick_rows.get(row)
        line = Text(no_wrap=True, end="")
        if tick is None:
            line.append(" " * left + "│")
        else:
            line.append(f"{tick[0]:>{left - 1}}", style=tick[1] or "")
            line.append(" ┤")
        line.append_text(canvas.line(row))
        line.append("│")
        lines.append(line)
    tick_cols = {}
    for v, label in fig.x_ticks:
        c = _scale(v, x_lo, x_hi, xdots) // 2
        if 0 <= c < cols:
            tick_cols[c] = label
    bottom = ["─"] * cols
    for c in tick_cols:
        bottom[c] = "┬"
    lines.append(Text(" " * left + "└" + "".join(bottom) + "┘", no_wrap=True, end=""))
    lines.append(Text(_tick_labels(tick_cols, left + 1, width), no_wrap=True, end=""))
    return lines


def _tick_labels(tick_cols: dict[int, str], offset: int, width: int) -> str:
    """Each label centred under its tick, the last ending at the axis' end (at most the
    right edge), inside the width; one that would touch the label before it is left out."""
    row = [" "] * width
    free = 0  # the first column a label may start at
    ordered = sorted(tick_cols.items())
    for i, (c, label) in enumerate(ordered):
        at = offset + c
        start = at - len(label) + 1 if i == len(ordered) - 1 and i else at - len(label) // 2
        start = max(0, min(start, width - len(label)))
        if start < free or start + len(label) > width:
            continue
        row[start:start + len(label)] = label
        free = start + len(label) + 1
    return "".join(row).rstrip()
