"""One dangerous operation at a time, refused at the sender, and the one in flight is on
screen until it ends."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from console.operations.audit import AuditLog
from console.operations.registry import OperationRegistry, Outcome
from console.operations.specs import SPECS
from console.ui.screens.main import OPERATION_BINDINGS
from console.ui.widgets.header import PodHeader
from tests.support.static_app import build
from tests.support.waits import wait_for


def test_every_operation_key_is_written_once_in_the_specs() -> None:
    keyed = [s for s in SPECS.values() if s.dangerous or s.audited]  # refresh is common
    assert [(b.key, b.id) for b in OPERATION_BINDINGS] == [(s.key, s.id) for s in keyed]
    assert len({b.key for b in OPERATION_BINDINGS}) == len(OPERATION_BINDINGS)


async def test_a_second_dangerous_operation_is_refused_while_one_runs(tmp_path: Path) -> None:
    reg = OperationRegistry(AuditLog(tmp_path / "audit.jsonl"))
    gate = asyncio.Event()
    ran: list[str] = []

    def handler(name: str):
        async def run(args, progress) -> Outcome:
            ran.append(name)
            await gate.wait()
            return Outcome(True, "done")
        return run

    for op in ("fallback", "rebalance"):
        reg.register(SPECS[op], handler(op))
    first = asyncio.create_task(reg.invoke("fallback"))
    # until it has started: its audit record is fsynced in a thread first, which took
    # more than 1000 turns of the loop on a busy disk (a condition with a generous limit)
    deadline = time.monotonic() + 30.0
    while reg.in_flight is None and time.monotonic() < deadline:
        await asyncio.sleep(0)
    assert reg.in_flight == "fallback"
    second = await reg.invoke("rebalance")
    assert second.state == "refused" and "still running" in second.message
    gate.set()
    assert (await first).ok and reg.in_flight is None and ran == ["fallback"]


async def test_the_operation_in_flight_is_in_the_header(tmp_path: Path) -> None:
    app = build(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.snapshot is not None, 20)
        app.ctx.registry.in_flight = "fallback"
        app.refresh_screens()

        def header() -> str:
            return str(app.screen.query_one(PodHeader).render())

        assert await wait_for(pilot, lambda: "Fallback provisioning running" in header(), 10)
        await pilot.press("b")  # another one: refused before any question is asked
        assert await wait_for(pilot, lambda: any(
            "not now" in t and "Fallback provisioning" in t for _, t, _ in app.log_lines), 10)
        assert app.screen.__class__.__name__ == "MainScreen"  # no confirmation opened
        app.ctx.registry.in_flight = None
        app.refresh_screens()
        assert await wait_for(pilot, lambda: "running" not in header(), 10)


async def test_pods_an_interrupted_run_left_are_an_alert_from_the_start(tmp_path: Path) -> None:
    from console.operations.ledger import Ledger

    Ledger(tmp_path / "pods.jsonl").record("create-requested", name="pod-console-x-abc123")
    Ledger(tmp_path / "pods.jsonl").record("created", name="pod-console-x-abc123",
                                           pod="emu0042", cost=4.18)
    app = build(tmp_path)  # its state directory is tmp_path
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: "ledger" in app.alerts.active, 20)
        alert = app.alerts.active["ledger"]
        assert alert.severity == "crit" and "emu0042" in alert.detail
        assert "pod-console down" in alert.detail


async def test_a_bring_up_in_progress_elsewhere_is_no_leftover_alert(tmp_path: Path) -> None:
    """A cron ``up`` (another process, holding the state directory's lock) is bringing
    its pod up: its open ledger entry is not a CRIT telling the operator to press f."""
    import subprocess
    import sys

    from console.operations.ledger import Ledger
    from tests.conftest import REPO

    Ledger(tmp_path / "pods.jsonl").record("create-requested", name="pod-console-x-abc123")
    Ledger(tmp_path / "pods.jsonl").record("created", name="pod-console-x-abc123",
                                           pod="emu0042", cost=4.18)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from console.operations.ledger import exclusive\n"
         "with exclusive(Path(sys.argv[1]), 'pod-console up'):\n"
         "    print('held', flush=True); time.sleep(120)", str(tmp_path)],
        cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        app = build(tmp_path)
        async with app.run_test(size=(160, 48)) as pilot:
            assert await wait_for(pilot, lambda: any(
                "in progress" in t and "pod-console up" in t for _, t, _ in app.log_lines),
                20)
            assert "ledger" not in app.alerts.active
    finally:
        holder.kill()
        holder.wait(30)
