"""NO_COLOR: the worst states are the most visible text on the screen, not the faintest.

Rendered through the console's own line filters (what the terminal is sent), the cells of
``✖ DOWN`` (in the cursor row), ``✖ CRIT`` and an ``ALERT`` log line must stand out: bold,
and with more contrast than a routine line's text."""

from __future__ import annotations

import pytest
from rich.style import Style
from textual.color import Color

from console.ui.app import PodConsoleApp
from console.ui.no_color import NoColorEmphasis
from console.ui.screens.main import MainScreen
from console.ui.widgets.slots import SlotsTable
from tests.screens import states
from tests.screens.host import ScreenHost, settle


def _cells(app: ScreenHost) -> list[list[tuple[str, Style]]]:
    """Every row of the screen as the terminal gets it: (character, final style)."""
    rows = []
    for strip in app.screen._compositor.render_strips():
        row: list[tuple[str, Style]] = []
        for seg in strip:
            if seg.control:
                continue
            for ch in seg.text:
                row.append((ch, seg.style or Style()))
        rows.append(row)
    return rows


def _find(rows: list[list[tuple[str, Style]]], text: str) -> list[tuple[int, list[Style]]]:
    out = []
    for y, row in enumerate(rows):
        line = "".join(ch for ch, _ in row)
        at = line.find(text)
        if at >= 0:
            out.append((y, [st for _, st in row[at:at + len(text)]]))
    return out


def _contrast(style: Style) -> float:
    fg = Color.from_rich_color(style.color) if style.color else Color(224, 224, 224)
    bg = Color.from_rich_color(style.bgcolor) if style.bgcolor else Color(0, 0, 0)
    if style.reverse:
        fg, bg = bg, fg
    return abs(fg.brightness - bg.brightness)


def _stands_out(styles: list[Style], routine: float) -> bool:
    return all(s.bold and _contrast(s) >= routine for s in styles)


@pytest.fixture()
def no_color(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TEXTUAL_COLOR_SYSTEM", "truecolor")
    yield


async def test_worst_states_are_the_most_visible_without_colour(no_color) -> None:
    log = tuple(line for line in states.log_lines()
                if line[1].startswith(("console started", "ALERT")))
    app = ScreenHost(lambda: MainScreen(states.state(down=("Q27",)), log))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.top.query_one(SlotsTable)
        table.move_cursor(table.slots.index("Q27"))  # the cursor row holds the DOWN
        await settle(pilot)
        rows = _cells(app)
        routine = _find(rows, "console started")
        assert routine, "the routine log line is not on screen"
        routine_contrast = min(_contrast(s) for s in routine[0][1])
        for text in ("✖ DOWN", "✖ CRIT", "ALERT Q27 down"):
            found = _find(rows, text)
            assert found, f"{text!r} is not on screen"
            for y, styles in found:
                assert _stands_out(styles, routine_contrast), (
                    text, y, [str(s) for s in styles[:3]], routine_contrast)


def test_the_console_has_the_same_filters() -> None:
    assert issubclass(PodConsoleApp, NoColorEmphasis)
