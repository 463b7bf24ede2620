"""f: a new pod on the next GPU kind in stock, in profile order, every slot brought up."""

from __future__ import annotations

from console.operations.operation import Args, OperationDeps
from console.operations.registry import OperationSpec, Outcome, Progress

SPEC = OperationSpec(
    "fallback", "f", "Fallback provisioning", "create a pod on the next GPU kind in "
    "stock, in profile order, and bring every slot up", True,
    "Create a NEW pod, trying every profile in order? A failed attempt terminates "
    "its pod.", label="fallback", takes_down="pod")


async def handler(deps: OperationDeps, args: Args, progress: Progress) -> Outcome:
    if deps.provisioner is None:
        return Outcome(False, "RunPod is not configured (RUNPOD_API_KEY)", state="failed")
    return await deps.provisioner.fallback_action(progress)
