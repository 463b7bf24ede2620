"""A host app for one screen at a time: no poller, no agent, no process.

It pushes the screens it is given (a console screen with its fixed ``ConsoleState``, and
a dialog over it) and answers what they ask the app for (a slot's log lines) from fixed
data. It uses the console's own stylesheet, so a screen looks as it does in the console,
and nothing of ``PodConsoleApp``: the app may change how it builds states, the screens'
contract (``ConsoleScreen``: state down, messages up) is what is tested here.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from textual.app import App
from textual.screen import Screen
from textual.widgets import Input

import console.ui
from console.ui.no_color import NoColorEmphasis
from console.ui.screens.base import ConsoleScreen
from console.ui.themes import Themed
from tests.screens import states

CSS = Path(console.ui.__file__).resolve().parent / "console.tcss"

ScreenFactory = Callable[[], Screen]
Step = Callable[[Any], Awaitable[None] | None]
"""Something done to the host once its screens are up (``pilot`` in, e.g. progress steps
given to a dialog after it was drawn)."""


class ScreenHost(NoColorEmphasis, Themed, App):
    TITLE = "pod-console"  # the exported SVG's title: the console's own
    CSS_PATH = str(CSS)
    # and the console's own terminal filters (NO_COLOR's emphasis), as the app has them

    def __init__(self, *screens: ScreenFactory, slot_log: list[str] | None = None,
                 theme: str | None = None) -> None:
        super().__init__(theme=theme)  # the console's themes, as the app has them
        self._factories = screens
        self.pushed: list[Screen] = []
        self.asked: list[tuple[Any, ...]] = []
        """What the screens asked the app for, in order: ``("operation", id, args)``,
        ``("detail", slot)``."""
        self.slot_log = list(states.SLOT_LOG if slot_log is None else slot_log)
        self.failed: BaseException | None = None
        """A screen that could not be built or pushed (``settle`` raises it at once)."""
        self.held_logs: list[Callable[[list[str]], None]] | None = None
        """Set to a list: a screen's ask for log lines is held here, unanswered, as the
        agent's slow answer would be (the test answers it when it chooses)."""

    async def on_mount(self) -> None:
        try:
            for make in self._factories:
                screen = make()
                self.pushed.append(screen)
                await self.push_screen(screen)
        except Exception as exc:  # the test says why at once, not after a timeout
            self.failed = exc

    @property
    def top(self) -> Screen:
        return self.pushed[-1]

    def on_console_screen_want_logs(self, message: ConsoleScreen.WantLogs) -> None:
        if self.held_logs is not None:
            self.held_logs.append(message.done)
            return
        message.done(list(self.slot_log))

    def on_console_screen_operation(self, message: ConsoleScreen.Operation) -> None:
        op = getattr(message, "operation_id", None) or getattr(message, "action_id", None)
        self.asked.append(("operation", op, dict(message.args)))

    def on_console_screen_open_detail(self, message: ConsoleScreen.OpenDetail) -> None:
        self.asked.append(("detail", message.slot))


SETTLE_S = 30.0
"""How long a screen may take to be up (a loaded machine); a quiet one takes ~0.1 s."""


async def settle(pilot: Any) -> None:
    """Until every pushed screen is mounted and the top one is current, then until what
    they posted has been handled and the screen repainted. A condition, not a delay."""
    app: ScreenHost = pilot.app
    deadline = time.monotonic() + SETTLE_S
    while not (app.failed is None and len(app.pushed) == len(app._factories)
               and app.screen is app.top and all(s.is_mounted for s in app.pushed)):
        if app.failed is not None:
            raise AssertionError(f"a screen could not be shown: {app.failed!r}") from app.failed
        if time.monotonic() > deadline:
            raise AssertionError(f"screens not up within {SETTLE_S} s: {app.screen_stack}")
        await pilot.pause(0.02)
    # a blinking cursor is drawn or not by the half second: shown, still
    for screen in app.pushed:
        for box in screen.query(Input):
            box.cursor_blink = False
    # on_mount posted messages (log lines asked for) and set content: let them land
    for _ in range(3):
        await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


def run_before(*steps: Step) -> Callable[[Any], Awaitable[None]]:
    """``snap_compare``'s ``run_before``: settle, do each step, settle again."""

    async def run(pilot: Any) -> None:
        await settle(pilot)
        for step in steps:
            r = step(pilot)
            if r is not None:
                await r
            await settle(pilot)

    return run


_warmed = False


def warm_renderer() -> None:
    """Draw the wall and a slot's detail once, off the record, before the first snapshot
    of a process. The very first plot a process draws places the position chart's ticks
    differently from every later one (seen at 120×40; the cause is inside the plotting
    stack, not found yet): without this, which test runs first on a worker decides a
    snapshot, and xdist changes that order from run to run."""
    global _warmed
    if _warmed:
        return
    _warmed = True
    import asyncio

    from console.ui.screens.detail import SlotDetailScreen
    from console.ui.screens.wall import WallScreen

    async def draw() -> None:
        for make in (lambda: WallScreen(states.state(read_only=True), rotate_s=60),
                     lambda: SlotDetailScreen(states.state(), "FLASH")):
            app = ScreenHost(make)
            async with app.run_test(size=(120, 40)) as pilot:
                await pilot.pause()

    asyncio.run(draw())
