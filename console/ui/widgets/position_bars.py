"""Acceptance by draft position: one horizontal bar per slot and position, its percent
beside it, drawn as text.

The bars were a plotext bar chart. Its six or so data rows gave a resolution of ~17 % a
row (82 % and 77 % drew the same), and building it cost ~15 ms of CPU at every poll that
moved a whole percent: a sixth of the console's CPU at a 1 s refresh
(``bench/tui_bench.py``). As text every bar is exact to an eighth of a cell, the number
is printed, and a poll that moves one percent costs the few cells it changes
(``LinesView``), so the bars are drawn from every poll, like the table beside them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text

from console.ui.themes import no_color, theme_of
from console.ui.widgets.lines import LinesView

TITLE = "acceptance by draft position (%)"
EMPTY = "no speculative decoding data"
SLOT_COLORS = ("bright_blue", "bright_green", "bright_red", "bright_cyan", "bright_magenta",
               "yellow", "grey50", "blue")
"""Slot i's colour where a theme names none: the terminal's bright colours (blue+, green+,
red+, …), the ones the series plots beside the bars give their lines too, so a slot reads
the same in all four."""
EIGHTHS = " ▏▎▍▌▋▊▉"
"""A bar's last cell by eighths (the first is empty: a bar that ends on a cell edge)."""
LABEL_MAX = 12
"""Slot names are cut to this many cells: the bar keeps most of a narrow cell."""

Percents = tuple[tuple[str, tuple[int | None, ...]], ...]
"""(slot, whole percent at each position, None where that position has no drafts yet)."""


def percents(per_slot: Mapping[str, Sequence[float | None]]) -> Percents:
    """The slots with any position read, in whole percents (what a bar and its number
    show: a poll that moves a rate by less draws nothing new)."""
    out = []
    for slot, vals in per_slot.items():
        if vals and any(v is not None for v in vals):
            out.append((slot, tuple(None if v is None else round(v * 100) for v in vals)))
    return tuple(out)


def bar(pct: int, cells: int) -> str:
    """``pct`` of ``cells`` cells, to an eighth of a cell."""
    eighths = round(max(0, min(100, pct)) * cells * 8 / 100)
    full, part = divmod(eighths, 8)
    return ("█" * full + (EIGHTHS[part] if part else "")).ljust(cells)


def bar_lines(data: Percents, width: int, rows: int, no_color: bool = False,
              colours: tuple[str, ...] = SLOT_COLORS) -> list[Text]:
    """The widget's lines for a ``width`` × ``rows`` cell: the title, then a row per slot
    and position (the slot named on its first), the bar's track running to 100 %. Rows
    that do not fit give way to one line saying how many were left out."""
    title = Text(TITLE, no_wrap=True)  # as the plots beside it title theirs
    title.align("center", width)
    if not data:
        empty = Text(EMPTY, style="dim", no_wrap=True)
        empty.align("center", width)
        return [title, Text(""), empty]
    name_w = min(LABEL_MAX, max(len(slot) for slot, _ in data))
    pos_w = len(str(max(len(v) for _, v in data) - 1))
    # slot, "#i", the bar, " 100%": the bar takes the rest, at least one cell
    cells = max(1, width - name_w - 1 - (pos_w + 2) - 5)
    body: list[Text] = []
    for i, (slot, vals) in enumerate(data):
        colour = None if no_color else colours[i % len(colours)]
        for pos, pct in enumerate(vals):
            line = Text(no_wrap=True)
            name = slot[:name_w] if pos == 0 else ""
            line.append(f"{name:<{name_w}} ", style="bold" if pos == 0 else "")
            line.append(f"#{pos:<{pos_w}} ", style="dim")
            if pct is None:
                line.append(" " * cells, style="dim")
                line.append("    —")
            else:
                drawn = bar(pct, cells)
                filled = drawn.rstrip(" ")
                line.append(filled, style=colour or "")
                line.append("·" * (cells - len(filled)), style="dim")
                line.append(f" {pct:>3}%")
            body.append(line)
    room = max(1, rows - 1)
    if len(body) > room:
        left = len(body) - (room - 1)
        more = Text(f"… {left} more rows (a taller window shows them)", style="dim",
                    no_wrap=True)
        body = [*body[:room - 1], more]
    return [title, *body]


class PositionBars(LinesView):
    """Acceptance by draft position, a bar per slot and position (the field: ~80 % at
    the first draft falling to ~50 %). Every poll's values are drawn; what changed costs
    its cells."""

    DEFAULT_CSS = "PositionBars { height: 1fr; min-height: 8; padding: 0 1 0 3; }"
    """The left padding puts the labels where the plots beside it start their axes."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._data: Percents = ()
        self._drawn: tuple[Percents, int, int, bool, tuple[str, ...]] | None = None
        """What the lines were built from: a poll that changes none of it builds nothing."""

    def show(self, per_slot: Mapping[str, Sequence[float | None]], now: float = 0.0,
             exact: bool = False) -> None:
        """``now`` and ``exact`` as the series plots take them: the bars draw whatever
        they are given, live or replayed."""
        self._data = percents(per_slot)
        self._draw()

    def _draw(self) -> None:
        width, rows = self.size.width, self.size.height
        if not width or not rows:
            return  # not laid out yet: drawn at its first size (on_resize)
        theme = theme_of(self.app)  # its series colours, the plots' beside it
        key = (self._data, width, rows, not theme.colour or no_color(),
               theme.series or SLOT_COLORS)
        if key == self._drawn:
            return
        self._drawn = key
        self.show_lines(bar_lines(*key))

    def on_resize(self) -> None:
        self._draw()
        super().on_resize()
