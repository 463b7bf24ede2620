"""t: the field's eight smoke checks, through the gateway users call (else each slot)."""

from __future__ import annotations

from typing import Any

from console.operations.operation import Args, OperationDeps
from console.operations.registry import OperationSpec, Outcome, Progress

SPEC = OperationSpec(
    "smoke", "t", "Smoke test", "the field's eight checks through the gateway users "
    "call (else each slot): models and aliases listed, chat and streaming answer, an "
    "unknown model is a 4xx, Prometheus targets UP, the trace sink", False,
    label="smoke", audited=True, shows_progress=True)


async def handler(deps: OperationDeps, args: Args, progress: Progress) -> Outcome:
    if deps.smoke is None:
        return Outcome(False, "no deployment to test", state="failed")
    from console.operations.smoke import CHECKS

    done = 0

    def on_check(c: Any) -> None:
        nonlocal done
        done += 1
        # each check with the time it took (a slow check is what the dialog must show)
        progress(c.name, done / len(CHECKS),
                 f"{c.verdict}: {c.evidence} ({c.duration_s:.2f} s)")

    report = await deps.smoke(on_check)
    failed = ", ".join(f"{c.name} ({c.evidence})" for c in report.failed)
    skipped = sum(1 for c in report.checks if c.ok is None)
    return Outcome(report.ok, (f"all passed via {report.via}" if report.ok else
                               f"FAILED via {report.via}: {failed}")
                   + (f"; {skipped} skipped" if skipped else ""), report.to_json(),
                   "ok" if report.ok else "failed")
