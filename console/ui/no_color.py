"""NO_COLOR: the worst states stay the most visible.

Textual honours ``NO_COLOR`` by turning every colour into its grey (``Monochrome``) or into
the terminal's default (``NoColor``). Red has a low luminance, so what the console paints
red — a ``✖ DOWN`` slot, a ``✖ CRIT`` alert, an ``ALERT`` log line, a GPU's ``ECC`` — came
out as the darkest grey on a dark grey: the worst states were the faintest text.

:class:`Emphasis` runs just before that filter and turns colour into emphasis the
terminal keeps without colour: text painted in the alarm colour (red, on the text or
behind it) becomes bold and reverse video (light cell, dark text), text in the warning
colour (yellow/orange) bold. Box-drawing and plot glyphs (no letter or digit) are left as
they are: a red border is a frame, not a state. Without ``NO_COLOR`` nothing changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from rich.color import Color as RichColor
from rich.segment import Segment
from rich.style import Style
from textual.app import App
from textual.color import Color
from textual.filter import LineFilter, Monochrome, NoColor

ALARM = Style(bold=True, reverse=True)
WARNING = Style(bold=True)


def _hue_class(c: RichColor | None) -> str:
    """'alarm' for a red, 'warning' for a yellow or orange, '' for anything else (greys,
    blues, greens, pale or very dark tints)."""
    if c is None or c.is_default:
        return ""
    h, s, lightness = Color.from_rich_color(c).hsl
    if s < 0.35 or not 0.2 <= lightness <= 0.8:
        return ""
    if h >= 0.92 or h <= 0.03:
        return "alarm"
    if 0.05 <= h <= 0.19:
        return "warning"
    return ""


@lru_cache(1024)
def emphasised(style: Style) -> Style:
    """The style a cell gets without colour (see the module)."""
    kinds = {_hue_class(style.color), _hue_class(style.bgcolor)}
    if "alarm" in kinds:
        # reverse of the cell's own text on its own background, after the colours are
        # greyed: the light text colour becomes the cell, the dark background the text
        dark = "rgb(24,24,24)" if _hue_class(style.bgcolor) == "alarm" else None
        return style + Style(color="rgb(235,235,235)", bgcolor=dark) + ALARM
    if "warning" in kinds:
        return style + WARNING
    return style


def _has_words(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


class Emphasis(LineFilter):
    """Colour to emphasis, for a terminal without colour (see the module)."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [Segment(text, emphasised(style), control)
                if style is not None and not control and _has_words(text)
                else Segment(text, style, control)
                for text, style, control in segments]


def with_emphasis(filters: Sequence[LineFilter]) -> list[LineFilter]:
    """An app's line filters with :class:`Emphasis` before its no-colour filter (none:
    the list unchanged)."""
    out: list[LineFilter] = []
    for f in filters:
        if isinstance(f, Monochrome | NoColor):
            out.append(_EMPHASIS)
        out.append(f)
    return out


_EMPHASIS = Emphasis()


class NoColorEmphasis(App[Any]):
    """An app (the console's, the screen tests' host) whose line filters have
    :class:`Emphasis` before the no-colour one."""

    _emphasis_cache: tuple[tuple[LineFilter, ...], list[LineFilter]] | None = None

    def get_line_filters(self) -> Sequence[LineFilter]:
        base = tuple(super().get_line_filters())
        cached = self._emphasis_cache
        if cached is None or cached[0] != base:
            cached = self._emphasis_cache = (base, with_emphasis(base))
        return cached[1]
