"""The alerts panel and the action log."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import RichLog, Static

from .. import fmt
from ..alerts import Alert


class AlertsPanel(Static):
    DEFAULT_CSS = "AlertsPanel { height: auto; min-height: 3; border: round $warning; }"

    def on_mount(self) -> None:
        self.border_title = "alerts"

    def show(self, alerts: list[Alert], now: float) -> None:
        if not alerts:
            self._set(Text("✓ no alerts", style="green"), "alerts (0)")
            return
        t = Text()
        for i, a in enumerate(alerts):
            glyph, word, style = fmt.SEVERITY[a.severity]
            if i:
                t.append("\n")
            t.append(f"{glyph} {word} ", style)
            t.append(a.title, "bold")
            t.append(f"  since {fmt.clock(a.since)} ({fmt.duration(now - a.since, False)})",
                     "dim")
            if a.detail:
                t.append(f"  {a.detail}", "dim")
        self._set(t, f"alerts ({len(alerts)})")

    def _set(self, t: Text, title: str) -> None:
        if (t, title) != getattr(self, "_last", None):
            self._last = (t, title)
            self.update(t)
            self.border_title = title


class ActionLog(RichLog):
    """Bounded: a wall display runs for weeks."""

    DEFAULT_CSS = "ActionLog { height: 6; border: round $primary; }"

    def __init__(self, **kw) -> None:
        super().__init__(max_lines=500, wrap=True, markup=False, **kw)

    def on_mount(self) -> None:
        self.border_title = "action log"

    def add(self, t: float, text: str, style: str = "") -> None:
        line = Text(f"{fmt.clock(t)} ", style="dim")
        line.append(text, style)
        self.write(line)
