"""Operations that spend money, left the ways people leave them: Escape, quitting, a wall.

A demo of its own (slots take 8 s to start, so a fallback is still bringing its
pod up when we leave); the emulator says afterwards which pods bill.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.commands.tui_cmd import demo_context
from console.demo.deployment import DemoDeployment
from console.ui.app import make_app
from console.ui.screens.modals import ConfirmScreen, ProgressScreen
from tests.support.waits import wait_for
from tests.tui.conftest import live


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoDeployment]:
    d = DemoDeployment(workdir=tmp_path_factory.mktemp("demo-unhappy"), seed=11,
                       startup_s=8.0, rate=1.0)
    d.start()
    try:
        yield d
    finally:
        d._stop_all()


def _pods(demo: DemoDeployment) -> dict[str, str]:
    with demo.state.lock:
        return {pid: p["status"] for pid, p in demo.state.pods.items()}


async def _confirmed_fallback(app, pilot) -> None:
    """Live numbers, then ``f`` and ``y``: a fallback is on its way."""
    assert await wait_for(pilot, lambda: live(app), 60)
    app.start_operation("fallback")
    assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
    await pilot.press("y")


def _fallback_results(ctx) -> list[str]:
    return [r["result"] for r in ctx.registry.audit.records() if r["action"] == "fallback"]


async def test_escape_hides_the_dialog_and_the_fallback_finishes(demo) -> None:
    ctx = demo_context(demo, 1.0, stop_demo_on_exit=False)
    app = make_app(ctx)
    before = set(_pods(demo))
    async with app.run_test(size=(120, 40)) as pilot:
        await _confirmed_fallback(app, pilot)
        assert await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen))
        await pilot.press("escape")  # hides the dialog; the operation goes on
        assert await wait_for(pilot, lambda: not isinstance(app.screen, ProgressScreen))
        assert await wait_for(pilot, lambda: any(a == "fallback" for _, a, _ in
                                                 ctx.registry.history), 180)
        _, _, out = ctx.registry.history[-1]
        assert out.ok, out.message
    new = {pid: st for pid, st in _pods(demo).items() if pid not in before}
    kept = out.data["pod"]
    assert new[kept] == "RUNNING"
    assert all(st == "TERMINATED" for pid, st in new.items() if pid != kept), new
    assert _fallback_results(ctx)[-2:] == ["started", "ok"]


async def test_quitting_mid_fallback_terminates_the_new_pod(demo) -> None:
    ctx = demo_context(demo, 1.0, stop_demo_on_exit=False)
    app = make_app(ctx)
    before = set(_pods(demo))
    async with app.run_test(size=(120, 40)) as pilot:
        await _confirmed_fallback(app, pilot)
        assert await wait_for(pilot, lambda: set(_pods(demo)) - before, 60)
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: not app.is_running, 120)
    new = {pid: st for pid, st in _pods(demo).items() if pid not in before}
    assert new and all(st == "TERMINATED" for st in new.values()), new
    assert _fallback_results(ctx)[-1] == "cancelled"


async def test_the_wall_offers_and_runs_no_demo_fault(demo) -> None:
    ctx = demo_context(demo, 1.0, wall=True, stop_demo_on_exit=False)
    app = make_app(ctx, wall=True)
    ran: list[int] = []
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: app.ctx is not None, 60)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert not [t for t in titles if "Demo fault" in t]
        app.palette_commands.demo_fault(lambda: ran.append(1), "kill a slot")
        assert await wait_for(pilot, lambda: any("refused: read-only" in text
                                                 for _, text, _ in app.log_lines), 10)
    assert ran == []
    assert any("refused: read-only" in text for _, text, _ in app.log_lines)


def test_the_demo_keeps_secrets_and_its_records(demo, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("POD_CONSOLE_WEBHOOK_URL", "https://hooks.example/secret-token")
    monkeypatch.setenv("SLACK_WEBHOOK", "https://hooks.example/other")
    monkeypatch.setenv("POD_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    env = demo.agent_env("pod1", tmp_path / "home", "NVIDIA H100", "/x")
    assert not [k for k, v in env.items() if "hooks.example" in v], env
    d = DemoDeployment(seed=1)  # its own temporary workdir, as `pod-console demo` has
    try:
        assert d.state_dir() == tmp_path / "state"
        assert d.provision_config().ledger == d.workdir / "pods.jsonl"
        monkeypatch.delenv("POD_CONSOLE_STATE_DIR")
        assert str(d.state_dir()).endswith(os.path.join("pod-console", "demo"))
        assert not str(d.state_dir()).startswith(str(d.workdir))  # outlives the demo
    finally:
        d._stop_all()
