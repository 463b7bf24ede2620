"""What reaches a real terminal when one number changes: only the changed cells, and a
terminal that applies those writes shows exactly the new screen.

Headless tests never write to a terminal, so the compositor's update is rendered here by
hand, the way Textual's driver does it, and played into ``pyte`` (a terminal emulator)."""

from __future__ import annotations

import re

import pyte
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Static

from console.ui.widgets import partial_writes
from console.ui.widgets.lines import LinesView, changed_span
from tests.support.waits import wait_for

W, H = 60, 6


class Lines(App):
    def compose(self) -> ComposeResult:
        yield Static("header", id="h")
        yield LinesView()


def screen_text(app: App) -> list[str]:
    return [s.text for s in app.screen._compositor.render_strips()]


def play(term: pyte.Screen, data: str) -> list[str]:
    stream = pyte.Stream(term)
    stream.feed(data)
    return [line.rstrip() for line in term.display]


async def test_one_changed_number_writes_only_its_cells() -> None:
    assert partial_writes.install()
    app = Lines()
    async with app.run_test(size=(W, H)) as pilot:
        view = app.query_one(LinesView)
        view.show_lines([Text("FLASH  UP  4/0  8.1%  2.30s  470 tok/s"),
                         Text("Q27    UP  1/0  3.2%  990ms   44 tok/s", style="bold")])
        assert await wait_for(pilot, lambda: "FLASH" in "".join(screen_text(app)))
        await pilot.pause()  # the frame that drew it, finished (a turn, not a delay)
        term = pyte.Screen(W, H)
        full = app.screen._compositor.render_update(full=True).render_segments(app.console)
        before = play(term, full)
        assert before[1].startswith("FLASH")

        # one digit of TTFT, in the same frame nothing else
        view.show_lines([Text("FLASH  UP  4/0  8.1%  2.31s  470 tok/s"),
                         Text("Q27    UP  1/0  3.2%  990ms   44 tok/s", style="bold")])
        comp = app.screen._compositor
        comp.update_widgets({view})
        update = comp.render_partial_update()
        assert update is not None
        data = update.render_segments(app.console)
        moves = re.findall(r"\x1b\[(\d+);(\d+)H", data)
        # one write, on screen line 2 at the changed column (1-based): "2.30s" → "2.31s"
        col = "FLASH  UP  4/0  8.1%  2.3".__len__() + 1
        assert moves == [("2", str(col))], moves
        printable = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", data)
        assert printable == "1"
        after = play(term, data)
        assert after[1] == "FLASH  UP  4/0  8.1%  2.31s  470 tok/s"
        assert after[2] == "Q27    UP  1/0  3.2%  990ms   44 tok/s"
        assert after[0] == before[0]
        # and a full repaint (a dialog closing, a screenshot) still draws the whole line
        full = app.screen._compositor.render_update(full=True).render_segments(app.console)
        again = play(pyte.Screen(W, H), full)
        assert again[1] == "FLASH  UP  4/0  8.1%  2.31s  470 tok/s"
        assert again[2] == "Q27    UP  1/0  3.2%  990ms   44 tok/s"


async def test_two_numbers_apart_on_a_line_are_two_small_writes() -> None:
    """Issue 47 (cost): GPU 0's power and GPU 1's moved at every refresh, and the line
    between them was rewritten (the GPU line doubled the terminal bytes). Now each
    changed run is its own write; runs closer than ``MERGE_GAP`` cells stay one."""
    assert partial_writes.install()
    app = Lines()
    before_line = "GPU0 █100% ▆76% 58°C 690W  GPU1 █99% ▆76% 64°C 693W"
    after_line = "GPU0 █100% ▆76% 58°C 691W  GPU1 █99% ▆76% 64°C 695W"
    async with app.run_test(size=(W, H)) as pilot:
        view = app.query_one(LinesView)
        view.show_lines([Text(before_line)])
        assert await wait_for(pilot, lambda: "GPU1" in "".join(screen_text(app)))
        await pilot.pause()
        term = pyte.Screen(W, H)
        play(term, app.screen._compositor.render_update(full=True).render_segments(
            app.console))
        view.show_lines([Text(after_line)])
        comp = app.screen._compositor
        comp.update_widgets({view})
        update = comp.render_partial_update()
        assert update is not None
        data = update.render_segments(app.console)
        moves = re.findall(r"\x1b\[(\d+);(\d+)H", data)
        cols = [str(before_line.index("690") + 3), str(before_line.index("693") + 3)]
        assert moves == [("2", cols[0]), ("2", cols[1])], moves
        assert re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", data) == "15"
        assert play(term, data)[1] == after_line
        # two changes a few cells apart: one write (a cursor move costs more)
        view.show_lines([Text(after_line.replace("691W", "692W").replace("58°C", "59°C"))])
        comp.update_widgets({view})
        update = comp.render_partial_update()
        assert update is not None
        data = update.render_segments(app.console)
        assert len(re.findall(r"\x1b\[(\d+);(\d+)H", data)) == 1, data
        assert play(term, data)[1] == after_line.replace("691W", "692W").replace("58°C",
                                                                                "59°C")


def test_a_cut_line_keeps_every_cell() -> None:
    from rich.console import Console

    from console.ui.widgets.lines import cut, strip_of

    con = Console(width=40)
    strip = strip_of(Text("FLASH  2.31s  470 tok/s"), con, 30)
    for span in ((7, 8), (0, 5), (20, 30), (3, 3)):
        out = cut(strip, span)
        assert out.text == strip.text and out.cell_length == 30, span


def test_changed_span_counts_cells_not_characters() -> None:
    from rich.console import Console

    con = Console(width=40)
    # two wide characters before the change: it is at cell 6 (character 4)
    assert changed_span(Text("슬롯 a1"), Text("슬롯 a2"), con, 40) == (6, 7)
    assert changed_span(Text("same"), Text("same"), con, 40) == (0, 0)
    # a style alone is a change
    assert changed_span(Text("ab"), Text("ab", style="red"), con, 40) == (0, 2)
