"""The alerts panel and the action log."""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.widgets import Static

from .. import fmt
from ..alerts import Alert, AlertEvent

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
    return t


def history_line(e: AlertEvent) -> Text:
    word, style = KIND_STYLE[e.kind]
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"{fmt.clock(e.t)} ", "dim")
    t.append(f"{word:<11}", style)
    t.append(e.title)
    if e.detail:
        t.append(f"  {e.detail}", "dim")
    return t


class AlertsPanel(Static):
    """The active alerts, most severe first, in a panel of fixed height.

    Fixed, not ``auto``: an alert raised or cleared would otherwise resize the plots
    below it, and a resized plot is redrawn whole (tens of KB of terminal output each
    time an alert flips). What does not fit is counted on the last line."""

    DEFAULT_CSS = "AlertsPanel { height: 6; border: round $warning; }"
    LINES = 4

    def on_mount(self) -> None:
        self.border_title = "alerts"

    def show(self, alerts: list[Alert], now: float) -> None:
        # firing alerts only: a pending one is a condition that may pass; the alert
        # history (A) lists those too. (A figure hovering at its threshold would
        # otherwise repaint this panel every poll.)
        alerts = [a for a in alerts if a.state == "firing"]
        if not alerts:
            self._set(Text("✓ no alerts firing", style="green"), "alerts (0)")
            return
        firing = sum(1 for a in alerts if not a.acked_by)
        t = Text()
        room = max(1, self.content_size.height if self.is_mounted and self.content_size.height
                   else self.LINES)
        shown = alerts if len(alerts) <= room else alerts[:room - 1]
        for i, a in enumerate(shown):
            if i:
                t.append("\n")
            t.append_text(active_line(a, now))
        if len(shown) < len(alerts):
            t.append(f"\n… and {len(alerts) - len(shown)} more", "bold")
        t.no_wrap, t.overflow = True, "ellipsis"
        acked = len(alerts) - firing
        self._set(t, f"alerts ({firing} firing{f', {acked} acknowledged' if acked else ''})")

    def _set(self, t: Text, title: str) -> None:
        if (t, title) != getattr(self, "_last", None):
            self._last = (t, title)
            self.update(t)
            self.border_title = title


class ActionLog(Static):
    """The newest lines that fit, one line each, newest last; bounded for a wall display
    that runs for weeks. A Static rather than a RichLog: this panel is in the first frame,
    and RichLog costs ~15 ms of imports there. The whole history is in the audit log."""

    DEFAULT_CSS = "ActionLog { height: 6; border: round $primary; }"
    KEEP = 200

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.lines: deque[Text] = deque(maxlen=self.KEEP)

    def on_mount(self) -> None:
        self.border_title = "action log"

    def on_resize(self) -> None:
        self._show()

    def add(self, t: float, text: str, style: str = "") -> None:
        line = Text(f"{fmt.clock(t)} ", style="dim", no_wrap=True, overflow="ellipsis")
        line.append(text, style)
        self.lines.append(line)
        self._show()

    def _show(self) -> None:
        rows = max(1, self.content_size.height) if self.is_mounted else 4
        self.update(Text("\n", no_wrap=True, overflow="ellipsis").join(list(self.lines)[-rows:]))
