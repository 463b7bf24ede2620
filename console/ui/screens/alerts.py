"""Alert history: what is active (firing, pending, acknowledged) and what happened.

Opened with ``A``; ``a`` acknowledges every firing alert from here as from the main
screen, enter the alert under the cursor alone (on a group's parent: the group, the
alerts it explains under it). Renders the state it is handed after every poll, like
every other screen."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from console.model.alerts import Alert, grouped
from console.session.view import ConsoleState
from console.ui.screens.base import URGENT_BINDINGS, ConsoleScreen
from console.ui.widgets.header import PodHeader
from console.ui.widgets.keybar import KeyBar
from console.ui.widgets.panels import UNDER, active_line, history_line


class AlertHistoryScreen(ConsoleScreen):
    DEFAULT_CSS = """
    #ahist { height: 1fr; }
    #aactive { height: auto; border: round $warning; padding: 0 1; }
    #aevents { height: auto; border: round $primary; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,backspace,A", "app.pop_screen", "back", id="back"),
                Binding("up,k", "cursor(-1)", "up", show=False),
                Binding("down,j", "cursor(1)", "down", show=False),
                Binding("enter", "ack_row", "ack this one", id="ack_row"),
                Binding("a", "op('ack')", "acknowledge all", id="ack"),
                Binding("question_mark", "app.help", "help", id="help"),
                Binding("q", "app.quit", "quit", id="quit"),
                *URGENT_BINDINGS]

    def __init__(self, state: ConsoleState) -> None:
        super().__init__(state)
        self.cursor = 0
        self._at: str | None = None
        """The key of the alert under the cursor: it stays on it when others come and go."""

    def compose(self) -> ComposeResult:
        view = self.state.view
        yield PodHeader(view.title, view.demo, view.read_only)
        with VerticalScroll(id="ahist"):
            yield Static(id="aactive")
            yield Static(id="aevents")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#aactive", Static).border_title = "active"
        self.query_one("#aevents", Static).border_title = "history (newest first)"
        self.render_state(self.state)

    def rows(self) -> list[tuple[Alert, bool]]:
        """The active alerts in the order drawn, each with whether it is under a parent."""
        return [row for parent, kids in grouped(self.state.alerts)
                for row in [(parent, False), *((k, True) for k in kids)]]

    def selected(self) -> Alert | None:
        rows = self.rows()
        return rows[min(self.cursor, len(rows) - 1)][0] if rows else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "ack_row":
            return "ack" in self.state.allowed
        return super().check_action(action, parameters)

    def action_cursor(self, delta: int) -> None:
        n = len(self.rows())
        if n:
            self.cursor = max(0, min(n - 1, self.cursor + delta))
            a = self.selected()
            self._at = a.key if a is not None else None
            self.render_state(self.state)

    def action_ack_row(self) -> None:
        a = self.selected()
        if a is None or a.state != "firing":
            self.app.bell()  # a pending alert is not acknowledged: nothing has fired yet
            return
        self.post_message(self.Operation("ack", {"alert": a.key}))

    def render_state(self, state: ConsoleState) -> None:
        self.state = state
        now = state.now
        self.query_one(PodHeader).show_state(state)
        rows = self.rows()
        keys = [a.key for a, _ in rows]
        if self._at in keys:  # the same alert, wherever it moved to
            self.cursor = keys.index(self._at)
        self.cursor = max(0, min(self.cursor, len(rows) - 1))
        self._at = keys[self.cursor] if keys else None
        lines = []
        for i, (a, under) in enumerate(rows):
            line = active_line(a, now)
            if under:
                line = Text(UNDER, "dim", no_wrap=True, overflow="ellipsis") + line
            if i == self.cursor:
                line.stylize("reverse")
            lines.append(line)
        self.query_one("#aactive", Static).update(
            Text("\n").join(lines) if lines else Text("✓ none", "ok"))
        events = [history_line(e) for e in reversed(state.alert_history)] or [
            Text("nothing yet", "dim")]
        self.query_one("#aevents", Static).update(Text("\n").join(events))
