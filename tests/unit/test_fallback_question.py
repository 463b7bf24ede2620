"""``f``'s confirmation says what becomes of the old pod (issue 42, item 5): stopped with
its volume and what it bills, or still billing and NOT stopped by the fallback; and what
the new pod will be. The real flow and the real fallback module's hooks."""

from __future__ import annotations

from pathlib import Path

from console.model.snapshot import PodSnapshot
from console.operations.audit import AuditLog
from console.operations.ops import build_registry
from console.sources.agent_client import AgentClient
from console.ui.operation_flow import run_operation
from tests.unit.test_operations_modules import FakeHost, _facts


async def ask(tmp_path: Path, pod: PodSnapshot | None) -> str:
    reg = build_registry(AuditLog(tmp_path / "audit.jsonl"), agent=AgentClient(None))
    host = FakeHost(reg, _facts(tmp_path, pod), answer=False)
    host.ready.set()
    assert await run_operation(host, "fallback", {}) is None  # asked, then n
    [(title, question)] = host.questions
    assert title == "Fallback provisioning"
    return question


async def test_the_question_names_the_old_pods_fate_and_the_new_pod(tmp_path: Path) -> None:
    q = await ask(tmp_path, PodSnapshot(pod_id="abc", status="EXITED", cost_per_hr=0.0))
    assert "Old pod abc: stopped, volume kept, $0.00/h; it stays so." in q
    assert "New pod: the first in stock, 2× " in q and "its $/h" in q
    q = await ask(tmp_path, PodSnapshot(pod_id="abc", status="RUNNING", cost_per_hr=4.18))
    assert "Old pod abc is RUNNING at $4.18/h and this does NOT stop it" in q
