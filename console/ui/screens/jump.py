"""The replay's jump dialog (``j`` forward, ``J`` back): a duration or a clock time.

What was typed goes to ``go`` (the app's: it moves the replay); a bad input leaves the
dialog open with ``go``'s answer under the box (what is accepted), so nothing typed is
lost. Enter jumps and closes; escape closes.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

EXAMPLES = "5m · 1h30m · 90s · -10m · 3m ago · 03:10 · 03:10:05 · 2026-11-18T03:10 · start · end"


class JumpScreen(ModalScreen[str | None]):
    """``go(text)`` answers None when it jumped, else why not (shown in the dialog)."""

    DEFAULT_CSS = """
    JumpScreen { align: center middle; }
    JumpScreen > Vertical { width: 64; max-width: 98%; height: auto; border: thick $primary;
                            background: $surface; padding: 0 1; }
    JumpScreen #jerror { color: $error; height: auto; }
    JumpScreen #jhint { color: $text-muted; height: auto; }
    """
    BINDINGS = [Binding("escape", "close", "cancel", show=False)]

    def __init__(self, forward: bool, go: Callable[[str], str | None]) -> None:
        super().__init__()
        self.forward = forward
        self.go = go

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text("Jump " + ("forward" if self.forward else "back")
                             + " by a duration, or to a time", style="bold"))
            yield Input(placeholder="5m, 03:10, 3m ago…", id="jinput")
            yield Static(Text(EXAMPLES), id="jhint")
            yield Static("", id="jerror")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        why = self.go(event.value)
        if why is None:
            self.dismiss(event.value)
            return
        self.query_one("#jerror", Static).update(Text(why))

    def action_close(self) -> None:
        self.dismiss(None)
