"""SVG snapshots of the screens with a fixed clock and fixed data (pytest-textual-snapshot).

Update after an intended change with ``pytest tests/tui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import time

import pytest

from tests.tui.snapshot_app import build

# Rendering depends on the environment's colour support: pin it.
pytestmark = pytest.mark.usefixtures("_pin_colors")


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
    await pilot.pause(0.5)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause(0.2)


def test_main_160x48(snap_compare, tmp_path) -> None:
    assert snap_compare(build(tmp_path), terminal_size=(160, 48), run_before=_settle)


def test_main_80x24(snap_compare, tmp_path) -> None:
    assert snap_compare(build(tmp_path), terminal_size=(80, 24), run_before=_settle)


def test_slot_down_alert(snap_compare, tmp_path) -> None:
    # under 34 rows the plots give way (their drawing is covered by the 160×48 and
    # plot tests); what this one is about is the alert and the dead row
    assert snap_compare(build(tmp_path, down_slot=True), terminal_size=(120, 32),
                        run_before=_settle)


def test_slot_detail(snap_compare, tmp_path) -> None:
    async def run(pilot) -> None:
        await _settle(pilot)
        await pilot.press("enter")
        await pilot.pause(0.5)

    assert snap_compare(build(tmp_path), terminal_size=(160, 33), run_before=run)


def test_wall(snap_compare, tmp_path) -> None:
    assert snap_compare(build(tmp_path, wall=True), terminal_size=(160, 48),
                        run_before=_settle)


def test_help(snap_compare, tmp_path) -> None:
    async def run(pilot) -> None:
        await _settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause(0.3)

    assert snap_compare(build(tmp_path), terminal_size=(100, 30), run_before=run)


