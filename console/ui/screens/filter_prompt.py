"""The one-line slot filter prompt of the main screen (``/``)."""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input

HINT = "filter slots by name or model, as you type · enter keeps it · escape clears it"


class FilterPrompt(Input):
    """The table follows what is typed, at each key; enter keeps it as the filter,
    escape clears it. Either way the prompt goes and the table has the keys again.

    One row, no border, focused or not: Input's own focused style (a tall border) is
    more specific than a plain type rule, and on a one-row input it left the borders
    and no row for the text."""

    DEFAULT_CSS = """
    FilterPrompt, FilterPrompt:focus { height: 1; border: none; padding: 0 1;
                                       background: $boost; }
    """
    BINDINGS = [Binding("escape", "clear_filter", "clear the filter", show=False)]

    class Typed(Message):
        """What is typed now (the table filters on it at once)."""

        def __init__(self, value: str) -> None:
            super().__init__()
            self.value = value

    class Done(Message):
        def __init__(self, prompt: FilterPrompt, value: str) -> None:
            super().__init__()
            self.prompt = prompt
            self.value = value

    def __init__(self, **kw: Any) -> None:  # Input's own keywords (id, classes…)
        super().__init__(placeholder=HINT, **kw)

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.Typed(event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Done(self, event.value))

    def action_clear_filter(self) -> None:
        self.value = ""
        self.post_message(self.Done(self, ""))
