"""b: a new gpu_util split, applied by the pod agent (the shrinking slot restarts first; a
failure rolls back); an applied split is written back into the laptop's profile."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping

from console.operations.operation import (
    NO_AGENT,
    Args,
    Dialogs,
    OperationDeps,
    OperationFacts,
    agent_preflight,
    configured_agent,
    fill,
    relay_events,
)
from console.operations.registry import OperationSpec, Outcome, Progress
from console.operations.split import result_words

SPEC = OperationSpec(
    "rebalance", "b", "Rebalance gpu_util", "apply a new gpu_util split; the shrinking "
    "slot restarts first; a failure rolls back", True,
    "Restart slots on pod {pod} with {split}? Each restart takes the slot offline for "
    "its start-up time.", label="rebalance", takes_down="split")

preflight = agent_preflight

async def ask(facts: OperationFacts, args: Args, dialogs: Dialogs) -> Args | None:
    """The split, from the editor that starts at the planner's proposal."""
    if "set" in args:
        return args
    agent = facts.pod.agent_slots if facts.pod else {}
    slots = facts.profile.slots
    current = {n: float(agent.get(n, {}).get("gpu_util", s.gpu_util)) for n, s in slots.items()}
    proposal, lines = current, []
    predict: Callable[[str, float | None], str] = lambda slot, util: ""  # noqa: E731
    if facts.planner is not None:
        # the planner reads and writes the remembered KV points: a thread, not the loop
        proposal, lines, predict = await asyncio.to_thread(
            facts.planner.preview, facts.snapshot, current, agent)
    rows = [{"slot": n, "current": current[n], "proposed": proposal.get(n, current[n]),
             "gpus": list(s.gpus), "min": s.min_gpu_util} for n, s in slots.items()]
    chosen = await dialogs.choose_split(rows, lines, predict)
    return {**args, "set": chosen} if chosen else None


def question(facts: OperationFacts, args: Args) -> str:
    split = ", ".join(f"{k}={v:g}" for k, v in (args.get("set") or {}).items())
    return fill(SPEC.confirm, facts, args, split=split)


async def handler(deps: OperationDeps, args: Args, progress: Progress) -> Outcome:
    from console.sources.remote import AgentError

    if (agent := configured_agent(deps)) is None:
        return NO_AGENT
    values = {str(k): float(v) for k, v in (args.get("set") or {}).items()}
    # the agent's own id for the run: the same id again replays its end, never restarts
    aid = str(args.get("action_id") or f"rebalance-{uuid.uuid4().hex[:10]}")
    from pod_agent.requests import RebalanceRequest

    try:
        res = await agent.request(RebalanceRequest(set=values, action_id=aid),
                                  on_event=relay_events(progress))
    except AgentError as exc:
        return Outcome(False, f"{exc} — the rebalance {aid} keeps running on the pod; "
                              f"`pod-agent attach {aid}` shows its end", state="failed")
    final = res.final or {}
    if not res.ok:
        return Outcome(False, str(final.get("message", "rebalance refused")), state="failed")
    if final.get("state") == "rolled_back":
        restored = final.get("restored") or {}
        back = ", ".join(f"{n} back at {float(u):.2f}" for n, u in restored.items()) \
            if isinstance(restored, Mapping) else ""
        return Outcome(False, f"{final.get('failed_slot')} failed to start "
                              f"({str(final.get('reason', ''))[:120]}); rolled back"
                              + (f": {back}" if back else ""), dict(final), "rolled_back")
    note = ""
    if deps.on_rebalanced is not None and final.get("changed"):
        note = await deps.on_rebalanced(values)
    return Outcome(True, result_words(final) + (f"; {note}" if note else ""), dict(final),
                   "ok")
