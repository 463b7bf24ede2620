"""Alert history: what is active (firing, pending, acknowledged) and what happened.

Opened with ``A``; ``a`` acknowledges from here as from the main screen. Renders the
state it is handed after every poll, like every other screen."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from console.session.view import ConsoleState
from console.ui.screens.base import URGENT_BINDINGS, ConsoleScreen
from console.ui.widgets.header import PodHeader
from console.ui.widgets.keybar import KeyBar
from console.ui.widgets.panels import active_line, history_line


class AlertHistoryScreen(ConsoleScreen):
    BINDINGS = [Binding("escape,backspace,A", "app.pop_screen", "back", id="back"),
                Binding("a", "op('ack')", "acknowledge", id="ack"),
                Binding("question_mark", "app.help", "help", id="help"),
                Binding("q", "app.quit", "quit", id="quit"),
                *URGENT_BINDINGS]

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

    def render_state(self, state: ConsoleState) -> None:
        now = state.now
        self.query_one(PodHeader).show_state(state)
        active = [active_line(a, now) for a in state.alerts] or [Text("✓ none", "green")]
        self.query_one("#aactive", Static).update(Text("\n").join(active))
        events = [history_line(e) for e in reversed(state.alert_history)] or [
            Text("nothing yet", "dim")]
        self.query_one("#aevents", Static).update(Text("\n").join(events))
