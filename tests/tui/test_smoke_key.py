"""``t`` in the demo: the smoke test runs from the console, each check appears in the
progress dialog as it ends, and the outcome is audited."""

from __future__ import annotations

import json

from console.commands.tui_cmd import demo_context
from console.ui.app import make_app
from console.ui.screens.modals import ProgressScreen
from tests.tui.conftest import live, wait_for


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
        assert out.message.startswith("all passed via direct")
        verdicts = {c["name"]: c["verdict"] for c in out.data["checks"]}
        assert verdicts["chat"] == verdicts["streaming"] == "pass"
        assert verdicts["unknown model"] == "pass"  # the demo's vLLM answers 404
        assert verdicts["aliases listed"] == "skipped"  # no gateway in the demo
    records = [json.loads(x) for x in
               (demo.workdir / "state" / "audit.jsonl").read_text().splitlines()]
    assert [r["result"] for r in records if r["action"] == "smoke"][-2:] == ["started", "ok"]
