"""A line's styles sent as changes (``console/ui/widgets/sgr_runs.py``) look, cell for cell,
as Textual's own writes of the same line, in every colour system, and cost fewer bytes.

Both outputs are read by a small terminal model (what each SGR code sets, cell by cell)
and by pyte, a terminal emulator; random lines mix colours, attributes switched on and
off, unstyled pieces and hyperlinks."""

from __future__ import annotations

import random
import re

import pyte
import pytest
from rich.color import Color, ColorSystem
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from console.ui.widgets.sgr_runs import ATTRIBUTES, render_strip

SYSTEMS = {"truecolor": ColorSystem.TRUECOLOR, "256": ColorSystem.EIGHT_BIT,
           "standard": ColorSystem.STANDARD}
SGR = re.compile(r"\x1b\[([0-9;]*)m")
OSC = re.compile(r"\x1b\]8;[^\x1b]*\x1b\\")
ATTR_CODES = {code for _, code in ATTRIBUTES}


def cells(out: str) -> list[tuple[str, frozenset[str], tuple[str, ...], tuple[str, ...]]]:
    """Each printed character with the terminal's state when it was printed:
    (char, attributes on, foreground codes, background codes)."""
    attrs: set[str] = set()
    fg: tuple[str, ...] = ()
    bg: tuple[str, ...] = ()
    shown = []
    pos = 0
    out = OSC.sub("", out)  # a link's opening and closing carry no style
    for m in SGR.finditer(out + "\x1b[m"):
        for ch in out[pos:m.start()]:
            shown.append((ch, frozenset(attrs), fg, bg))
        pos = m.end()
        codes = m.group(1).split(";") if m.group(1) else ["0"]
        i = 0
        while i < len(codes):
            c = codes[i]
            if c == "0":
                attrs, fg, bg = set(), (), ()
            elif c in ATTR_CODES:
                attrs.add(c)
            elif c in ("38", "48"):
                n = 5 if codes[i + 1] == "2" else 3
                part = tuple(codes[i:i + n])
                fg, bg = (part, bg) if c == "38" else (fg, part)
                i += n - 1
            elif c == "39":
                fg = ()
            elif c == "49":
                bg = ()
            elif 30 <= int(c) <= 37 or 90 <= int(c) <= 97:
                fg = (c,)
            elif 40 <= int(c) <= 47 or 100 <= int(c) <= 107:
                bg = (c,)
            else:
                raise AssertionError(f"unexpected SGR code {c}")
            i += 1
    return shown


def random_style(rng: random.Random) -> Style | None:
    if rng.random() < 0.1:
        return None
    kw = {name: True for name, _ in ATTRIBUTES[:9] if rng.random() < 0.15}
    colours = ["#e0e0e0", "#1e1e1e", "#98e024", "#9d65ff", "#f4005f", "red", "bright_blue",
               "color(200)"]
    fg = rng.choice([None, *colours])
    bg = rng.choice([None, "#121212", "#1e1e1e", "#0c3555", "blue"])
    link = "https://example.invalid/x" if rng.random() < 0.05 else None
    return Style(color=fg, bgcolor=bg, link=link, **kw)


def random_line(rng: random.Random) -> list[Segment]:
    text = "ab c⣿⡇%.0123456789"
    return [Segment("".join(rng.choice(text) for _ in range(rng.randint(0, 6))),
                    random_style(rng)) for _ in range(rng.randint(1, 30))]


class Console:
    """What ``Strip.render`` reads of a console."""

    def __init__(self, system: ColorSystem) -> None:
        self._color_system = system


def pyte_screen(out: str) -> list[tuple]:
    screen = pyte.Screen(200, 2)
    pyte.Stream(screen).feed(OSC.sub("", out))
    line = screen.buffer[0]
    return [(c.data, c.fg, c.bg, c.bold, c.italics, c.underscore, c.reverse,
             c.strikethrough, c.blink) for c in (line[x] for x in range(200))]


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_every_cell_looks_as_textuals_own_write(system: str) -> None:
    rng = random.Random(47)
    theirs_bytes = ours_bytes = 0
    for _ in range(400):
        segments = random_line(rng)
        theirs = Strip(segments).render(Console(SYSTEMS[system]))  # type: ignore[arg-type]
        ours = render_strip(segments, system)
        assert cells(ours) == cells(theirs), (segments, ours, theirs)
        assert pyte_screen(ours) == pyte_screen(theirs)
        # what is written after the line (here "Z") inherits no style from it
        assert cells(ours + "Z")[-1] == ("Z", frozenset(), (), ())
        theirs_bytes += len(theirs.encode())
        ours_bytes += len(ours.encode())
    assert ours_bytes < theirs_bytes


def test_a_table_row_costs_its_changes_not_a_style_per_piece() -> None:
    # a row as the slot table draws it: one background, one colour, cells apart
    row = Style(color="#e0e0e0", bgcolor="#1e1e1e")
    hot = Style(color="#f4005f", bgcolor="#1e1e1e", bold=True)
    segments = [Segment(t, s) for t, s in [("Q27   ", row), ("qwen3.8-27b  ", row),
                                           ("8882  ", row), ("● UP  ", hot),
                                           ("10/0  ", row), ("17.6%  ", row),
                                           ("960ms", row)]]
    ours = render_strip(segments, "truecolor")
    theirs = Strip(segments).render(Console(ColorSystem.TRUECOLOR))  # type: ignore[arg-type]
    assert cells(ours) == cells(theirs)
    # the background is said once; the bold piece sets what it adds, then resets back
    assert ours.count("48;2;30;30;30") == 2 and theirs.count("48;2;30;30;30") == 7
    assert len(ours) < 0.5 * len(theirs)


def test_no_colour_system_is_written_in_truecolour_as_textual_does() -> None:
    segments = [Segment("x", Style(color=Color.parse("#102030")))]
    assert "38;2;16;32;48" in render_strip(segments, None)
