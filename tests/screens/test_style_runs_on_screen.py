"""The console's terminal writes with styles sent as changes (``sgr_runs``, through the
partial writer): a partial update of several styled lines, played into a terminal
emulator (pyte) over the screen before it, shows every cell (character, colours, bold,
reverse…) as Textual's own writes of the same update do; and it costs less."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyte
from rich.color import ColorSystem
from rich.console import Console
from rich.control import Control
from rich.segment import Segment
from rich.text import Text
from textual import _compositor
from textual.app import App, ComposeResult
from textual.strip import Strip
from textual.widgets import Static

from console.ui.widgets import partial_writes
from console.ui.widgets.lines import LinesView
from console.ui.widgets.sgr_runs import SYSTEMS
from tests.support.waits import pilot_until

W, H = 70, 6


class Lines(App):
    def compose(self) -> ComposeResult:
        yield Static("header", id="h")
        yield LinesView()




def styled(ttft: str, kv: str, state: str, rate: str = "470") -> list[Text]:
    a = Text.assemble(("FLASH  ", "bold #e0e0e0 on #1e1e1e"), (state, "bold #f4005f"),
                      ("  4/0  ", "#e0e0e0 on #1e1e1e"), (kv, "reverse #98e024"),
                      ("  ", ""), (ttft, "italic #9d65ff on #121212"),
                      (f" {rate}", "italic #e0e0e0"), (" tok/s", ""))
    b = Text.assemble(("Q27    ", "#e0e0e0 on #1e1e1e"), ("UP  ", "green"),
                      ("1/0  3.2%  ", "dim"), (ttft, "underline #e0e0e0 on #0c3555"))
    return [a, b]


def whole(segments: Iterable[Segment], system: ColorSystem) -> str:
    """Segments as Textual writes them, each in its whole style and a reset. The codes are
    read for this console's colour system (``Strip.render`` reuses the codes a style
    object first got, in whichever colour system an earlier test drew it)."""
    out = []
    for text, style, _ in segments:
        codes = Strip.render_ansi(style, system) if style is not None else ""
        out.append(f"\x1b[{codes}m{text}\x1b[0m" if codes else text)
    return "".join(out)


def full(comp: Any, console: Console) -> str:
    """The whole screen as Textual writes it: each line from its left edge."""
    update = comp.render_update(full=True)
    system = SYSTEMS.get(console.color_system or "", ColorSystem.TRUECOLOR)
    return "".join(Control.move_to(update.region.x, y).segment.text
                   + "".join(whole(strip, system) for strip in line)
                   for y, line in enumerate(update.strips, update.region.y))


def textuals(update: _compositor.ChopsUpdate, console: Console) -> str:
    """What Textual's own writer sends for ``update``: every piece of a changed line
    from its left edge."""
    system = SYSTEMS.get(console.color_system or "", ColorSystem.TRUECOLOR)
    out = []
    for y, x1, x2 in update.spans:
        for end, (x, strip) in zip(update.chop_ends[y], update.chops[y].items(), strict=False):
            if strip is None or x > x2 or end <= x1:
                continue
            out.append(Control.move_to(x, y).segment.text + whole(strip, system))
    return "".join(out)


def cells(term: pyte.Screen) -> list[list[tuple]]:
    return [[(c.data, c.fg, c.bg, c.bold, c.italics, c.underscore, c.reverse)
             for c in (term.buffer[y][x] for x in range(W))] for y in range(H)]


async def test_a_partial_update_shows_every_cell_as_textuals_own_writes_do() -> None:
    assert partial_writes.install()
    app = Lines()
    async with app.run_test(size=(W, H)) as pilot:
        view = app.query_one(LinesView)
        view.show_lines(styled("2.30s", "8.1%", "UP  "))
        assert await pilot_until(pilot, lambda: "FLASH" in str(view.render_line(0).text))
        await pilot.pause()
        comp = app.screen._compositor
        term = pyte.Screen(W, H)
        before = full(comp, app.console)
        pyte.Stream(term).feed(before)

        # changes on two lines, in different styles (a colour to none, an attribute off)
        view.show_lines(styled("2.41s", "9.7%", "HOT ", rate="512"))
        comp.update_widgets({view})
        update = comp.render_partial_update()
        assert update is not None
        data = update.render_segments(app.console)
        pyte.Stream(term).feed(data)

        # the oracle: the same update as Textual writes it (each piece whole, in its
        # full style then a reset), played over the same screen
        theirs = pyte.Screen(W, H)
        pyte.Stream(theirs).feed(before)
        pyte.Stream(theirs).feed(textuals(update, app.console))
        assert cells(term) == cells(theirs)
        assert any(c[3] for c in cells(theirs)[1]) and any(c[6] for c in cells(theirs)[1])

        # and in fewer bytes than Textual's pieces
        assert len(data) < len(textuals(update, app.console))
