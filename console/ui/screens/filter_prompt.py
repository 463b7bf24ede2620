"""The one-line slot filter prompt of the main screen (``/``)."""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input


class FilterPrompt(Input):
    """Enter keeps what was typed as the filter; escape clears it. Either way the prompt
    goes and the table has the keys again."""

    DEFAULT_CSS = "FilterPrompt { height: 1; border: none; padding: 0 1; }"
    BINDINGS = [Binding("escape", "clear_filter", "clear the filter", show=False)]

    class Done(Message):
        def __init__(self, prompt: FilterPrompt, value: str) -> None:
            super().__init__()
            self.prompt = prompt
            self.value = value

    def __init__(self, **kw: Any) -> None:  # Input's own keywords (id, classes…)
        super().__init__(placeholder="filter slots by name or model; enter keeps, escape clears",
                         **kw)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Done(self, event.value))

    def action_clear_filter(self) -> None:
        self.value = ""
        self.post_message(self.Done(self, ""))
