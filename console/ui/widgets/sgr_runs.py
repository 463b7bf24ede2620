"""A line's styles sent as changes, not in full for every piece.

Textual writes each styled piece of a line as its whole style, then a reset:
``ESC[1;38;2;230;230;230;48;2;24;24;24m 17.6% ESC[0m``. In a table row or a plot every
piece carries the same background and most the same foreground, so about three bytes in
four the console sent to the terminal were those codes (a 60 s capture of the demo at a
2 s refresh: 36.7 of 49.5 KB). ``render_strip`` sends the same cells with the same
looks, starting from the terminal's default style: before a piece, only what differs
from the piece before it (a new colour, an attribute switched on; a reset and the whole
style when an attribute goes off), and one reset at the line's end so that nothing
written after it inherits a colour.

Only public Rich API is read (a style's colours and attributes); the colour system is
the console's, as Textual's own writes use it.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import NamedTuple

from rich.color import ColorSystem
from rich.segment import Segment
from rich.style import Style

ATTRIBUTES = (("bold", "1"), ("dim", "2"), ("italic", "3"), ("underline", "4"),
              ("blink", "5"), ("blink2", "6"), ("reverse", "7"), ("conceal", "8"),
              ("strike", "9"), ("underline2", "21"), ("frame", "51"), ("encircle", "52"),
              ("overline", "53"))
"""Rich's attributes and their SGR codes, in the order Rich writes them."""

SYSTEMS = {"standard": ColorSystem.STANDARD, "256": ColorSystem.EIGHT_BIT,
           "truecolor": ColorSystem.TRUECOLOR, "windows": ColorSystem.WINDOWS}
"""``Console.color_system``'s names; none (a console that found no colour) is written
in truecolor, as Textual's writes are."""

RESET = "\x1b[0m"


class Look(NamedTuple):
    """What a style sets on the terminal: its attributes' codes, its colours' codes."""

    attributes: tuple[str, ...]
    fg: tuple[str, ...]
    bg: tuple[str, ...]

    def codes(self) -> list[str]:
        return [*self.attributes, *self.fg, *self.bg]


PLAIN = Look((), (), ())


@lru_cache(maxsize=4096)
def look(style: Style, system: ColorSystem) -> Look:
    attributes = tuple(code for name, code in ATTRIBUTES if getattr(style, name))
    fg = () if style.color is None else tuple(
        style.color.downgrade(system).get_ansi_codes(foreground=True))
    bg = () if style.bgcolor is None else tuple(
        style.bgcolor.downgrade(system).get_ansi_codes(foreground=False))
    return Look(attributes, fg, bg)


def change(was: Look, now: Look) -> str:
    """The escape sequence that turns a terminal showing ``was`` to ``now``."""
    if now == was:
        return ""
    if now == PLAIN:
        return RESET
    if not set(was.attributes) <= set(now.attributes):
        # an attribute goes off: its own off-code is not the same for all (bold and dim
        # share one); a reset and the whole new style are always right
        return f"\x1b[0;{';'.join(now.codes())}m"
    codes = [a for a in now.attributes if a not in was.attributes]
    if now.fg != was.fg:
        codes += now.fg or ("39",)
    if now.bg != was.bg:
        codes += now.bg or ("49",)
    return f"\x1b[{';'.join(codes)}m"


class StyleRuns:
    """Terminal output written piece by piece with the terminal's style tracked across
    pieces: a cursor move between two pieces keeps the style, so the pieces of one
    screen update (the changed cells of several lines) share one running style."""

    def __init__(self, color_system: str | None) -> None:
        self.system = SYSTEMS.get(color_system or "", ColorSystem.TRUECOLOR)
        self.out: list[str] = []
        self.was = PLAIN

    def raw(self, text: str) -> None:
        """Text that moves the cursor or ends a line: it prints no styled cell."""
        self.out.append(text)

    def add(self, segments: Iterable[Segment]) -> None:
        append = self.out.append
        for text, style, _control in segments:
            if not text:
                continue
            if style is not None and style.link:
                # a hyperlink is opened and closed around its own text, as Rich writes it
                if self.was != PLAIN:
                    append(RESET)
                    self.was = PLAIN
                append(style.render(text, color_system=self.system))
                continue
            now = PLAIN if style is None else look(style, self.system)
            append(change(self.was, now))
            append(text)
            self.was = now

    def end(self) -> str:
        """All that was written, back to the terminal's default style at its end."""
        if self.was != PLAIN:
            self.out.append(RESET)
            self.was = PLAIN
        return "".join(self.out)


def render_strip(segments: Iterable[Segment], color_system: str | None) -> str:
    """The segments as terminal output: their text, each preceded by the change of style
    it needs, from and back to the terminal's default."""
    runs = StyleRuns(color_system)
    runs.add(segments)
    return runs.end()
