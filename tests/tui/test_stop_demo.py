"""The stop policy in the demo, on its accelerated pod clock (``--clock-speed``): the
palette stops the traffic, the idle countdown and its warning reach the header and the
alerts, ``w`` extends through the dialog, and when the extension ends the pod's own
watchdog stops the pod for idleness — the emulated RunPod sees it stop."""

from __future__ import annotations

import json
import time

import pytest

from console.commands.tui_cmd import build_demo
from console.ui.app import make_app
from console.ui.screens.modals import ConfirmScreen, WatchdogScreen
from console.ui.widgets.header import stop_text
from tests.support.waits import wait_for
from tests.tui.conftest import PATIENCE, live, why_not_live

SPEED = 60.0  # the idle limit (43 min) is 43 s here, the warning 38 s ahead


@pytest.fixture
def fast_demo(tmp_path):
    demo, ctx = build_demo(seed=3, refresh_s=1.0, workdir=tmp_path / "demo", startup_s=1.0,
                           clock_speed=SPEED)
    try:
        yield demo, ctx
    finally:
        demo._stop_all()


async def test_warning_extend_then_idle_stop(fast_demo) -> None:
    demo, ctx = fast_demo
    ctx.on_exit = [f for f in ctx.on_exit if f != demo.stop]
    app = make_app(ctx)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: live(app), 40), why_not_live(app)

        async def poll_until(cond, timeout: float) -> bool:
            deadline = time.monotonic() + timeout * PATIENCE
            while time.monotonic() < deadline:
                if cond():
                    return True
                app.action_refresh_now()
                await pilot.pause(0.5)
            return bool(cond())

        def plan():
            return app.pod.stop_plan if app.pod is not None else None

        assert await poll_until(lambda: plan() is not None, 30)
        assert plan().clock_speed == SPEED and plan().idle_after_s == 43 * 60
        assert f"pod clock ×{SPEED:g}" in stop_text(app.pod, time.time()).plain
        fn = next(f for t, _, f in demo.faults() if t == "traffic stops")
        app.palette_commands.demo_fault(fn, "traffic stops")

        def warned() -> bool:
            return any(a.key == "stop-soon" and "(idle)" in a.title
                       for a in app.alerts.firing())

        assert await poll_until(warned, 90), [a.title for a in app.alerts.firing()]
        assert "(idle)" in stop_text(app.pod, time.time()).plain
        # w → "until" field → +1h (pod time: a real minute) → confirm. Longer than the
        # warning's window: an idle pod extended by less is warned again at once (it
        # passed at +10m only because the pod then stopped inside this test's wait)
        await pilot.press("w")
        assert await wait_for(pilot, lambda: isinstance(app.screen, WatchdogScreen))
        await pilot.press("t")
        await pilot.press(*"+1h")
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "Keep pod" in str(app.screen.question) and "+1h" in app.screen.question
        await pilot.press("y")
        assert await poll_until(lambda: plan() is not None and plan().extension_until, 30)
        assert not warned() or await poll_until(lambda: not warned(), 10)
        # the extension ends; the pod has been idle all along: its watchdog stops it
        pod_id = demo.pod_id
        assert await poll_until(
            lambda: demo.state.pods[pod_id]["status"] == "EXITED", 60), \
            demo.state.pods[pod_id]["status"]
    agent_audit = [json.loads(x) for f in (demo.pod_home(pod_id) / "agent").rglob("audit*")
                   for x in f.read_text().splitlines()]
    ops = [(a["op"], a.get("reason")) for a in agent_audit
           if a["op"] in ("stop-warning", "extend", "watchdog-stop")]
    assert ("stop-warning", "idle") in ops and ops[-1] == ("watchdog-stop", "idle"), ops
    assert ops.index(("stop-warning", "idle")) < [o for o, _ in ops].index("extend")
    console_audit = [json.loads(x) for x in
                     (demo.workdir / "state" / "audit.jsonl").read_text().splitlines()]
    ext = [r for r in console_audit if r["action"] == "watchdog"
           and r["arguments"].get("cmd") == "extend"]
    assert [r["result"] for r in ext][-2:] == ["started", "ok"]
