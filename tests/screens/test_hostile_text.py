"""A slot's server, the agent and the provider write escape sequences into what the console
draws (issue 31, finding 8: a model id with ``ESC ] 0 ;`` retitled tmux, ``ESC [ 2 J``
blanked the web wall). Every screen that draws such words is shown here from a state full
of them, and what reaches the screen (the compositor's cells and the exported SVG) holds
no control character, while the readable rest is still shown."""

from __future__ import annotations

import re
from typing import Any

import pytest
from msgspec.structs import replace

from console.model.conditions import Condition
from console.ui.screens.alerts import AlertHistoryScreen
from console.ui.screens.detail import SlotDetailScreen
from console.ui.screens.log import LogScreen
from console.ui.screens.main import MainScreen
from console.ui.screens.modals import ConfirmScreen, FatalScreen, ProgressScreen
from console.ui.screens.wall import WallScreen
from tests.screens import states
from tests.screens.host import ScreenHost, settle

SIZE = (160, 48)
ATTACK = ("\x1b]0;PWNED-TITLE\x07"                     # OSC 0: the terminal's title
          "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"         # OSC 52: the clipboard
          "\x1b]8;;javascript:alert(1)\x1b\\here\x1b]8;;\x1b\\"  # OSC 8: a link
          "\x1b[2J\x1b[H"                               # CSI: clear the screen
          "\x9b2J\x9d0;C1-TITLE\x9c"                    # the same in 8-bit C1 form
          "\x07\x08\x1b")                               # BEL, BS, a lone ESC
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")
"""Any C0 or C1 control but the line feed (the SVG's and the joined lines' own)."""


def hostile_state(**kw: Any) -> Any:
    """A state where every word from outside carries the attack."""
    s = states.state(down=("Q27",), failures=(
        Condition("agent", "warn", "pod agent unreachable", "ssh: " + ATTACK),), **kw)
    slots = tuple(replace(x, served_models=("tiny-main" + ATTACK, "스펙-모델 🚀"),
                          error=("/metrics: refused " + ATTACK) if x.error else None)
                  for x in s.snapshot.slots)
    pod = replace(s.pod, gpu_name="RTX" + ATTACK, agent_error="agent " + ATTACK,
                  last_watchdog_result="FAILED " + ATTACK)
    return replace(s, snapshot=replace(s.snapshot, slots=slots), pod=pod)


def drawn(app: ScreenHost) -> str:
    """Every cell of the screen as the compositor hands it to the terminal."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip if not seg.control)
                     for strip in strips)


SCREENS = {
    "main": lambda: MainScreen(hostile_state(), (*states.log_lines(),
                                                 (states.NOW, "agent said " + ATTACK, "red"))),
    "detail": lambda: SlotDetailScreen(hostile_state(), "Q27"),
    "wall": lambda: WallScreen(hostile_state(read_only=True), rotate_s=0),
    "log": lambda: LogScreen(hostile_state(), ((states.NOW, "smoke: " + ATTACK, "red"),)),
    "alerts": lambda: AlertHistoryScreen(hostile_state()),
    "confirm": lambda: ConfirmScreen("Resume", "resume pod " + ATTACK + "?"),
    "fatal": lambda: FatalScreen("profiles/x.yaml:3: bad name\n  " + ATTACK),
    "progress": lambda: ProgressScreen("Smoke test"),
}


def drive(name: str, screen: Any) -> None:
    """A dialog driven as an operation drives it: the gateway's words as evidence."""
    if name == "progress":
        screen.step("models listed", 0.5, "failed: gateway said " + ATTACK)
        screen.finish(False, "smoke failed: " + ATTACK)


@pytest.mark.parametrize("name", list(SCREENS))
async def test_no_control_character_reaches_the_screen(name: str) -> None:
    app = ScreenHost(SCREENS[name], slot_log=["INFO ready " + ATTACK, "로그 ✅"])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        drive(name, app.top)
        await settle(pilot)
        if name == "wall":  # the slot's own view as well as the overview
            for _ in range(2):
                app.top.action_next()
                await settle(pilot)
        text = drawn(app)
        svg = app.export_screenshot()
    for where, out in (("screen", text), ("svg", svg)):
        found = sorted({hex(ord(c)) for c in CONTROL.findall(out)})
        assert not found, f"{name} {where}: {found}"
        # what an escape sequence carried is gone with it, not shown as text
        for word in ("PWNED-TITLE", "C1-TITLE", "javascript", "Y3VybCBldmlsIHwgc2g"):
            assert word not in out, (name, where, word)
    if name == "detail":  # the readable rest is kept, Korean and emoji included
        assert "tiny-main" in text and "스펙-모델 🚀" in text and "로그 ✅" in text
        assert "INFO ready here" in text
