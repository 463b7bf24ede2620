"""The alerts panel and the action log."""

from __future__ import annotations

from collections import deque
from typing import Any

from rich.text import Text

from console.model import fmt
from console.model.alerts import Alert, AlertEvent
from console.ui.widgets.lines import LinesView, safe_text

KIND_STYLE = {"firing": ("▲ FIRED", "bold yellow"), "resolved": ("✓ RESOLVED", "green"),
              "acknowledged": ("◉ ACK", "cyan"), "failed": ("✖ FAILED", "bold red")}


def active_line(a: Alert, now: float) -> Text:
    glyph, word, style = fmt.SEVERITY[a.severity]
    t = Text(no_wrap=True, overflow="ellipsis")
    if a.state == "pending":
        t.append(f"◌ PEND {word} ", "dim")
        t.append(a.title, "dim")
    else:
        t.append(f"{glyph} {word} ", "dim" if a.acked_by else style)
        t.append(a.title, "dim" if a.acked_by else "bold")
    t.append(f"  since {fmt.clock(a.since)} ({fmt.duration(now - a.since, False)})", "dim")
    if a.acked_by:
        t.append(f"  ack {a.acked_by} {fmt.clock(a.acked_at)}", "cyan")
    if a.resolving(now):
        t.append("  condition gone, clearing", "green")
    if a.detail:
        t.append(f"  {a.detail}", "dim")
    return safe_text(t)  # titles and details quote servers, agents and the alert book


def history_line(e: AlertEvent) -> Text:
    word, style = KIND_STYLE[e.kind]
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"{fmt.clock(e.t)} ", "dim")
    t.append(f"{word:<11}", style)
    t.append(e.title)
    if e.detail:
        t.append(f"  {e.detail}", "dim")
    return safe_text(t)


class AlertsPanel(LinesView):
    """The firing alerts, most severe first, in a panel of fixed height.

    Fixed, not ``auto``: an alert raised or cleared would otherwise resize the plots
    below it, and a resized plot is redrawn whole (tens of KB of terminal output each
    time an alert flips). What does not fit is counted on the last line. Drawn line by
    line: an alert whose value moves from 2.30s to 2.31s costs a few cells, not the panel."""

    DEFAULT_CSS = "AlertsPanel { height: 6; border: round $warning; }"
    LINES = 4

    def on_mount(self) -> None:
        self.border_title = "alerts"

    def _room(self) -> int:
        return max(1, self.content_size.height if self.is_mounted and self.content_size.height
                   else self.LINES)

    def show(self, alerts: list[Alert], now: float) -> None:
        # firing alerts only: a pending one is a condition that may pass; the alert
        # history (A) lists those too. (A figure hovering at its threshold would
        # otherwise repaint this panel every poll.)
        alerts = [a for a in alerts if a.state == "firing"]
        room = self._room()
        if not alerts:
            lines = [Text("✓ no alerts firing", style="green")]
            title = "alerts (0)"
        else:
            firing = sum(1 for a in alerts if not a.acked_by)
            shown = alerts if len(alerts) <= room else alerts[:room - 1]
            lines = [active_line(a, now) for a in shown]
            if len(shown) < len(alerts):
                lines.append(Text(f"… and {len(alerts) - len(shown)} more", "bold"))
            acked = len(alerts) - firing
            title = f"alerts ({firing} firing{f', {acked} acknowledged' if acked else ''})"
        self.show_lines(lines + [Text()] * (room - len(lines)))
        if title != self.border_title:  # a new title repaints the border
            self.border_title = title

    def on_resize(self) -> None:
        super().on_resize()
        if self._rows and len(self._rows) != self._room():
            self.show_lines(self._rows[:self._room()]
                            + [Text()] * (self._room() - len(self._rows)))


class ActionLog(LinesView):
    """The newest lines that fit, one line each, newest last; bounded for a wall display
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

    def add(self, t: float, text: str, style: str = "") -> None:
        line = Text(f"{fmt.clock(t)} ", style="dim", no_wrap=True, overflow="ellipsis")
        line.append(text, style)
        self.lines.append(line)
        self._show()

    def _show(self) -> None:
        rows = max(1, self.content_size.height) if self.is_mounted else 4
        shown = list(self.lines)[-rows:]
        self.show_lines(shown + [Text()] * (rows - len(shown)))
