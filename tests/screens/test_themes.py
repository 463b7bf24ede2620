"""Themes (issue 49): every screen and dialog under each theme at 120×40, a colour-blind
theme whose states never stand on red against green, a mono theme that sends no colour,
and a switch that repaints what is open.

The default theme's snapshots at 120×40 are ``test_snapshots.py::test_screen[*-120x40]``
and ``test_help.py``'s (the default is the console's look before themes, unchanged); here
the other three. After an intended change: ``--snapshot-update`` and look at the SVGs.
"""

from __future__ import annotations

import colorsys
import time
from collections.abc import Callable, Iterator
from itertools import combinations
from typing import Any

import pytest
from rich.color import Color as RichColor
from rich.style import Style
from textual.color import Color
from textual.screen import Screen

from console.config.defaults import THEMES
from console.ui.screens.gpus import GpuScreen
from console.ui.screens.main import MainScreen
from console.ui.themes import SEVERITY_ROLES, THEMES_BY_NAME
from tests.screens import states
from tests.screens.host import ScreenHost, run_before, settle
from tests.screens.test_help import _help_of
from tests.screens.test_snapshots import SCREENS

OTHER_THEMES = [t for t in THEMES if t != "default"]
THEMED: dict[str, tuple[list[Callable[[], Screen]], list[Any]]] = {
    **SCREENS,
    # the help, over the main screen (its state words and keys)
    "help": ([lambda: _help_of("main")[0], lambda: _help_of("main")[1]], []),
}


@pytest.fixture(autouse=True, scope="module")
def _warm_renderer() -> None:
    from tests.screens.host import warm_renderer

    warm_renderer()


@pytest.fixture(autouse=True)
def _pinned_terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TEXTUAL_COLOR_SYSTEM", "truecolor")
    monkeypatch.setenv("COLORTERM", "truecolor")
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("theme", OTHER_THEMES)
@pytest.mark.parametrize("name", list(THEMED))
def test_screen_in_theme(snap_compare, name: str, theme: str) -> None:
    """Every screen and dialog, at a laptop's 120×40, in each theme but the default."""
    screens, steps = THEMED[name]
    # the help's pair is built together: the screen under it, then its help
    if name == "help":
        under, help_screen = _help_of("main")
        screens = [lambda: under, lambda: help_screen]
    assert snap_compare(ScreenHost(*screens, theme=theme), terminal_size=(120, 40),
                        run_before=run_before(*steps))


# -- what the cells are: the terminal's view ---------------------------------------------

def _cells(app: ScreenHost) -> list[list[tuple[str, Style]]]:
    """Every row as the terminal gets it (the app's line filters applied)."""
    rows = []
    filters = app.get_line_filters()
    for strip in app.screen._compositor.render_strips():
        for f in filters:
            strip = strip.apply_filter(f, Color(0, 0, 0))
        row: list[tuple[str, Style]] = []
        for seg in strip:
            if not seg.control:
                row.extend((ch, seg.style or Style()) for ch in seg.text)
        rows.append(row)
    return rows


def _rgb(c: RichColor | None) -> tuple[int, int, int] | None:
    if c is None or c.is_default:
        return None
    return Color.from_rich_color(c).rgb


def _colours(rows: list[list[tuple[str, Style]]]) -> set[tuple[int, int, int]]:
    out = set()
    for row in rows:
        for _, st in row:
            for c in (st.color, st.bgcolor):
                rgb = _rgb(c)
                if rgb is not None:
                    out.add(rgb)
    return out


def _chromatic(rgb: tuple[int, int, int]) -> bool:
    return max(rgb) - min(rgb) > 6  # a grey's channels are equal (rounding aside)


WORST = {
    "main-slot-down": lambda: MainScreen(states.state(down=("Q27",)), states.log_lines()),
    "main-six-alerts": lambda: MainScreen(states.six_alerts(), states.log_lines()),
    "gpus-faults": lambda: GpuScreen(states.state(pod_=states.pod(gpus=states.faulty_gpus()))),
}
"""Screens with the worst states on them: a dead slot, six alerts, hardware faults."""


async def _drawn(make: Callable[[], Screen], theme: str) -> list[list[tuple[str, Style]]]:
    app = ScreenHost(make, theme=theme)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        return _cells(app)


def _find(rows: list[list[tuple[str, Style]]], text: str) -> list[list[Style]]:
    out = []
    for row in rows:
        line = "".join(ch for ch, _ in row)
        at = line.find(text)
        if at >= 0:
            out.append([st for _, st in row[at:at + len(text)]])
    return out


@pytest.mark.parametrize("name", list(WORST))
async def test_mono_sends_no_colour_and_keeps_the_worst_states_loud(name: str) -> None:
    """``mono`` without ``NO_COLOR``: every cell grey (no colour at all), and what is
    critical still stands out — bold and in reverse video."""
    rows = await _drawn(WORST[name], "mono")
    coloured = sorted(c for c in _colours(rows) if _chromatic(c))
    assert not coloured, f"mono sent colours: {coloured[:8]}"
    loud = {"main-slot-down": "✖ DOWN", "main-six-alerts": "✖ CRIT", "gpus-faults": "XID"}
    found = _find(rows, loud[name])
    assert found, f"{loud[name]!r} is not on screen"
    assert any(all(s.bold and s.reverse for s in styles) for styles in found), found


# -- colour-blind: no red/green opposition ---------------------------------------------

def _hue_deg(rgb: tuple[int, int, int]) -> tuple[float, float]:
    h, _, s = colorsys.rgb_to_hls(*(v / 255 for v in rgb))
    return h * 360, s


def _reddish(rgb: tuple[int, int, int]) -> bool:
    h, s = _hue_deg(rgb)
    return s > 0.35 and (h < 20 or h > 330)


def _greenish(rgb: tuple[int, int, int]) -> bool:
    h, s = _hue_deg(rgb)
    return s > 0.35 and 75 <= h <= 165


# Machado, Oliveira and Fernandes (2009), severity 1.0, on linear RGB
DEUTERANOPIA = ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413),
                (-0.011820, 0.042940, 0.968881))
PROTANOPIA = ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216),
              (-0.003882, -0.048116, 1.051998))


def _linear(v: float) -> float:
    return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4


def _lab(lin: tuple[float, float, float]) -> tuple[float, float, float]:
    r, g, b = lin
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def _seen(rgb: tuple[int, int, int], matrix: Any) -> tuple[float, float, float]:
    lin = [_linear(v / 255) for v in rgb]
    out = tuple(min(1.0, max(0.0, sum(m * c for m, c in zip(row, lin, strict=True))))
                for row in matrix)
    return _lab(out)  # type: ignore[arg-type]


def _delta_e(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
    return sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) ** 0.5


MIN_DELTA_E = 20.0
"""Two states must differ by this much (CIE76) as a dichromat sees them: ~2.3 is a
just-noticeable difference; 20 is told apart at a glance."""


async def _severity_colours(theme: str) -> dict[str, tuple[int, int, int]]:
    """Each severity role's text colour as the terminal gets it, in ``theme``."""
    app = ScreenHost(lambda: MainScreen(states.state(), states.log_lines()), theme=theme)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        out = {}
        for role in SEVERITY_ROLES:
            style = app.console.get_style(role)
            assert style.color is not None, (theme, role)
            out[role] = tuple(style.color.get_truecolor(app.ansi_theme))
        return out


def _opposed(colours: dict[str, tuple[int, int, int]]) -> list[tuple[str, str, str]]:
    """The pairs of states a dichromat cannot tell apart, or that stand on red against
    green."""
    bad = []
    for (a, ca), (b, cb) in combinations(colours.items(), 2):
        if (_reddish(ca) and _greenish(cb)) or (_greenish(ca) and _reddish(cb)):
            bad.append((a, b, "red/green"))
        for sight, m in (("deuteranopia", DEUTERANOPIA), ("protanopia", PROTANOPIA)):
            if _delta_e(_seen(ca, m), _seen(cb, m)) < MIN_DELTA_E:
                bad.append((a, b, sight))
    return bad


async def test_the_colour_blind_theme_has_no_red_green_pair() -> None:
    assert not _opposed(await _severity_colours("colour-blind"))
    # the check can fail: the default theme's ok/crit is exactly such a pair
    assert ("ok", "crit", "red/green") in _opposed(await _severity_colours("default"))


async def test_the_colour_blind_theme_draws_no_red_beside_green() -> None:
    """Not only the severity names: nothing on the worst screens (borders, the key bar,
    plots) is red and green at once."""
    for name, make in WORST.items():
        colours = _colours(await _drawn(make, "colour-blind"))
        red = [c for c in colours if _reddish(c)]
        green = [c for c in colours if _greenish(c)]
        assert not (red and green), (name, red[:4], green[:4])


async def test_a_theme_switch_repaints_what_is_open() -> None:
    """``use_theme`` (the palette's "Theme: …"): the screen already drawn loses its
    colour at once, without a new state."""
    app = ScreenHost(WORST["main-slot-down"])
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert any(_chromatic(c) for c in _colours(_cells(app)))
        app.use_theme("mono")
        await settle(pilot)
        assert app.console_theme is THEMES_BY_NAME["mono"]
        coloured = [c for c in _colours(_cells(app)) if _chromatic(c)]
        assert not coloured, coloured[:8]
        app.use_theme("default")
        await settle(pilot)
        assert any(_chromatic(c) for c in _colours(_cells(app)))


async def test_a_replay_shows_the_viewers_theme_not_the_recorders(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """A recording holds the recorder's view (its ``theme`` too); ``pod-console replay``
    passes the viewer's config theme, and without one the recording's is not taken."""
    from msgspec.structs import replace

    from console.session.record.replay import Replay
    from console.session.record.tape import MemoryTape
    from console.ui.app import make_app

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    polls = [replace(s, view=replace(s.view, theme="high-contrast"))
             for s in (replace(states.state(), now=states.NOW - 60 * i,
                               polled_at=states.NOW - 60 * i) for i in (1, 0))]
    for theme, shown in ((None, "default"), ("colour-blind", "colour-blind")):
        app = make_app(Replay(MemoryTape(polls, ())), theme=theme)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle_app(pilot)
            assert app.console_theme.name == shown, theme


async def settle_app(pilot: Any) -> None:
    for _ in range(3):
        await pilot.pause()
