"""Issue 30 #13: ``pod-console demo --fleet`` shows three pods. Before, ``F`` in the demo
said the config names no contexts. Now the demo starts three simulated pods (each its
own agent and slots, on the RunPod emulator) and a config with three contexts, and the
console is the production one on the first: ``F`` polls every context through the
fleet collector, the header says DEMO, and enter asks for the console on another pod,
which the demo opens on that pod (the same ``demo_context`` as its first console).
Run it under ``flock /tmp/heavy.lock``: three agents and four slots."""

from __future__ import annotations

from pathlib import Path

from console.commands.tui_cmd import build_demo, demo_context
from console.demo.deployment import FLEET_CONTEXTS
from tests.support.waits import wait_for
from tests.tui.conftest import live


async def test_demo_fleet_shows_three_pods_and_opens_another(tmp_path: Path) -> None:
    from console.session.view import SwitchRequest
    from console.ui.app import make_app
    from console.ui.screens.fleet import FleetScreen

    demo, ctx = build_demo(workdir=tmp_path / "demo", startup_s=1.0, fleet=True)
    try:
        assert list(demo.contexts) == list(FLEET_CONTEXTS)
        assert len(set(demo.contexts.values())) == 3
        assert ctx.config is not None and ctx.settings.context == "east"
        assert ctx.settings.demo and ctx.settings.spend_path is None
        app = make_app(ctx)
        async with app.run_test(size=(200, 50)) as pilot:
            assert await wait_for(pilot, lambda: live(app), 60)
            header = str(app.screen.query_one("PodHeader").render())
            assert "DEMO" in header and "east" in header, header
            await pilot.press("F")
            assert await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen))
            screen = app.screen
            assert await wait_for(pilot, lambda: screen.state.fleet is not None and all(
                r.status == "RUNNING" and r.slots and r.slots_up == r.slots
                for r in screen.state.fleet.rows), 60)
            rows = screen.state.fleet.rows
            assert [(r.context, r.pod_id) for r in rows] == list(demo.contexts.items())
            assert len({r.gpu_name for r in rows}) == 3  # three profiles, three GPU types
            shown = app.export_screenshot().replace("&#160;", " ")
            assert "DEMO" in shown and all(p in shown for p in demo.contexts.values())
            await pilot.press("down")
            await pilot.press("enter")
            assert await wait_for(pilot, lambda: app.return_value is not None, 10)
        assert app.return_value == SwitchRequest("west")
        # what ``pod-console demo`` does with it: the console on west's pod
        west = demo_context(demo, stop_demo_on_exit=False, context="west")
        assert west.settings.context == "west" and west.settings.demo
        assert west.settings.pod.machine_id == demo.contexts["west"]
        app = make_app(west)
        async with app.run_test(size=(200, 50)) as pilot:
            assert await wait_for(pilot, lambda: live(app), 60)
            assert app.pod is not None and app.pod.pod_id == demo.contexts["west"]
            # its palette's demo faults are west's: its slots, its engines, its GPUs (they
            # all went to the first pod's, or the newest's, whichever console offered them)
            west_pod = demo.contexts["west"]
            offered = {c.title: c.callback for c in app.get_system_commands(app.screen)
                       if c.title.startswith("Demo fault: ")}
            slots = {t.split()[3] for t in offered if t.endswith(" dies")}
            assert slots == set(west.profile.slots), (slots, offered)
            assert not any("gateway" in t for t in offered)  # LiteLLM fronts east's slots
            for title in ("traffic stops", "GPU 0 overheats"):
                await offered[f"Demo fault: {title}"]()
            west_faults, east_faults = demo.pod_faults[west_pod], demo.faults_dir
            assert await wait_for(pilot, lambda: (west_faults / "quiet").exists() and (
                demo.gpu_faults_dir(west_pod) / "hot-0").exists(), 10)
            assert not (east_faults / "quiet").exists()
            assert not any((demo.gpu_faults_dir(p) / "hot-0").exists()
                           for p in demo.contexts.values() if p != west_pod)
    finally:
        demo._stop_all()
