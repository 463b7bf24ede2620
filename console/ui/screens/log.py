"""The action log, full screen: every line the console has written (the last 500), newest
last, scrollable, and filtered as you type after ``/``. Opened with ``L``."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Input, RichLog

from console.model import fmt
from console.model.printable import printable
from console.session.view import ConsoleState
from console.ui.screens.base import URGENT_BINDINGS, ConsoleScreen
from console.ui.themes import role_of
from console.ui.widgets.header import PodHeader
from console.ui.widgets.keybar import KeyBar


def log_text(t: float, text: str, style: str) -> Text:
    line = Text(f"{fmt.clock(t)} ", style="dim")
    # appended as plain text: a server's words are never markup, nor control characters
    line.append(printable(text), role_of(style))
    return line


class LogScreen(ConsoleScreen):
    DEFAULT_CSS = """
    #llog { height: 1fr; border: round $primary; }
    """
    BINDINGS = [Binding("escape", "back", "back", id="back"),
                Binding("slash", "search", "search", id="search"),
                Binding("question_mark", "app.help", "help", id="help"),
                Binding("q", "app.quit", "quit", id="quit"),
                *URGENT_BINDINGS]

    def __init__(self, state: ConsoleState, lines: tuple[tuple[float, str, str], ...]) -> None:
        super().__init__(state)
        self.lines = list(lines)
        self.query_text = ""
        self._drawn = False
        """on_mount has written the lines: a line noted before then waits in ``lines``
        (a poll's line can land between the push and the mount)."""

    def compose(self) -> ComposeResult:
        view = self.state.view
        yield PodHeader(view.title, view.demo, view.read_only)
        yield Input(placeholder="/ filters the log (case-insensitive); escape clears",
                    id="lsearch")
        yield RichLog(max_lines=1000, wrap=False, id="llog")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#llog", RichLog).border_title = "action log"
        self.query_one("#lsearch", Input).display = False
        self._rewrite()
        self._drawn = True  # from here a new line is written as it comes
        self.query_one("#llog", RichLog).focus()
        self.render_state(self.state)

    def render_state(self, state: ConsoleState) -> None:
        self.query_one(PodHeader).show_state(state)

    def _matches(self, text: str) -> bool:
        return not self.query_text or self.query_text.lower() in text.lower()

    def _rewrite(self) -> None:
        log = self.query_one("#llog", RichLog)
        log.clear()
        shown = [line for line in self.lines if self._matches(line[1])]
        for t, text, style in shown:
            log.write(log_text(t, text, style))
        log.border_subtitle = (f"{len(shown)} of {len(self.lines)} lines matching "
                               f"“{self.query_text}”" if self.query_text else
                               f"{len(self.lines)} lines")

    def log_line(self, t: float, text: str, style: str = "", replace: bool = False) -> None:
        if replace and self.lines:
            self.lines[-1] = (t, text, style)
        else:
            self.lines.append((t, text, style))
            del self.lines[:-500]
        if not self._drawn or not self.query("#llog"):
            # pushed, not drawn yet (on_mount writes every line), or closing (the console
            # quits: Textual removes the widgets before the screen): it waits in ``lines``
            return
        if replace:
            self._rewrite()
        elif self._matches(text):
            self.query_one("#llog", RichLog).write(log_text(t, text, style))

    def action_search(self) -> None:
        box = self.query_one("#lsearch", Input)
        box.display = True
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value.strip()
        self._rewrite()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one("#llog", RichLog).focus()

    def action_back(self) -> None:
        box = self.query_one("#lsearch", Input)
        if box.display and (box.value or box.has_focus):
            box.value = ""
            box.display = False
            self.query_one("#llog", RichLog).focus()
            return
        self.app.pop_screen()
