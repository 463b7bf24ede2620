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


async def test_the_question_names_what_each_kind_last_cost(tmp_path: Path) -> None:
    """RunPod's REST API has no price list before a pod exists: the question names the
    $/h of the last pod kept on each of the profile's kinds, from the pod ledger (as the
    provisioner writes ``kept``), and says nothing of a kind never paid for."""
    from console.config.config_file import ledger_path
    from console.operations.ledger import Ledger, last_prices
    from tests.unit.test_operations_modules import _facts as facts_of

    prof = facts_of(tmp_path).profile
    kind, count = prof.gpu_type_ids[0], prof.effective_gpu_count
    q = await ask(tmp_path, None)
    assert "Last paid" not in q  # no ledger yet: no price is made up
    ledger = Ledger(ledger_path(tmp_path))
    ledger.record("kept", pod="old", gpu=kind, count=count, cost=3.10)
    ledger.record("kept", pod="new", gpu=kind, count=count, cost=4.18)
    ledger.record("kept", pod="other", gpu=kind, count=count + 1, cost=9.99)
    ledger.record("kept", pod="resumed")  # a resume's keep names no kind: no price
    assert last_prices(ledger_path(tmp_path))[(kind, count)].cost == 4.18
    q = await ask(tmp_path, None)
    assert f"Last paid: $4.18/h for {count}× {kind} (" in q, q
    assert "$9.99" not in q and "$3.10" not in q
