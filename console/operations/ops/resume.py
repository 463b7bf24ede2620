"""r: start the stopped pod; on a capacity refusal the provisioner offers fallback."""

from __future__ import annotations

from console.operations.operation import Args, OperationDeps, OperationFacts
from console.operations.registry import OperationSpec, Outcome, Progress

SPEC = OperationSpec(
    "resume", "r", "Resume pod", "start the stopped pod; on a capacity refusal, offer "
    "fallback provisioning", True,
    "Start pod {pod} ({profile}) and begin billing?", label="resume", takes_down="pod")


def preflight(facts: OperationFacts, args: Args) -> str | None:
    """No "begin billing?" for a pod that already bills, nor for one nobody named."""
    pod = facts.pod
    if not ((pod is not None and pod.pod_id) or facts.settings.pod.machine_id):
        return ("no pod is known to start: the config names none (pod.machine_id); "
                "pod-console up makes one")
    if pod is not None and pod.status == "RUNNING":
        return f"pod {pod.pod_id or ''} is already RUNNING".replace("  ", " ")
    return None


async def handler(deps: OperationDeps, args: Args, progress: Progress) -> Outcome:
    if deps.provisioner is None:
        return Outcome(False, "no RunPod pod configured (pod.machine_id, RUNPOD_API_KEY)",
                       state="failed")
    return await deps.provisioner.resume_action(progress)
