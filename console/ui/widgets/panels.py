"""The alerts panel and the action log."""

from __future__ import annotations

from collections import deque
from typing import Any

from rich.console import Console
from rich.text import Text

from console.model import fmt
from console.model.alerts import Alert, AlertEvent, grouped
from console.ui.themes import role_of
from console.ui.widgets.lines import LinesView, safe_text

KIND_STYLE = {"firing": ("FIRED", "warn.strong"), "resolved": ("✓ RESOLVED", "ok"),
              "acknowledged": ("◉ ACK", "info"), "failed": ("✖ FAILED", "crit"),
              "ended": ("■ ENDED", "warn")}
"""A fired event also says its severity (``✖ CRIT FIRED``), in the severity's style."""
KIND_WIDTH = 13
ADVICE_INDENT = 7
"""Advice lines start under the title, past ``✖ CRIT ``."""
UNDER = "  └ "
"""What an alert explained by another (a cooldown's 5xx) starts with, under its parent."""


def active_line(a: Alert, now: float, advice: bool = True) -> Text:
    glyph, word, style = fmt.SEVERITY[a.severity]
    t = Text(no_wrap=True, overflow="ellipsis")
    if a.state == "pending":
        t.append(f"◌ PEND {word} ", "dim")
        t.append(a.title, "dim")
    else:
        t.append(f"{glyph} {word} ", "dim" if a.acked_by else style)
        t.append(a.title, "dim" if a.acked_by else "bold")
    t.append(f"  since {fmt.clock(a.since)} ({fmt.elapsed(a.age(now))})", "dim")
    if a.acked_by:
        t.append(f"  ack {a.acked_by} {fmt.clock(a.acked_at)}", "info")
    if a.resolving(now):
        t.append("  condition gone, clearing", "ok")
    if a.detail and advice:
        t.append(f"  {a.detail}", "dim")
    return safe_text(t)  # titles and details quote servers, agents and the alert book


def under(lines: list[Text]) -> list[Text]:
    """An alert's lines drawn under the alert that explains it (``AlertBook``'s groups)."""
    return [Text(UNDER if i == 0 else " " * len(UNDER), "dim", no_wrap=True,
                 overflow="ellipsis") + line for i, line in enumerate(lines)]


def group_blocks(alerts: list[Alert], now: float, width: int, console: Console
                 ) -> list[list[Text]]:
    """Each alert's block, the alerts a parent explains right under it, indented."""
    blocks = []
    for parent, kids in grouped(alerts):
        blocks.append(alert_block(parent, now, width, console))
        blocks += [under(alert_block(k, now, width - len(UNDER), console)) for k in kids]
    return blocks


def alert_block(a: Alert, now: float, width: int, console: Console) -> list[Text]:
    """An alert as the panel shows it: its line, then its advice (the detail) on lines of
    its own under the title, wrapped at word boundaries, never cut mid-sentence. Where
    the whole alert fits on one line it takes one."""
    one = active_line(a, now)
    if one.cell_len <= width or width <= ADVICE_INDENT + 12:
        return [one]
    indent = " " * ADVICE_INDENT
    head = active_line(a, now, advice=False)
    head.no_wrap, head.overflow = False, "fold"
    parts = [head] if head.cell_len <= width else list(
        head.wrap(console, width - ADVICE_INDENT))
    if a.detail:
        parts += list(Text(a.detail, style="dim").wrap(console, width - ADVICE_INDENT))
    lines = []
    for i, part in enumerate(parts):
        part.rstrip()
        part.no_wrap, part.overflow = True, "ellipsis"
        lines.append(part if i == 0 else Text(indent, no_wrap=True, overflow="ellipsis")
                     + part)
    return lines


def history_line(e: AlertEvent) -> Text:
    word, style = KIND_STYLE[e.kind]
    if e.kind == "firing":  # which severity fired: a CRIT reads as one
        glyph, sev, style = fmt.SEVERITY[e.severity]
        word = f"{glyph} {sev} {word}"
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"{fmt.clock(e.t)} ", "dim")
    t.append(f"{word:<{KIND_WIDTH}}", style)
    t.append(e.title)
    if e.detail:
        t.append(f"  {e.detail}", "dim")
    if e.lasted_s is not None:
        t.append(f"  lasted {fmt.elapsed(e.lasted_s)}", "dim")
    return safe_text(t)


def fit_alerts(blocks: list[list[Text]], room: int) -> tuple[list[Text], int]:
    """Whole alerts, most severe first, in at most ``room`` lines; (lines, how many
    alerts did not fit). Where some do not fit one line is kept to count them."""
    if sum(len(b) for b in blocks) <= room:
        return [line for b in blocks for line in b], 0
    lines: list[Text] = []
    shown = 0
    for b in blocks:
        if len(lines) + len(b) > room - 1:
            break
        lines += b
        shown += 1
    if shown == 0 and blocks and room > 1:  # the worst alert's line at least
        lines, shown = blocks[0][:room - 1], 1
    return lines, len(blocks) - shown


def alert_room(height: int, table_rows: int, strip: bool, plots: bool, prompt: bool
               ) -> int:
    """How many lines the alerts panel may take on the main screen ``height`` rows tall:
    what is left after the header, the GPU strip, the table, the filter prompt, the
    footer, the action log and the plots at their smallest (two rows of 8). The plots
    give way to the alerts, not the other way round."""
    fixed = 1 + (1 if strip else 0) + table_rows + (1 if prompt else 0) + 1
    log = 6 if plots else 5  # its border and 4 lines; on a short screen 3 lines
    return max(1, height - fixed - log - (16 if plots else 0) - 2)


class AlertsPanel(LinesView):
    """The firing alerts, most severe first, each with its advice wrapped under it.

    As tall as its alerts need, up to ``room`` lines (the main screen sets it from its
    size: the alerts get rows before the plots do); what does not fit is counted on the
    last line. Its height changes only when the number of lines does, not when a value
    moves. Drawn line by line: an alert whose value moves from 2.30s to 2.31s costs a few
    cells, not the panel."""

    DEFAULT_CSS = "AlertsPanel { height: auto; border: round $warning; }"
    LINES = 4

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.room = self.LINES
        """The most lines it may take (set by the screen from the terminal's size)."""
        self._alerts: list[Alert] = []
        self._now = 0.0

    def on_mount(self) -> None:
        self.border_title = "alerts"

    def set_room(self, room: int) -> None:
        if room != self.room:
            self.room = max(1, room)
            self._layout()

    def show(self, alerts: list[Alert], now: float) -> None:
        # firing alerts only: a pending one is a condition that may pass; the alert
        # history (A) lists those too. (A figure hovering at its threshold would
        # otherwise repaint this panel every poll.)
        self._alerts = [a for a in alerts if a.state == "firing"]
        self._now = now
        self._layout()

    def _layout(self) -> None:
        alerts, now = self._alerts, self._now
        if not alerts:
            lines = [Text("✓ no alerts firing", style="ok")]
            title = "alerts (0)"
        else:
            width = (self.content_size.width if self.is_mounted and self.content_size.width
                     else 76)
            blocks = group_blocks(alerts, now, width, self.app.console)
            lines, hidden = fit_alerts(blocks, self.room)
            if hidden:
                lines.append(Text(f"… and {hidden} more: A lists every alert", "bold"))
            # a group is one alert: what its parent explains is not counted again
            tops = [a for a, _ in grouped(alerts)]
            firing = sum(1 for a in tops if not a.acked_by)
            acked = len(tops) - firing
            title = f"alerts ({firing} firing{f', {acked} acknowledged' if acked else ''})"
        self.show_lines(lines)
        if title != self.border_title:  # a new title repaints the border
            self.border_title = title

    def on_resize(self) -> None:
        super().on_resize()
        self._layout()  # advice wraps at the new width


class ActionLog(LinesView):
    """The newest lines that fit, a long one wrapped onto the rows under it (indented
    under its time), newest last; bounded for a wall display
    that runs for weeks. Line-drawn rather than a RichLog: this panel is in the first
    frame, and RichLog costs ~15 ms of imports there. The whole history is in the log
    screen (L) and the audit log."""

    DEFAULT_CSS = "ActionLog { height: 6; border: round $primary; }"
    KEEP = 200

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.lines: deque[Text] = deque(maxlen=self.KEEP)

    def on_mount(self) -> None:
        self.border_title = "action log"

    def on_resize(self) -> None:
        super().on_resize()
        self._show()

    def add(self, t: float, text: str, style: str = "", replace: bool = False) -> None:
        """A new line; ``replace``: in place of the last one (only its changed cells are
        repainted)."""
        line = Text(f"{fmt.clock(t)} ", style="dim", no_wrap=True, overflow="ellipsis")
        line.append(text, role_of(style))
        if replace and self.lines:
            self.lines.pop()
        self.lines.append(line)
        self._show()

    def _show(self) -> None:
        # before its first layout (no height yet), the lines its height of 6 holds: a
        # count that changes at the first layout costs the screen a layout pass more
        rows = max(1, self.content_size.height) if self.content_size.height else 4
        width = self.content_size.width
        shown: list[Text] = []
        for line in reversed(self.lines):  # newest first, until the panel is full
            shown[:0] = self._wrapped(line, width)
            if len(shown) >= rows:
                break
        shown = shown[-rows:]
        self.show_lines(shown + [Text()] * (rows - len(shown)))

    INDENT = 9
    """A continuation row starts under the line's text, past ``HH:MM:SS ``."""

    def _wrapped(self, line: Text, width: int) -> list[Text]:
        """``line`` as the rows it takes at ``width`` (all of it: the log is read, not
        cut), continuation rows indented under the time."""
        if width <= self.INDENT + 10 or line.cell_len <= width:
            return [line]
        whole = line.copy()
        whole.no_wrap, whole.overflow = False, "fold"
        head = whole.wrap(self.app.console, width)[0]  # at a word's end where one is
        rest = line[len(head.plain):]
        while rest.plain.startswith(" "):
            rest = rest[1:]
        rest.no_wrap, rest.overflow = False, "fold"
        body = rest.wrap(self.app.console, width - self.INDENT)
        return [head, *(Text(" " * self.INDENT, no_wrap=True) + part for part in body)]
