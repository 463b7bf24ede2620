"""f: a new pod on the next GPU kind in stock, in profile order, every slot brought up."""

from __future__ import annotations

import asyncio
import time

from console.model import fmt
from console.operations.operation import Args, Dialogs, OperationDeps, OperationFacts, fill
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


async def ask(facts: OperationFacts, args: Args, dialogs: Dialogs) -> Args:
    """Nothing to choose: the $/h last paid for each of the first profile's GPU kinds is
    read here, off the event loop, for the question to name (RunPod's REST API has no
    price list before a pod exists; the ledger remembers what each kept pod cost)."""
    from console.config.config_file import ledger_path
    from console.operations.ledger import last_prices

    count = facts.profile.effective_gpu_count
    try:
        known = await asyncio.wait_for(asyncio.to_thread(
            last_prices, ledger_path(facts.settings.state_dir)), 2.0)
    except TimeoutError:
        known = {}
    paid = [[k, count, p.cost, p.t] for k in facts.profile.gpu_type_ids
            if (p := known.get((k, count))) is not None]
    return {**args, "paid": paid} if paid else args


def _paid_text(args: Args) -> str:
    """" Last paid: $6.58/h for 2× H100 (Dec 03)." — or nothing when none is known."""
    parts = []
    for gpu, count, cost, t in args.get("paid", ()):
        parts.append(f"{fmt.money(cost)}/h for {count}× {gpu} "
                     f"({time.strftime('%b %d', time.localtime(t))})")
    return f" Last paid: {'; '.join(parts)}." if parts else ""


def question(facts: OperationFacts, args: Args) -> str:
    """What becomes of the old pod and what the new one will be, said before anything is
    created: the old pod is left as it is (stopped with its volume, or still billing);
    the new one's $/h is known only once the provider has made it (the result says it),
    so the question names what a pod of each kind cost when one was last kept."""
    base = fill(SPEC.confirm, facts, args)
    prof = facts.profile
    kinds = ", ".join(prof.gpu_type_ids[:3]) + (" …" if len(prof.gpu_type_ids) > 3 else "")
    new = (f" New pod: the first in stock, {prof.effective_gpu_count}× {kinds} for "
           f"{facts.profile_name} first; the result names it and its $/h."
           + _paid_text(args))
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
