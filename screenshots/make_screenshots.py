"""Make the screenshots of the README and docs/ from the demo deployment, through the real
app factory.

Run:  python screenshots/make_screenshots.py [web]
Writes screenshots/{main,detail,wall,alert,action,replay}.svg (160×48 terminal), then
screenshots/web-wall.png: ``pod-console demo --web`` in real headless Chromium
(1600×900); ``web`` makes only that one.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from console.commands.tui_cmd import build_demo  # noqa: E402
from console.ui.app import make_app  # noqa: E402
from console.ui.screens.modals import ProgressScreen, RebalanceScreen  # noqa: E402

SIZE = (160, 48)


async def wait_for(pilot, cond, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        await pilot.pause(0.25)
    return False


async def main() -> int:
    # a state dir of its own: today's spend and the audit log of earlier demo runs on
    # this machine are not what the pictures are about
    os.environ["POD_CONSOLE_STATE_DIR"] = tempfile.mkdtemp(prefix="pod-console-shots-")
    demo, ctx = build_demo(seed=7, refresh_s=1.0, startup_s=2.0)
    try:
        app = make_app(ctx)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.snapshot is not None and all(
                s.figures and s.figures.generation_tps for s in app.snapshot.slots))
            await pilot.pause(25)  # let the plots fill
            app.save_screenshot(str(HERE / "main.svg"))
            await pilot.press("enter")
            await pilot.pause(3)
            app.save_screenshot(str(HERE / "detail.svg"))
            await pilot.press("escape")
            demo.kill_slot("qwen3.8-27b")
            await wait_for(pilot, lambda: any(a.key.startswith("down:")
                                              for a in app.alerts.active.values()), 30)
            await pilot.pause(1)
            app.save_screenshot(str(HERE / "alert.svg"))
            await wait_for(pilot, lambda: not any(a.key.startswith("down:")
                                                  for a in app.alerts.active.values()), 60)
            await pilot.press("b")
            await wait_for(pilot, lambda: isinstance(app.screen, RebalanceScreen), 10)
            await pilot.pause(0.5)
            app.screen.query_one("#u-FLASH").value = "0.75"
            app.screen.query_one("#u-Q27").value = "0.20"
            await pilot.pause(0.5)
            await pilot.press("ctrl+s")
            await pilot.pause(0.5)
            await pilot.press("y")
            await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen), 10)
            await pilot.pause(4)
            app.save_screenshot(str(HERE / "action.svg"))
            await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen)
                           and app.screen.done, 120)
            recorded = app.live_tape  # every poll of this run, as it was shown
        # the run replayed (``pod-console replay``'s screens), at the slot's death
        from console.session.record.replay import Replay

        replay = make_app(Replay(recorded))
        async with replay.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: replay.screen.__class__.__name__ == "MainScreen")

            def q27_down() -> bool:
                snap = replay.console_state().snapshot
                return snap is not None and any(x.health != "up" for x in snap.slots)
            for _ in range(40):  # marker by marker, to the one where Q27 died
                await pilot.press("right_square_bracket")
                await pilot.pause(0.1)
                if q27_down():
                    break
            await pilot.pause(3)
            replay.save_screenshot(str(HERE / "replay.svg"))
        wall = make_app(ctx, wall=True)
        async with wall.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: wall.snapshot is not None)
            await pilot.pause(3)
            wall.save_screenshot(str(HERE / "wall.svg"))
    finally:
        demo._stop_all()
    for name in ("main", "detail", "alert", "action", "replay", "wall"):
        print(HERE / f"{name}.svg")
    return 0


def web_wall() -> Path:
    """The demo's web wall in Chromium, once its plots have a few minutes of history."""
    from playwright.sync_api import sync_playwright

    from tests.support.browser import launch, open_wall, start_demo_web, stop_server
    from tests.support.procs import free_port

    work = Path(tempfile.mkdtemp(prefix="pod-console-web-shot-"))
    port = free_port()
    server = start_demo_web(port, work / "state", work / "server.log", "--refresh", "1")
    out = HERE / "web-wall.png"
    try:
        with sync_playwright() as pw:
            browser = launch(pw)
            wall = open_wall(browser, port, server)
            wall.wait_for(lambda t: "FLASH" in t and "% KV" in t and "alerts (" in t, 120)
            # past the plots' second drawing (a minute of history), in the overview
            wall.page.wait_for_timeout(70_000)
            wall.wait_for(lambda t: "view: overview" in t, 60)
            wall.page.wait_for_timeout(1_000)
            wall.page.screenshot(path=str(out))
            browser.close()
    finally:
        stop_server(server)
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["web"]:
        print(web_wall())
        sys.exit(0)
    code = asyncio.run(main())
    print(web_wall())
    sys.exit(code)
