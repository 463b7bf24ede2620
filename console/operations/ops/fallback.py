"""f: a new pod on the next GPU kind in stock, in profile order, every slot brought up."""

from __future__ import annotations

from console.model import fmt
from console.operations.operation import Args, OperationDeps, OperationFacts, fill
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


def question(facts: OperationFacts, args: Args) -> str:
    """What becomes of the old pod and what the new one will be, said before anything is
    created: the old pod is left as it is (stopped with its volume, or still billing),
    and the new one's $/h, known only once the provider has made it, is in the result."""
    base = fill(SPEC.confirm, facts, args)
    prof = facts.profile
    kinds = ", ".join(prof.gpu_type_ids[:3]) + (" …" if len(prof.gpu_type_ids) > 3 else "")
    new = (f" New pod: the first in stock, {prof.effective_gpu_count}× {kinds} for "
           f"{facts.profile_name} first; the result names it and its $/h.")
    pod = facts.pod
    if pod is None or not pod.pod_id:
        return base + new
    cost = fmt.money(pod.cost_per_hr or 0.0)
    status = pod.status or "UNKNOWN"
    if status in ("EXITED", "STOPPED"):
        old = f" Old pod {pod.pod_id}: stopped, volume kept, {cost}/h; it stays so."
    elif status == "TERMINATED":
        old = f" Old pod {pod.pod_id}: terminated."
    else:
        old = (f" Old pod {pod.pod_id} is {status} at {cost}/h and this does NOT stop "
               "it: both bill until it is stopped.")
    return base + old + new
