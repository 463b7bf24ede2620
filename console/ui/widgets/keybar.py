"""The key bar at the bottom of every screen: the keys that work here, on one line.

One widget draws the whole line. Textual's ``Footer`` mounts a widget per key (about
fifteen on the main screen) and composes them again whenever the bindings change; on
the first frame their styles alone cost ~55 ms, a fifth of the console's start
(``bench/tui_bench.py``, first number). Here a change of bindings repaints one line.

What the line says follows the screen's ``active_bindings``, as the footer's does: a
binding with ``show`` set, once per action (the first key of it), dimmed where its
``check_action`` answers None, left out where it answers False; the command palette's
key sits at the right edge, so a narrow terminal cuts the other keys, never it. The
screen may name actions to put right after help and quit (``urgent_actions``: ``w``
while a stop is near, at any width) and actions not to offer (``unoffered_actions``).
A click on a key presses it (a dimmed one rings the bell).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from msgspec import Struct
from rich.text import Text
from textual import events
from textual.binding import ActiveBinding, Binding
from textual.widget import Widget

PALETTE_EDGE = "▏"
"""Between the keys and the palette's key (the footer's left border there)."""


class KeySpan(Struct, frozen=True):
    """Where one key is drawn on the line (cells ``start`` to ``end``)."""

    start: int
    end: int
    key: str
    enabled: bool
    tooltip: str


Entry = tuple[str, str, str, bool, str]
"""A key as drawn: (key, the key as shown, description, enabled, tooltip)."""


URGENT_AFTER = frozenset({"app.help", "app.quit"})
"""Urgent keys come right after these (help and quit, which never go; ``esc back``
before them on a screen that has it)."""


def entries(bindings: Mapping[str, ActiveBinding], palette_key: str | None,
            key_display: Callable[[Binding], str],
            urgent: frozenset[str] = frozenset(), unoffered: frozenset[str] = frozenset()
            ) -> tuple[list[Entry], Entry | None]:
    """The keys left to right, and the palette's key (None: not bound here). ``urgent``:
    actions drawn right after help and quit, shown or not (``w`` while a stop is near),
    so that no width cuts them. ``unoffered``: actions left out (``r`` on a running
    pod: the key answers, the bar does not offer it)."""
    seen: set[str] = set()
    keys: list[Entry] = []
    first: list[Entry] = []
    after = 0
    palette: Entry | None = None
    for key, (_node, binding, enabled, tooltip) in bindings.items():
        if palette_key is not None and key == palette_key:
            palette = (binding.key, key_display(binding), binding.description, enabled,
                       tooltip or binding.tooltip or binding.description)
            continue
        hurry = binding.action in urgent and enabled
        if not (binding.show or hurry) or binding.action in seen \
                or binding.action in unoffered:
            continue
        seen.add(binding.action)
        if hurry:  # a hidden binding's long description: its first words on the bar
            first.append((binding.key, key_display(binding),
                          binding.description.split(":")[0], enabled,
                          tooltip or binding.tooltip or binding.description))
        else:
            if binding.action in URGENT_AFTER:
                after = len(keys) + 1
            keys.append((binding.key, key_display(binding), binding.description, enabled,
                         tooltip or binding.tooltip))
    return keys[:after] + first + keys[after:], palette


class KeyBar(Widget, can_focus=False):
    """The screen's keys: `` ? help  q quit  r resume … ▏^p palette``."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"keybar--key", "keybar--description", "keybar--edge",
                         "keybar--hover"}
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        & > .keybar--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        & > .keybar--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        & > .keybar--edge { color: $foreground 20%; }
        & > .keybar--hover { background: $block-hover-background; }
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.spans: tuple[KeySpan, ...] = ()
        """The keys as last drawn (a click or the pointer finds its key here)."""
        self._hover: int | None = None

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, _screen: object) -> None:
        self.refresh()

    def render(self) -> Text:
        app = self.app
        palette_key = app.COMMAND_PALETTE_BINDING if app.ENABLE_COMMAND_PALETTE else None
        keys, palette = entries(self.screen.active_bindings, palette_key,
                                app.get_key_display,
                                getattr(self.screen, "urgent_actions", frozenset()),
                                getattr(self.screen, "unoffered_actions", frozenset()))
        key_style = self.get_component_rich_style("keybar--key")
        desc_style = self.get_component_rich_style("keybar--description")

        def cell(key_text: str, description: str, enabled: bool) -> Text:
            out = Text.assemble((key_text, key_style), (description, desc_style))
            if not enabled:
                out.stylize("dim")
            return out

        right = Text()
        if palette is not None:
            right = cell(palette[1], f" {palette[2]} ", palette[3])
        room = max(0, self.size.width - len(PALETTE_EDGE) - right.cell_len) \
            if palette is not None else self.size.width
        line = Text(no_wrap=True, overflow="crop")
        spans: list[KeySpan] = []
        for key, shown, description, enabled, tooltip in keys:
            drawn = cell(f" {shown} ", f"{description} " if description else "", enabled)
            if line.cell_len + drawn.cell_len > room:
                break  # cut from the right: the first keys (help, quit) always stay
            spans.append(KeySpan(line.cell_len, line.cell_len + drawn.cell_len, key, enabled,
                                 tooltip))
            line.append_text(drawn)
        line.pad_right(room - line.cell_len)
        if palette is not None:
            line.append(PALETTE_EDGE, self.get_component_rich_style("keybar--edge"))
            spans.append(KeySpan(line.cell_len, line.cell_len + right.cell_len - 1,
                                 palette[0], palette[3], palette[4]))
            line.append_text(right)
        if self._hover is not None and self._hover < len(spans):
            h = spans[self._hover]
            line.stylize(self.get_component_rich_style("keybar--hover"), h.start, h.end)
        self.spans = tuple(spans)
        return line

    def _span_at(self, x: int) -> int | None:
        for i, s in enumerate(self.spans):
            if s.start <= x < s.end:
                return i
        return None

    def on_mouse_move(self, event: events.MouseMove) -> None:
        at = self._span_at(event.x)
        if at != self._hover:
            self._hover = at
            self.tooltip = (self.spans[at].tooltip or None) if at is not None else None
            self.refresh()

    def on_leave(self, _event: events.Leave) -> None:
        if self._hover is not None:
            self._hover = None
            self.tooltip = None
            self.refresh()

    def on_mouse_down(self, event: events.MouseDown) -> None:
        at = self._span_at(event.x)
        if at is None:
            return
        span = self.spans[at]
        if span.enabled:
            self.app.simulate_key(span.key)
        else:
            self.app.bell()
