"""Textual's palette "Screenshot" saves an SVG where the app runs (issue 44): in a browser
that is the server, and the web driver keeps every one in the session process. It is
offered in a terminal (the viewer's own disk), never on a wall or in a browser."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.static_app import build


@pytest.mark.parametrize(("wall", "web", "offered"), [
    (False, False, True), (False, True, False), (True, False, False), (True, True, False)])
async def test_screenshot_is_offered_only_where_it_saves_for_the_viewer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wall: bool, web: bool,
        offered: bool) -> None:
    app = build(tmp_path, wall=wall)
    async with app.run_test(size=(160, 48)):
        monkeypatch.setattr(type(app), "is_web", property(lambda self: web))
        titles = {c.title for c in app.get_system_commands(app.screen)}
    assert "Quit" in titles  # Textual's own commands are still there
    assert ("Screenshot" in titles) is offered, titles
