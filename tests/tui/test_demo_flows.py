"""Demo flows end to end: faults, rebalance, stop, resume, sold out, fallback.

Runs in file order on one demo deployment; each test leaves it running.
"""

from __future__ import annotations

from textual.widgets import Static

from console.commands.tui_cmd import demo_context
from console.ui.app import make_app
from console.ui.screens.modals import ConfirmScreen, ProgressScreen, RebalanceScreen
from console.ui.widgets.slots import SlotsTable
from tests.support.waits import wait_for
from tests.tui.conftest import live


def _alerts(app) -> set[str]:
    return set(app.alerts.active)


async def test_slot_dies_alert_raised_then_cleared(demo) -> None:
    app = make_app(demo_context(demo, 1.0, stop_demo_on_exit=False))
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: live(app), 40)
        demo.kill_slot("qwen3.8-27b")
        # down, or starting once the agent is bringing it back (START is not DOWN)
        assert await wait_for(pilot, lambda: {"down:Q27", "starting:Q27"} & _alerts(app), 20)
        stale = app.snapshot.slot("Q27")
        assert stale.stale_since is not None and stale.figures is not None
        # one dead slot is its own row's STALE, not the header's (issue 30, finding 6)
        assert "STALE since" not in (app.stale_text() or "")
        assert await wait_for(pilot, lambda: not {"down:Q27", "starting:Q27"} & _alerts(app),
                              40)
        assert app.snapshot.slot("Q27").health == "up"
        fired = [e for e in app.alerts.history if e.title == "Q27 down"]
        # a down alert that fired is resolved in the history, never left standing
        assert [e.kind for e in fired] in ([], ["firing", "resolved"])
        await pilot.press("ctrl+r")  # pod state is polled every 10 s; ask now
        # the first pod poll may have come before the agent answered: no slots yet
        # (a starved machine can time a pod poll out: the limit is generous, and a miss
        # says what the console last read and why)
        assert await wait_for(
            pilot, lambda: app.pod.agent_slots.get("Q27", {}).get("restarts", 0) >= 1, 40), (
            app.pod.agent_slots.get("Q27"), app.pod.agent_error, app.poll_failure)


async def test_a_hung_slot_is_stalled_and_R_restarts_it_through_the_agent(demo) -> None:
    ctx = demo_context(demo, 1.0, stop_demo_on_exit=False)
    app = make_app(ctx)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: live(app), 40)

        def busy() -> bool:
            f = app.snapshot.slot("FLASH").figures
            return bool(f and (f.value("running") or 0) >= 1)

        # requests in flight when it hangs (a fresh engine has none until its first ones)
        assert await wait_for(pilot, busy, 30)
        before = app.pod.agent_slots.get("FLASH")
        hang = next(f for t, _, f in demo.faults() if t == "slot FLASH hangs")
        hang()

        def stalled() -> bool:
            a = app.alerts.active.get("stall:FLASH")
            return a is not None and a.state == "firing"

        def seen() -> str:
            s = app.snapshot.slot("FLASH")
            f = s.figures
            return (f"{s.health} stale={s.stale_since} src={s.source} err={s.error} "
                    + str(f and {k: f.value(k) for k in ("running", "generation_total",
                                                         "prompt_total", "kv_cache_usage")})
                    + f" after={app.ctx.settings.alerts.stall_after_s} polls={app.polls} "
                    f"agent before={before} now={app.pod.agent_slots.get('FLASH')} "
                    f"faults={sorted(p.name for p in demo.faults_dir.iterdir())}")

        assert await wait_for(pilot, stalled, 30), seen()
        assert app.snapshot.slot("FLASH").health == "up"  # /health: 200 all along
        table = app.screen.query_one(SlotsTable)
        assert "STALLED" in str(table.get_row("FLASH"))
        assert "stuck since" in app.alerts.active["stall:FLASH"].title
        table.move_cursor(table.slots.index("FLASH"))
        from_restart = len(app.alerts.history)
        await pilot.press("R")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen)
                              and app.screen.done, 90)
        _, action, out = ctx.registry.history[-1]
        assert action == "restart" and out.ok, out.message
        assert [(r["action"], r["arguments"], r["result"])
                for r in ctx.registry.audit.records() if r["action"] == "restart"] == [
            ("restart", {"slot": "FLASH"}, "started"), ("restart", {"slot": "FLASH"}, "ok")]
        await pilot.press("escape")
        # a new engine: it decodes again, and the stall clears
        # (the row is drawn from the poll after the one that cleared the alert: waited
        # for too, not read at the instant the alert went)
        assert await wait_for(pilot, lambda: "stall:FLASH" not in _alerts(app)
                              and live(app)
                              and "STALLED" not in str(table.get_row("FLASH")), 60), \
            str(table.get_row("FLASH"))
        # the restart's own effects (the slot down, its probe, the gateway routing around
        # it) raised no WARN or CRIT (issue 42: "✓ Q27 restarted" then a CRIT "Q27 up but
        # completions fail" and two gateway WARNs)
        await pilot.press("ctrl+r")
        assert await wait_for(pilot, lambda: live(app), 30)
        loud = [(e.severity, e.title) for e in list(app.alerts.history)[from_restart:]
                if e.kind == "firing" and e.severity != "info"]
        assert loud == [], loud


async def test_rebalance_applies_and_rewrites_the_profile(demo) -> None:
    ctx = demo_context(demo, 1.0, stop_demo_on_exit=False)
    app = make_app(ctx)
    prof = demo.profiles_dir / "10-rtx6000-2x.yaml"
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: live(app), 40)
        await pilot.press("b")
        assert await wait_for(pilot, lambda: isinstance(app.screen, RebalanceScreen))
        app.screen.query_one("#u-FLASH").value = "0.80"  # 0.80 + 0.19 > 0.95
        assert await wait_for(pilot, lambda: app.screen.query_one("#apply").disabled, 10)
        app.screen.query_one("#u-FLASH").value = "0.75"
        app.screen.query_one("#u-Q27").value = "0.20"
        assert await wait_for(pilot, lambda: not app.screen.query_one("#apply").disabled, 10)
        await pilot.press("ctrl+s")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen)
                              and app.screen.done, 90)
        _, action, out = ctx.registry.history[-1]
        assert action == "rebalance" and out.ok, out.message
        assert "gpu_util: 0.75" in prof.read_text() and "gpu_util: 0.2" in prof.read_text()
        assert "# DEMO copy" in prof.read_text()  # comments kept
        backups = list((demo.workdir / "state" / "profile-backups").glob("10-rtx6000-2x*"))
        assert backups and "gpu_util: 0.76" in backups[0].read_text()


async def test_rebalance_to_a_split_that_cannot_start_rolls_back(demo) -> None:
    ctx = demo_context(demo, 1.0, stop_demo_on_exit=False)
    app = make_app(ctx)
    prof = demo.profiles_dir / "10-rtx6000-2x.yaml"
    text_before = prof.read_text()
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: live(app), 40)
        # FLASH at 0.74 (its profile minimum): 239k − 2×57k = 125k KV tokens, less than one
        # 128K request, so the simulated engine refuses to start, like the field's 27B at 0.15
        app.start_operation("rebalance", {"set": {"FLASH": 0.74, "Q27": 0.21}})
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen)
                              and app.screen.done, 120)
        _, _, out = ctx.registry.history[-1]
        assert out.state == "rolled_back" and "FLASH" in out.message, out.message
        assert prof.read_text() == text_before  # the profile changes only after success
        # a failed operation is an event of the history, not a standing alert
        assert any(e.kind == "failed" and e.title == "Rebalance gpu_util failed"
                   for e in app.alerts.history)
        assert not any(k.startswith("action:") for k in _alerts(app))


async def test_stop_now_then_resume(demo) -> None:
    ctx = demo_context(demo, 1.0, stop_demo_on_exit=False)
    app = make_app(ctx)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: live(app), 40)
        app.start_operation("watchdog", {"cmd": "stop-now"})
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        # what stops with it, said first (issue 47): the slots, the money, the volume
        asked = " ".join(" ".join(str(w.render()) for w in app.screen.query(Static)).split())
        assert "2 slots (FLASH, Q27) stop serving" in asked, asked
        assert "Billing of $" in asked and "GB volume" in asked, asked
        await pilot.press("y")
        assert await wait_for(pilot, lambda: demo.state.pods[demo.pod_id]["status"] == "EXITED",
                              60)
        assert await wait_for(pilot, lambda: app.pod and app.pod.status == "EXITED", 30)
        # a stopped pod is one line, not a CRIT per slot
        assert await wait_for(pilot, lambda: "stopped" in _alerts(app), 30)
        assert "down:FLASH" not in _alerts(app)
        await pilot.press("escape")
        app.start_operation("resume")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen)
                              and app.screen.done, 120)
        _, action, out = ctx.registry.history[-1]
        assert action == "resume" and out.ok, out.message
        assert await wait_for(pilot, lambda: live(app) and app.pod.status == "RUNNING", 40)


async def test_p2p_broken_host_check_reports_hung(demo) -> None:
    ctx = demo_context(demo, 1.0, stop_demo_on_exit=False)
    app = make_app(ctx)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: live(app), 40)
        demo.break_p2p()
        app.start_operation("host_checks")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen)
                              and app.screen.done, 60)
        _, action, out = ctx.registry.history[-1]
        assert action == "host_checks" and not out.ok and "P2P probe HUNG" in out.message
        await pilot.press("escape")
        await pilot.press("ctrl+r")
        assert await wait_for(pilot, lambda: app.pod.p2p_disabled is True
                              and "p2p" in app.alerts.active, 20)


async def test_sold_out_fallback_fails_loudly_and_leaves_no_pod(demo) -> None:
    ctx = demo_context(demo, 1.0, stop_demo_on_exit=False)
    ctx.registry.handlers  # noqa: B018 - the provisioner is inside the fallback handler
    app = make_app(ctx)
    demo.sell_out()
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            assert await wait_for(pilot, lambda: live(app), 40)
            running_before = {p["id"] for p in demo.state.running_pods()}
            app.start_operation("fallback")
            assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            assert await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen)
                                  and app.screen.done, 120)
            _, action, out = ctx.registry.history[-1]
            assert action == "fallback" and not out.ok
            assert "no capacity after 3 rounds" in out.message
            assert any(e.kind == "failed" and e.title == "Fallback provisioning failed"
                       for e in app.alerts.history)
            assert {p["id"] for p in demo.state.running_pods()} == running_before
    finally:
        demo.restock()
