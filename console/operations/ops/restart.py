"""R: restart the slot under the cursor through the pod agent (asks first, audited) —
the way out of a slot that answers ``/health`` while nothing decodes (a STALLED alert
offers it; ``console/model/stall.py``)."""

from __future__ import annotations

import uuid

from console.operations.operation import (
    NO_AGENT,
    Args,
    OperationDeps,
    agent_preflight,
    configured_agent,
    relay_events,
)
from console.operations.registry import OperationSpec, Outcome, Progress

SPEC = OperationSpec(
    "restart", "R", "Restart slot", "stop the slot under the cursor and start it again "
    "through the pod agent (a STALLED slot's way out)", True,
    "Restart slot {slot} on pod {pod}? Its running requests fail and it serves nothing "
    "for its start-up time.", label="restart", shows_progress=True, per_slot=True,
    takes_down="slot")

preflight = agent_preflight


async def handler(deps: OperationDeps, args: Args, progress: Progress) -> Outcome:
    from console.sources.remote import AgentError

    if (agent := configured_agent(deps)) is None:
        return NO_AGENT
    slot = str(args.get("slot") or "")
    if not slot:
        return Outcome(False, "no slot chosen", state="failed")
    # the agent's own id for the run: the same id again replays its end, never restarts
    aid = str(args.get("action_id") or f"restart-{uuid.uuid4().hex[:10]}")
    from pod_agent.requests import RestartRequest

    try:
        res = await agent.request(RestartRequest(slot=slot, action_id=aid),
                                  on_event=relay_events(progress))
    except AgentError as exc:
        return Outcome(False, f"{exc} — the restart {aid} keeps running on the pod; "
                              f"`pod-agent attach {aid}` shows its end", state="failed")
    final = dict(res.final or {})
    deps.refresh()
    if not res.ok:
        return Outcome(False, f"{slot} restart failed: {res.message}"[:300], final, "failed")
    took = final.get("startup_s")
    return Outcome(True, f"{slot} restarted" + (
        f" (up after {float(took):.0f} s)" if isinstance(took, (int, float)) else ""),
        final, "ok")
