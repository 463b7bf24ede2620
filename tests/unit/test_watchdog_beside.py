"""After a resume (issue 42): ``w`` during the resume was refused ("not now — Resume pod is
still running") although docs/keys-and-screens.md says ``w`` works from a running
operation's dialog; ``w 1 y`` right after the resume failed with "the supervisor is not
running (No such file or directory)" and no next step. Now ``w`` runs beside another
operation (never two of itself), and a supervisor that is not running yet is asked again for
a few seconds, then the answer says the agent is still starting and what to do.

The real flow (``operation_flow.run_operation``), the real registry and the real
watchdog handler; the agent answers as ``pod-agent watchdog`` does through SSH."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from console.model import fmt
from console.model.snapshot import PodSnapshot
from console.operations.audit import AuditLog
from console.operations.operation import Operation, OperationDeps
from console.operations.ops import resume, watchdog
from console.operations.registry import OperationRegistry, Outcome
from console.sources.remote import AgentResult
from console.ui.operation_flow import run_operation
from tests.support.waits import LIMIT_S
from tests.unit.test_operations_modules import FakeHost, _facts

NOT_RUNNING = {"kind": "error", "message": "the supervisor is not running (No such file or "
               "directory)", "supervisor": "not running"}
EXTENDED = {"kind": "result", "extension": {"until_iso": "2026-11-18T19:00:00+09:00",
                                            "by": "ana"},
            "next_stop": "2026-11-18T19:00:00+09:00", "next_stop_reason": "extension ends"}


class Agent:
    """The pod agent through SSH: not running for the first ``starting`` calls."""

    configured = True

    def __init__(self, starting: int) -> None:
        self.starting = starting
        self.calls: list[list[str]] = []

    async def request(self, req: Any, on_event: Any = None) -> AgentResult:
        self.calls.append(req.argv())
        if len(self.calls) <= self.starting:
            return AgentResult(2, NOT_RUNNING)
        return AgentResult(0, EXTENDED)


def registry(tmp_path: Path, agent: Agent) -> tuple[OperationRegistry, asyncio.Event]:
    reg = OperationRegistry(AuditLog(tmp_path / "audit.jsonl"))
    go = asyncio.Event()

    async def resuming(args: dict[str, Any], progress: Any) -> Outcome:
        await go.wait()
        return Outcome(True, "pod emu1 up")

    reg.register(resume.SPEC, resuming)
    deps = OperationDeps(agent=agent, refresh=lambda: True,  # type: ignore[arg-type]
                         acknowledge=lambda: None)
    reg.register(watchdog.SPEC, Operation.of(watchdog).bound(deps))
    return reg, go


async def started(reg: OperationRegistry, op: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LIMIT_S
    while reg.in_flight != op:
        assert loop.time() < deadline, f"{op} never started"
        await asyncio.sleep(0.01)


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watchdog, "STARTING_STEP_S", 0.01, raising=False)


async def test_w_extends_while_a_resume_runs(tmp_path: Path, quick: None) -> None:
    agent = Agent(starting=2)  # the new run's agent: its socket comes a moment later
    reg, go = registry(tmp_path, agent)
    host = FakeHost(reg, _facts(tmp_path, PodSnapshot(pod_id="emu1", status="EXITED")))
    host.ready.set()
    resuming = asyncio.ensure_future(run_operation(host, "resume", {}))
    await started(reg, "resume")
    assert not resuming.done(), host.notes
    out = await run_operation(host, "watchdog", {"cmd": "extend", "until": "+1h",
                                                 "by": "ana"})
    assert out is not None and out.ok, host.notes
    until = fmt.when_text("2026-11-18T19:00:00+09:00")  # the viewer's zone, never raw ISO
    assert f"pod kept until {until} by ana" in out.message and "T19:00" not in out.message
    assert len(agent.calls) == 3  # asked again while the supervisor started
    assert not any("not now" in n for n in host.notes), host.notes
    assert reg.in_flight == "resume"  # the resume goes on, untouched
    go.set()
    out = await resuming
    assert out is not None and out.ok
    # one of itself at a time, still
    assert reg.in_flight is None and reg.beside == set()


async def test_a_supervisor_still_starting_says_so_and_what_to_do(
        tmp_path: Path, quick: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watchdog, "STARTING_WAIT_S", 0.05, raising=False)
    agent = Agent(starting=10_000)
    reg, _ = registry(tmp_path, agent)
    host = FakeHost(reg, _facts(tmp_path))
    host.ready.set()
    out = await run_operation(host, "watchdog", {"cmd": "extend", "until": "+1h"})
    assert out is not None and not out.ok
    assert out.message == watchdog.STILL_STARTING
    assert "still starting" in out.message and "try again in a few seconds" in out.message
    assert "No such file" not in out.message
    assert len(agent.calls) >= 2  # it asked again before giving up
