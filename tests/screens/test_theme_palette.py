"""The console's themes in the app (issue 49): the config's theme at start, the palette's
"Theme: …" entries in place of Textual's own picker, and a pick that repaints the open
screen at once and holds against the config's."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.ui.widgets.slots import SlotsTable
from tests.screens.test_themes import _cells, _chromatic, _colours
from tests.support.static_app import build
from tests.support.waits import wait_for


@pytest.fixture(autouse=True)
def _colour_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TEXTUAL_COLOR_SYSTEM", "truecolor")


async def test_the_config_theme_at_start_and_a_palette_pick_repaints(tmp_path: Path) -> None:
    app = build(tmp_path, down_slot=True, theme="colour-blind")
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.ready and app.snapshot is not None
                              and len(app.screen.query(SlotsTable)) == 1)
        assert app.console_theme.name == "colour-blind"
        assert app.theme == "pod-colour-blind"  # the stylesheet's Textual theme with it
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        assert {"Theme: default", "Theme: high-contrast", "Theme: mono"} <= set(commands)
        assert "Theme: colour-blind" not in commands  # the one in use
        assert "Theme" not in commands  # Textual's picker knows none of the state colours
        assert any(_chromatic(c) for c in _colours(_cells(app)))

        await commands["Theme: mono"].callback()
        assert await wait_for(pilot, lambda: app.console_theme.name == "mono")
        await pilot.pause()
        coloured = [c for c in _colours(_cells(app)) if _chromatic(c)]
        assert not coloured, coloured[:8]
        assert any("theme mono" in text for _, text, _ in app.log_lines)
        # the pick holds: the config's theme does not come back with the context
        app._became_ready()
        assert app.console_theme.name == "mono"
