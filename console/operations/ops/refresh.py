"""ctrl+r: poll every source now (not audited; the palette and scripts can ask for it too)."""

from __future__ import annotations

from console.operations.operation import Args, OperationDeps
from console.operations.registry import OperationSpec, Outcome, Progress

SPEC = OperationSpec("refresh", "ctrl+r", "Refresh", "poll every source now", False,
                     label="refresh")


async def handler(deps: OperationDeps, args: Args, progress: Progress) -> Outcome:
    if not deps.refresh():
        return Outcome(False, "nothing polls here", state="failed")
    return Outcome(True, "refresh requested")
