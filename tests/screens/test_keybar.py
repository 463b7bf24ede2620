"""The key bar: the screen's keys on one line, one widget (``console/ui/widgets/keybar.py``).

On a small app of its own: which keys it shows and in what order, what a narrow
terminal cuts (never help, quit or the palette), a click that presses a key, a dimmed
key that rings the bell instead, and a change of bindings that redraws the line."""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from console.ui.widgets.keybar import KeyBar


class KeysScreen(Screen[None]):
    BINDINGS = [
        Binding("question_mark", "app.note('help')", "help"),
        Binding("q", "app.note('quit')", "quit"),
        Binding("r", "app.note('resume')", "resume"),
        Binding("ctrl+r,f5", "app.note('refresh')", "refresh"),
        Binding("x", "app.note('hidden')", "hidden", show=False),
        Binding("s", "stop", "stop"),
        Binding("w", "watchdog", "watchdog"),
    ]

    stop_allowed: bool | None = True
    """What ``check_action`` answers for ``stop``: None dims it, False leaves it out."""

    def compose(self) -> ComposeResult:
        yield Static("body")
        yield KeyBar()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.stop_allowed if action == "stop" else True

    def action_stop(self) -> None:
        self.app.note("stop")  # type: ignore[attr-defined]

    def action_watchdog(self) -> None:
        self.app.note("watchdog")  # type: ignore[attr-defined]


class KeysApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.ran: list[str] = []
        self.bells = 0

    def on_mount(self) -> None:
        self.push_screen(KeysScreen())

    def note(self, what: str) -> None:
        self.ran.append(what)

    def action_note(self, what: str) -> None:
        self.note(what)

    def bell(self) -> None:
        self.bells += 1


def line(app: Any) -> str:
    bar = app.screen.query_one(KeyBar)
    return "".join(seg.text for seg in bar.render_line(0))


async def test_the_keys_in_order_once_per_action_with_the_palette_at_the_right_edge() -> None:
    app = KeysApp()
    async with app.run_test(size=(100, 10)) as pilot:
        await pilot.pause()
        text = line(app)
        assert len(text) == 100
        assert text.startswith(" ? help  q quit  r resume  ^r refresh  s stop  w watchdog ")
        assert "hidden" not in text and "f5" not in text  # show=False; one key per action
        assert text.rstrip().endswith("▏^p palette")
        bar = app.screen.query_one(KeyBar)
        assert [s.key for s in bar.spans] == ["question_mark", "q", "r", "ctrl+r", "s", "w",
                                               "ctrl+p"]


async def test_a_narrow_terminal_cuts_from_the_right_but_keeps_help_quit_and_the_palette(
) -> None:
    app = KeysApp()
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause()
        text = line(app)
        assert len(text) == 40
        assert text.startswith(" ? help  q quit  r resume ")
        assert "watchdog" not in text
        assert text.rstrip().endswith("▏^p palette")


async def test_a_click_presses_the_key_and_a_dimmed_key_rings_the_bell() -> None:
    app = KeysApp()
    async with app.run_test(size=(100, 10)) as pilot:
        await pilot.pause()
        bar = app.screen.query_one(KeyBar)
        span = {s.key: s for s in bar.spans}
        await pilot.click(KeyBar, offset=(span["r"].start + 1, 0))
        await pilot.click(KeyBar, offset=(span["w"].end - 2, 0))
        await pilot.pause()
        assert app.ran == ["resume", "watchdog"]

        screen = app.screen
        assert isinstance(screen, KeysScreen)
        screen.stop_allowed = None  # shown, dimmed: not allowed now
        screen.refresh_bindings()
        await pilot.pause()
        span = {s.key: s for s in bar.spans}
        assert not span["s"].enabled
        await pilot.click(KeyBar, offset=(span["s"].start + 1, 0))
        await pilot.pause()
        assert app.ran == ["resume", "watchdog"] and app.bells == 1
        # the dim is on the key's cells only
        dim = [seg for seg in bar.render_line(0) if "stop" in seg.text]
        assert dim and all(seg.style is not None and seg.style.dim for seg in dim)


async def test_a_change_of_bindings_redraws_the_line() -> None:
    app = KeysApp()
    async with app.run_test(size=(100, 10)) as pilot:
        await pilot.pause()
        assert " s stop " in line(app)
        screen = app.screen
        assert isinstance(screen, KeysScreen)
        screen.stop_allowed = False  # not offered here at all
        screen.refresh_bindings()
        await pilot.pause()
        text = line(app)
        assert "stop" not in text and " w watchdog " in text
        assert [s.key for s in screen.query_one(KeyBar).spans] == [
            "question_mark", "q", "r", "ctrl+r", "w", "ctrl+p"]
