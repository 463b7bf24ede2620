"""``t`` in the demo: the smoke test runs from the console through the demo's simulated
LiteLLM, each check appears in the progress dialog as it ends, and the outcome is audited.
``G`` shows that gateway's deployments and users, and the palette's cooldown fault reaches
the alerts (issue 34)."""

from __future__ import annotations

import json

from console.commands.tui_cmd import demo_context
from console.ui.app import make_app
from console.ui.screens.gateway import GatewayScreen
from console.ui.screens.modals import ProgressScreen
from tests.support.waits import wait_for
from tests.tui.conftest import live


async def test_t_runs_the_smoke_test_on_the_demo(demo) -> None:
    app = make_app(demo_context(demo, 1.0, stop_demo_on_exit=False))
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: live(app), 40)
        await pilot.press("t")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen))
        progress = app.screen
        assert await wait_for(pilot, lambda: progress.done, 60)
        [(_, _, out)] = [h for h in app.ctx.registry.history if h[1] == "smoke"]
        assert out.ok, out.message
        assert out.message.startswith("all passed via gateway"), out.message
        verdicts = {c["name"]: c["verdict"] for c in out.data["checks"]}
        assert verdicts["chat"] == verdicts["streaming"] == "pass"
        assert verdicts["unknown model"] == "pass"  # the demo's gateway answers 400
        # the profile's aliases, routed by the demo's gateway as litellm.yaml routes them
        assert verdicts["aliases listed"] == verdicts["aliases answer"] == "pass"
    records = [json.loads(x) for x in
               (demo.workdir / "state" / "audit.jsonl").read_text().splitlines()]
    assert [r["result"] for r in records if r["action"] == "smoke"][-2:] == ["started", "ok"]


def _screen_text(app) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(s.text for s in app.screen._compositor.render_strips())


async def test_G_shows_the_demo_gateway_and_a_cooldown_reaches_the_alerts(demo) -> None:
    app = make_app(demo_context(demo, 1.0, stop_demo_on_exit=False))
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: live(app), 40)

        def users() -> set[str]:
            gw = app.session.gateway
            return {u.name for u in gw.users} if gw is not None else set()

        # the demo's traffic through the gateway, spread over its users
        assert await wait_for(pilot, lambda: {"alice", "bob"} <= users(), 40), users()
        assert "gateway up" in app.session.gateway.headline()
        await pilot.press("G")
        assert await wait_for(pilot, lambda: isinstance(app.screen, GatewayScreen)
                              and app.screen.is_mounted)
        await pilot.pause()
        assert await wait_for(pilot, lambda: all(
            w in _screen_text(app) for w in ("FLASH", "Q27", "alice", "bob")), 20), \
            _screen_text(app)
        cool = next(f for t, _, f in demo.faults() if t == "gateway puts FLASH in cooldown")
        cool()

        def firing() -> bool:
            a = app.alerts.active.get("gw-cooldown:FLASH")
            return a is not None and a.state == "firing"

        assert await wait_for(pilot, firing, 40), sorted(app.alerts.active)
        assert await wait_for(pilot, lambda: "COOLDOWN" in _screen_text(app), 20), \
            _screen_text(app)
        await pilot.press("G")
        assert await wait_for(pilot, lambda: not isinstance(app.screen, GatewayScreen))
