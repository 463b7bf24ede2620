"""SVG snapshots of the screens with a fixed clock and fixed data (pytest-textual-snapshot).

Update after an intended change with
``pytest tests/screens/test_app_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import time

import pytest

from tests.support.static_app import build

# Rendering depends on the environment's colour support: pin it.
pytestmark = pytest.mark.usefixtures("_pin_colors")


@pytest.fixture(autouse=True, scope="module")
def _warm_renderer() -> None:
    from tests.screens.host import warm_renderer

    warm_renderer()


@pytest.fixture
def _pin_colors(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TEXTUAL_COLOR_SYSTEM", "truecolor")
    monkeypatch.setenv("COLORTERM", "truecolor")
    monkeypatch.setenv("TZ", "UTC")  # clock texts in the snapshots
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


async def _settle(pilot) -> None:
    # the first poll (slots and pod) must have landed: on a loaded machine half a second
    # was not always enough, and the pod line was captured still blank
    from tests.support.waits import wait_for

    # and the context ready (its registry attached: the help and the footer read it).
    # This app is built with its context, so that holds from mount; the wait keeps the
    # settle right for an app that starts staged
    assert await wait_for(pilot, lambda: pilot.app.polls >= 1 and pilot.app.pod is not None
                          and pilot.app.ready_after_s is not None)
    await pilot.app.workers.wait_for_complete()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()  # what the poll posted, handled (a turn of the loop, not a delay)


SIZES = [(80, 24), (120, 40), (160, 48)]


async def _detail(pilot) -> None:
    from console.ui.screens.detail import SlotDetailScreen
    from tests.support.waits import wait_for

    await _settle(pilot)
    await pilot.press("enter")
    # the detail is up and its log panel has its answer (no agent here: it says so)
    assert await wait_for(pilot, lambda: isinstance(pilot.app.screen, SlotDetailScreen)
                          and bool(pilot.app.screen.query_one("#dlog").lines))
    await pilot.pause()


async def _action(pilot) -> None:
    """An operation in progress: the dialog as an operation drives it (step, fraction,
    lines, elapsed time from the app's fixed clock)."""
    from console.ui.screens.modals import ProgressScreen
    from tests.support.static_app import NOW

    await _settle(pilot)
    screen = ProgressScreen("Host checks", clock=lambda: NOW)
    screen.started = NOW - 37
    from tests.support.waits import wait_for

    pilot.app.push_screen(screen)
    assert await wait_for(pilot, lambda: pilot.app.screen is screen and screen.is_mounted)
    screen.step("gpus", 0.25, "2× RTX PRO 6000, driver CUDA 13.0")
    screen.step("p2p", 0.5, "NCCL P2P probe: 2 ranks, all channels via P2P/CUMEM")
    screen.step("disk", 0.75, "checking /workspace")
    assert await wait_for(pilot, lambda: len(screen.query_one("#plog").lines) >= 3)
    # the progress bar animates to 75 %: the picture is taken once it is there (under
    # load a single pause caught it part-way once)
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


SCREENS = {
    "main": (dict(), _settle),
    "detail": (dict(), _detail),
    "wall": (dict(wall=True), _settle),
    "alert": (dict(down_slot=True), _settle),
    "action": (dict(), _action),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", list(SCREENS))
def test_screen(snap_compare, tmp_path, name: str, size: tuple[int, int]) -> None:
    """Every screen at a phone-sized, a laptop and a wall terminal."""
    kw, run = SCREENS[name]
    assert snap_compare(build(tmp_path, **kw), terminal_size=size, run_before=run)


def test_help(snap_compare, tmp_path) -> None:
    async def run(pilot) -> None:
        await _settle(pilot)
        from console.ui.screens.modals import HelpScreen
        from tests.support.waits import wait_for

        await pilot.press("question_mark")
        assert await wait_for(pilot, lambda: isinstance(pilot.app.screen, HelpScreen)
                              and pilot.app.screen.is_mounted)
        # what the push set off (the footer's bindings, a poll in flight) done, then
        # the frame that follows it: conditions, not a delay
        await pilot.app.workers.wait_for_complete()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        await pilot.pause()

    assert snap_compare(build(tmp_path), terminal_size=(100, 30), run_before=run)


