"""Widgets drawn line by line, where a changed line costs only its changed cells.

Textual repaints a refreshed region segment by segment: a write starts at the first
segment that touches the region and runs to the last. A line rendered as one long
segment is therefore rewritten whole for a one-digit change. Here each line remembers
the span that changed last, and its strip is cut at that span's two ends, so the
terminal gets the changed cells (and their style codes) and nothing else. Two cuts, not
one per cell: every segment carries its own colour codes (~35 bytes in truecolor).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from console.model.printable import has_controls, printable


def safe_text(text: Text) -> Text:
    """``text`` with no control character (``printable``), its styles kept: the last
    guard before a line reaches the terminal or the browser, whatever its source forgot."""
    if not has_controls(text.plain):
        return text
    cuts = sorted({x for span in text.spans for x in (span.start, span.end)})
    out = Text(style=text.style, justify=text.justify, overflow=text.overflow,
               no_wrap=text.no_wrap, end=text.end)
    for piece in text.divide(cuts):
        start = len(out)
        out.append(printable(piece.plain))
        for span in piece.spans:  # after the cuts each span covers its piece whole
            out.stylize(span.style, start, len(out))
    return out


def segments(text: Text, console: Console) -> list[Segment]:
    """The line's segments, its own base style included (``Text.render`` leaves the base
    style to whoever renders it as a whole; a line drawn alone must carry it)."""
    if text.style:
        flat = Text(end="")
        flat.append_text(text)
        text = flat
    return list(text.render(console))


def _cells(text: Text, console: Console, width: int) -> list[tuple[str, Style | None]]:
    """(character, style) per terminal cell; a wide character's second cell is ""."""
    out: list[tuple[str, Style | None]] = []
    for seg in segments(text, console):
        if seg.control:
            continue
        style = seg.style or None  # an empty style draws as none: not a change
        for ch in seg.text:
            out.append((ch, style))
            if cell_len(ch) == 2:
                out.append(("", style))
    out.extend([(" ", None)] * (width - len(out)))
    return out


def changed_span(old: Text, new: Text, console: Console, width: int) -> tuple[int, int]:
    """The cells ``[x1, x2)`` in which two lines differ (text or style) within ``width``;
    ``(0, 0)`` when they do not."""
    a, b = _cells(old, console, width), _cells(new, console, width)
    n = max(len(a), len(b))
    a.extend([(" ", None)] * (n - len(a)))
    b.extend([(" ", None)] * (n - len(b)))
    x1 = next((i for i in range(n) if a[i] != b[i]), n)
    if x1 == n:
        return 0, 0
    x2 = next(i for i in range(n, x1, -1) if a[i - 1] != b[i - 1])
    return x1, min(x2, width) if width else x2


MERGE_GAP = 8
"""Two changed runs of a line closer than this many cells are written as one: each
separate write costs a cursor move and its style codes again (~15-40 bytes), more than
a few unchanged cells rewritten between them."""

Spans = tuple[tuple[int, int], ...]
"""The changed runs of one line, ``[x1, x2)`` each, left to right."""


def changed_spans(old: Text, new: Text, console: Console, width: int) -> Spans:
    """The runs of cells in which two lines differ (text or style) within ``width``, runs
    closer than ``MERGE_GAP`` joined; ``()`` when they do not differ. Two numbers that
    moved at either end of a line (GPU 0's power and GPU 1's on the GPU line, a slot's
    TTFT and its KV) are two small writes, not the line between them rewritten."""
    a, b = _cells(old, console, width), _cells(new, console, width)
    n = max(len(a), len(b))
    if width:
        n = min(n, width)
    a.extend([(" ", None)] * (n - len(a)))
    b.extend([(" ", None)] * (n - len(b)))
    runs: list[list[int]] = []
    x = 0
    while x < n:
        if a[x] == b[x]:
            x += 1
            continue
        x1 = x
        while x < n and a[x] != b[x]:
            x += 1
        if runs and x1 - runs[-1][1] < MERGE_GAP:
            runs[-1][1] = x
        else:
            runs.append([x1, x])
    return tuple((r[0], r[1]) for r in runs)


def same(a: Text, b: Text) -> bool:
    return a.plain == b.plain and a.spans == b.spans and a.style == b.style


def cut(strip: Strip, span: tuple[int, int] | Spans | None) -> Strip:
    """``strip`` with segment boundaries at both ends of ``span`` (or of each of several
    spans): same cells, same look."""
    if not span:
        return strip
    ends = [x for sp in span for x in sp] if isinstance(span[0], tuple) else list(span)
    points = sorted({x for x in ends if 0 < x < strip.cell_length})
    if not points:
        return strip
    # divide() takes the end of every piece: the last must be the strip's own end
    return Strip.join(strip.divide([*points, strip.cell_length]))


def strip_of(text: Text, console: Console, width: int) -> Strip:
    if text.cell_len > width:  # a line never wraps: cut, with an ellipsis if it asks
        text = text.copy()
        text.truncate(width, overflow=text.overflow or "crop")
    return Strip(segments(text, console)).adjust_cell_length(width)


class LinesView(Widget):
    """A fixed list of lines (``show``), repainted line by line over what changed.

    Subclasses decide what the lines say; this class decides what reaches the
    terminal. A change in the number of lines re-lays the widget out once."""

    DEFAULT_CSS = "LinesView { height: auto; }"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._rows: list[Text] = []
        self._spans: dict[int, Spans] = {}

    @property
    def text(self) -> str:
        """What the lines say now, as plain text (for tests and the log screen)."""
        return "\n".join(t.plain for t in self._rows)

    def show_lines(self, lines: Sequence[Text]) -> None:
        lines = [safe_text(t) for t in lines]
        if len(lines) != len(self._rows) or not self.is_mounted or not self.size.width:
            self._rows, self._spans = lines, {}
            self.refresh(layout=True)
            # once more after this frame: Textual skips a layout refresh while one is
            # pending, and a layout of the screen in between can have cached the old
            # height (a box shrunk twice before the next frame kept its first height).
            # Not before the widget's first layout: no height of it is cached yet, and
            # on the first frame this was a layout pass of the screen more (~8 ms)
            if self.is_mounted and self.size.width:
                self.call_after_refresh(self.refresh, layout=True)
            return
        width = self.size.width
        for y, (old, new) in enumerate(zip(self._rows, lines, strict=True)):
            if same(old, new):
                continue
            self._rows[y] = new
            spans = changed_spans(old, new, self.app.console, width)
            if spans:
                self._spans[y] = spans
                self.refresh(*(Region(x1, y, x2 - x1, 1) for x1, x2 in spans))

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._rows)

    def on_resize(self) -> None:
        self._spans.clear()
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if not 0 <= y < len(self._rows):
            return Strip.blank(width, self.rich_style)
        strip = strip_of(self._rows[y], self.app.console, width)
        return cut(strip, self._spans.get(y)).apply_style(self.rich_style)


class TableLines(LinesView):
    """A Rich renderable (a table) shown as a fixed number of lines, line-drawn: a table
    whose numbers move each poll costs the cells that moved, not the box."""

    _renderable: Any = None
    _count = 0

    def show_renderable(self, renderable: Any, rows: int) -> None:
        self._renderable, self._count = renderable, rows
        self._draw()

    def _draw(self) -> None:
        width = self.content_size.width if self.is_mounted else 0
        lines: list[Text] = []
        if width and self._renderable is not None:
            console = self.app.console
            for line in console.render_lines(self._renderable,
                                             console.options.update_width(width), pad=False):
                # (a segment without a style: "", which Rich treats as none)
                lines.append(Text.assemble(*((s.text, s.style or "") for s in line
                                             if not s.control and s.text)))
        self.show_lines((lines + [Text()] * self._count)[:self._count])

    def on_resize(self) -> None:
        super().on_resize()
        self._draw()  # the table is laid out for the width: again at the new one
