"""Issue 30 #1's stress: palette commands, operation keys and demo faults fired at the
live demo with random delays (0–1.5 s) under CPU load. The console must stay alive,
never blank, and answer keys at the end; every failure it survived is listed.

    python tools/palette_stress.py                      # 5 minutes, three times, load 2
    python tools/palette_stress.py --seconds 60 --runs 1 --seed 7 --load 1

Exit status 0 when every run passed. ``tests/tui/test_palette_stress.py`` runs a
bounded (60 s, seeded) version of the same function in the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

KEYS = ["w", "r", "f", "h", "b", "t", "a", "L", "g", "A", "escape", "escape", "y", "n",
        "1", "2", "s", "enter", "down", "up", "c", "question_mark", "ctrl+r", "plus",
        "minus"]
"""Operation keys and the keys their dialogs take (``q`` is left out: it quits)."""
PALETTE = ["Refresh now", "Help: keys", "Watchdog", "Resume pod", "Fallback provisioning",
           "Host checks", "Smoke test", "Acknowledge alerts", "Rebalance gpu_util"]
"""Palette commands besides the demo's faults (all of those are fired)."""


class Result:
    """One run's counts and verdicts (a plain class: the script also loads outside
    ``sys.modules``, where a dataclass cannot be made)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.actions = 0
        self.palette = 0
        self.faults = 0
        self.alive = False
        self.answered_keys = False
        self.main_screen_kept = False
        self.crash: str | None = None
        self.survived: list[str] = []

    @property
    def ok(self) -> bool:
        return self.alive and self.answered_keys and self.main_screen_kept and not self.crash


LATE = 6.0
"""How much longer than asked a run may go on to fire what ``at_least`` asks for."""


def _burners(n: int) -> list[subprocess.Popen[bytes]]:
    """CPU load: ``n`` busy processes (stopped by pid afterwards)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                             stdin=subprocess.DEVNULL) for _ in range(n)]


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGKILL)
        p.wait(10)


async def stress(seconds: float, seed: int, workdir: Path, load: int = 2,
                 size: tuple[int, int] = (160, 48), say: Any = print,
                 at_least: tuple[int, int] = (0, 0)) -> Result:
    """``seconds`` of random keys; then on, up to ``LATE`` times as long, until at least
    ``at_least`` = (palette commands, demo faults) were fired: a loaded machine answers
    fewer keys in the same time, and the run must still do what it is there to do."""
    from textual.command import CommandPalette

    from console.commands.tui_cmd import demo_context
    from console.demo.deployment import DemoDeployment
    from console.ui.app import make_app
    from console.ui.screens.log import LogScreen
    from console.ui.screens.main import MainScreen

    rng = random.Random(seed)
    result = Result(seconds)
    demo = DemoDeployment(workdir=workdir, seed=seed, startup_s=1.0, clock_speed=60.0)
    burners: list[subprocess.Popen[bytes]] = []
    try:
        demo.start()
        ctx = demo_context(demo, refresh_s=1.0, stop_demo_on_exit=False)
        app = make_app(ctx)
        fault_titles = [f"Demo fault: {t}" for t, _, _ in demo.faults()]
        titles = PALETTE + fault_titles
        async with app.run_test(size=size) as pilot:
            deadline = time.monotonic() + 120
            while not (app.ready and isinstance(app.screen, MainScreen)):
                assert time.monotonic() < deadline, "the console did not start"
                await pilot.pause(0.1)
            burners = _burners(load)

            async def pause() -> None:
                await asyncio.sleep(rng.uniform(0.0, 1.5))

            start = time.monotonic()
            end, cap = start + seconds, start + seconds * LATE

            def more() -> bool:
                now = time.monotonic()
                short = result.palette < at_least[0] or result.faults < at_least[1]
                return now < end or (short and now < cap)

            while more():
                if app.exiting or app.crash is not None:
                    break
                result.actions += 1
                overtime = time.monotonic() >= end  # only there to reach `at_least`
                if rng.random() < 0.4 or (overtime and result.palette < at_least[0]):
                    result.palette += 1
                    title = rng.choice(fault_titles if overtime and result.faults < at_least[1]
                                       else titles)
                    result.faults += title in fault_titles
                    await pilot.press("ctrl+p")
                    await pause()
                    if isinstance(app.screen, CommandPalette):
                        await pilot.press(*title)
                        await pause()
                        await pilot.press("enter")
                        if rng.random() < 0.3:  # an impatient second Enter
                            await asyncio.sleep(rng.uniform(0.0, 0.05))
                            await pilot.press(rng.choice(["enter", "down", "enter"]))
                else:
                    await pilot.press(rng.choice(KEYS))
                await pause()
            _stop(burners)
            burners = []
            result.alive = not app.exiting and app.crash is None
            if result.alive:
                for _ in range(12):  # back to the main screen, whatever is open
                    if isinstance(app.screen, MainScreen):
                        break
                    await pilot.press("escape")
                    await pilot.pause(0.3)
                result.main_screen_kept = isinstance(app.screen, MainScreen)
                await pilot.press("L")
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and not isinstance(app.screen, LogScreen):
                    await pilot.pause(0.1)
                result.answered_keys = isinstance(app.screen, LogScreen)
                await pilot.press("escape")
            result.crash = app.crash
            result.survived = [f"{where}: {reason}"
                               for _, where, reason in app.error_boundary.failures]
    finally:
        _stop(burners)
        await asyncio.to_thread(demo._stop_all)
    say(json.dumps({"seed": seed, "ok": result.ok, **{
        k: v for k, v in result.__dict__.items() if k != "crash"},
        "crash": (result.crash or "").strip().splitlines()[-1:]}, indent=1))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1, help="the first run's seed (+1 each run)")
    ap.add_argument("--load", type=int, default=2, help="busy processes meanwhile")
    args = ap.parse_args(argv)
    passed = 0
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="palette-stress-") as tmp:
            t0 = time.monotonic()
            r = asyncio.run(stress(args.seconds, args.seed + i, Path(tmp), args.load))
            print(f"run {i + 1}/{args.runs}: {'PASS' if r.ok else 'FAIL'} in "
                  f"{time.monotonic() - t0:.0f} s, {r.actions} actions "
                  f"({r.palette} palette, {r.faults} faults), "
                  f"{len(r.survived)} failures survived", flush=True)
            passed += r.ok
    print(f"{passed}/{args.runs} runs passed")
    return 0 if passed == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
