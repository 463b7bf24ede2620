"""The alerts panel and the action log."""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.widgets import Static

from .. import fmt
from ..alerts import Alert


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
        if not alerts:
            self._set(Text("✓ no alerts", style="green"), "alerts (0)")
            return
        t = Text()
        room = max(1, self.content_size.height if self.is_mounted and self.content_size.height
                   else self.LINES)
        shown = alerts if len(alerts) <= room else alerts[:room - 1]
        for i, a in enumerate(shown):
            glyph, word, style = fmt.SEVERITY[a.severity]
            if i:
                t.append("\n")
            t.append(f"{glyph} {word} ", style)
            t.append(a.title, "bold")
            t.append(f"  since {fmt.clock(a.since)} ({fmt.duration(now - a.since, False)})",
                     "dim")
            if a.detail:
                t.append(f"  {a.detail}", "dim")
        if len(shown) < len(alerts):
            t.append(f"\n… and {len(alerts) - len(shown)} more", "bold")
        t.no_wrap, t.overflow = True, "ellipsis"
        self._set(t, f"alerts ({len(alerts)})")

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
