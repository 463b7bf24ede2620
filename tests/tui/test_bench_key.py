"""``B`` in the demo: the benchmark of the slot under the cursor asks first, shows its
steps, keeps its record and audits it; ``c`` cancels it and nothing is kept."""

from __future__ import annotations

import json

from console.commands.tui_cmd import demo_context
from console.config.settings import BenchSettings
from console.ui.app import make_app
from console.ui.screens.modals import ConfirmScreen, ProgressScreen
from tests.support.waits import wait_for
from tests.tui.conftest import live


def _audit(demo) -> list[dict]:
    return [r for r in (json.loads(x) for x in
                        (demo.workdir / "state" / "audit.jsonl").read_text().splitlines())
            if r["action"] == "bench"]


def _records(demo) -> list:
    d = demo.workdir / "state" / "bench"
    return sorted(d.glob("*.json")) if d.is_dir() else []


async def test_B_benchmarks_the_slot_under_the_cursor(demo) -> None:
    app = make_app(demo_context(demo, 1.0, stop_demo_on_exit=False))
    before = len(_records(demo))
    async with app.run_test(size=(160, 48)) as pilot:
        # the header shows the pod's P2P (a reading the agent answered): what the record
        # says where it ran, whether or not the agent answers the benchmark's own read
        # in time (issue 48: on a loaded machine it did not, and the record said unknown)
        assert await wait_for(pilot, lambda: live(app) and app.pod.p2p_disabled is not None,
                              40)
        shown_p2p = "disabled" if app.pod.p2p_disabled else "ok"
        app.ctx.settings.bench = BenchSettings(runs=1, warmup=0, concurrency=[1],
                                               lengths=["short"], tasks=["json"],
                                               max_tokens=64, task_max_tokens=32)
        from console.ui.widgets.slots import SlotsTable

        slot = app.screen.query_one(SlotsTable).selected_slot()
        await pilot.press("B")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        question = app.screen.question
        assert f"Benchmark slot {slot} on pod {demo.pod_id}?" in question
        # through the demo's gateway, as a benchmark goes on the field's pod
        assert "3 streamed requests via gateway http://127.0.0.1:" in question
        await pilot.press("y")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen))
        progress = app.screen
        assert await wait_for(pilot, lambda: progress.done, 90)
        [(_, _, out)] = [h for h in app.ctx.registry.history if h[1] == "bench"]
        assert out.ok, out.message
        assert out.message.startswith("short-c1 ") and "% accepted" in out.message
        shown = "\n".join(t.plain for t in progress.lines)
        assert "acceptance by task type" in shown and "json" in shown and "█" in shown
    recs = _records(demo)
    assert len(recs) == before + 1
    rec = json.loads(recs[-1].read_text())
    assert rec["slot"] == slot and rec["pod"]["id"] == demo.pod_id
    assert rec["pod"]["gpu_type"] and rec["pod"]["p2p"] == shown_p2p, rec["pod"]
    assert rec["pod"]["p2p_unknown"] is None and rec["pod"]["read_at"]
    assert rec["configs"][0]["spec"]["acceptance_rate"] > 0.3  # the demo drafts well
    assert [a["result"] for a in _audit(demo)][-2:] == ["started", "ok"]
    assert _audit(demo)[-1]["arguments"] == {"slot": slot}


async def test_c_cancels_the_benchmark_and_keeps_nothing(demo) -> None:
    app = make_app(demo_context(demo, 1.0, stop_demo_on_exit=False))
    before = len(_records(demo))
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: live(app), 40)
        await pilot.press("B")  # the field's full protocol: minutes, so it is still going
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen))
        progress = app.screen
        assert await wait_for(pilot, lambda: progress.fraction is not None, 60)
        await pilot.press("c")
        assert await wait_for(pilot, lambda: progress.cancelling, 10)
        assert await wait_for(pilot, lambda: progress.done, 30), (
            progress.cancelling, [t.plain for t in progress.lines][-5:])
        assert progress.outcome is not None and not progress.outcome[0]
        assert "cancelled" in progress.outcome[1]
        assert app.ctx.registry.in_flight is None
    assert len(_records(demo)) == before
    assert [a["result"] for a in _audit(demo)][-2:] == ["started", "cancelled"]
