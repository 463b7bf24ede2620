"""w: the pod's watchdog: arm, disarm, stop the pod now, or keep it running until a time."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING

from console.model import fmt
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

if TYPE_CHECKING:  # pydantic: not on the path to the first frame (tests/unit/test_boot.py)
    from pod_agent.requests import AgentRequest

SPEC = OperationSpec(
    "watchdog", "w", "Watchdog", "arm, disarm, or stop the pod now", True,
    "Watchdog: {cmd} on pod {pod}?", label="watchdog", beside=True)

COMMANDS = ("arm", "disarm", "stop-now", "extend")
STARTING_WAIT_S = 15.0
"""How long a command waits for a supervisor that is not running yet (a pod just resumed:
its agent's socket comes a few seconds after the pod answers), asking again every
``STARTING_STEP_S``."""
STARTING_STEP_S = 1.0
STILL_STARTING = ("the agent is still starting on the new run (its supervisor does not "
                  "answer yet); try again in a few seconds: w")

preflight = agent_preflight


async def ask(facts: OperationFacts, args: Args, dialogs: Dialogs) -> Args | None:
    """The command, from a menu that shows the watchdog's state and the next stop."""
    if "cmd" in args:
        return args
    pod = facts.pod
    plan = pod.stop_plan if pod is not None else None
    ext = None
    if plan is not None and plan.extension_until:
        ext = (f"extended until {fmt.wall_time(plan.extension_until)} by {plan.extension_by}"
               + (f": {plan.extension_reason}" if plan.extension_reason else ""))
    # the countdown on the pod's clock, as the header counts it: the two never disagree
    now = pod.stop_clock(facts.now) if pod is not None else facts.now
    chosen = await dialogs.choose_watchdog(pod.watchdog_armed if pod else None,
                                           pod.next_stop if pod else None, now, ext)
    return {**args, **chosen} if chosen else None


def question(facts: OperationFacts, args: Args) -> str:
    """What a watchdog change means in money, said before it is made."""
    f = facts.fields()
    cmd = args.get("cmd")
    if cmd == "extend" and args.get("clear"):
        # here, not at import: the stop policy brings pydantic (the agent's profile), and
        # this module is on the path to the console's first frame (tests/unit/test_boot.py)
        from pod_agent.stoppolicy import END_GRACE_S

        grace = f"{END_GRACE_S / 60:g} min"
        return (f"End the extension on pod {f['pod']}? The plan resumes: a stop whose time "
                f"has passed (or comes within the warning) is warned now and made {grace} "
                "later, or at its own time if later; a later stop at its time.")
    if cmd == "extend":
        why = f" ({args['reason']})" if args.get("reason") else ""
        end = (" Its end stops the pod, in place of that evening's scheduled stop."
               if args.get("replaces_next_stop") else "")
        return (f"Keep pod {f['pod']} running until {args.get('until')}{why}? Neither "
                f"the pod's watchdog nor `pod-console down` stops it before then; it "
                f"bills {f['cost']}/h meanwhile.{end}")
    if cmd == "disarm":
        return (f"DISARM the watchdog on pod {f['pod']}? NOTHING will stop it — not "
                f"the schedule, not idleness — and it bills {f['cost']}/h until someone "
                "stops it. An extension (+1 h, +2 h, until a time) ends by itself.")
    if cmd == "stop-now":
        return stop_now_question(facts)
    return fill(SPEC.confirm, facts, args)


def stop_now_question(facts: OperationFacts) -> str:
    """What stopping now takes away, said before it is done: the slots and the requests
    they are serving, who used the gateway lately, and what billing stops and what does
    not (the volume is kept, and RunPod bills its storage while the pod is stopped)."""
    f = facts.fields()
    slots = [t.slot for t in facts.targets] or list(facts.profile.slots)
    serving = ""
    if facts.snapshot is not None:
        running = sum(int(s.figure("running") or 0) for s in facts.snapshot.slots
                      if s.health == "up")
        up = [s.slot for s in facts.snapshot.slots if s.health == "up"]
        serving = (f", {fmt.count(running, 'request')} running on them now" if up else
                   ", none of them up now")
    who = f" Gateway {facts.who}." if facts.who else ""
    if facts.who and facts.who.startswith("gateway: "):
        who = f" {facts.who[len('gateway: '):].capitalize()} through the gateway."
    gb = facts.profile.volume_gb
    kept = (f"the {gb} GB volume (the weights) is kept and bills its storage while "
            "stopped; the container disk is wiped" if gb else
            "nothing is kept (no volume: the weights download again)")
    return (f"Stop pod {f['pod']} now? {fmt.count(len(slots), 'slot')} ({', '.join(slots)}) "
            f"stop serving{serving}.{who} Billing of {f['cost']}/h stops; {kept}. "
            "r starts it again.")


def request_for(cmd: str, args: Args) -> AgentRequest:
    """The agent's request for ``cmd`` (one of COMMANDS), from the flow's args."""
    from pod_agent import requests as rq

    if cmd == "stop-now":
        from console.operations.audit import who

        # who asked, as the audit names them: the agent's record of the stop says so too
        # (its own default is the pod's user, "root")
        return rq.StopNowRequest(action_id=f"stop-{uuid.uuid4().hex[:10]}",
                                 by=str(args.get("by") or who()))
    if cmd == "extend":
        if args.get("clear"):
            return rq.ExtendRequest(clear=True)
        import getpass

        return rq.ExtendRequest(until=str(args.get("until") or ""),
                                by=str(args.get("by") or getpass.getuser()),
                                reason=str(args.get("reason") or ""),
                                replaces_next_stop=bool(args.get("replaces_next_stop")))
    return rq.ArmRequest() if cmd == "arm" else rq.DisarmRequest()


async def handler(deps: OperationDeps, args: Args, progress: Progress) -> Outcome:
    from console.sources.remote import AgentError

    if (agent := configured_agent(deps)) is None:
        return NO_AGENT
    cmd = str(args.get("cmd", ""))
    if cmd not in COMMANDS:
        return Outcome(False, f"unknown watchdog command {cmd!r}", state="failed")
    from pydantic import ValidationError

    from pod_agent.requests import explain

    try:
        req = request_for(cmd, args)
    except ValidationError as exc:  # the model's own check: refused here, never sent
        return Outcome(False, f"bad request: {explain(f'watchdog {cmd}', exc)}",
                       state="failed")
    deadline = time.monotonic() + STARTING_WAIT_S
    while True:
        try:
            res = await agent.request(req, on_event=relay_events(progress))
        except AgentError as exc:
            return Outcome(False, str(exc), state="failed")
        final = res.final or {}
        if res.ok or final.get("supervisor") != "not running":
            break
        # nothing was done (no supervisor to do it): asking again is safe
        if time.monotonic() + STARTING_STEP_S > deadline:
            return Outcome(False, STILL_STARTING, dict(final), state="failed")
        progress("agent", None, "the agent is still starting on the new run; asking again")
        await asyncio.sleep(STARTING_STEP_S)
    if not res.ok:
        return Outcome(False, str(final.get("message", "failed")), state="failed")
    if cmd == "stop-now":
        return Outcome(True, f"pod stopping: {final.get('message', '')}")
    if cmd == "extend":
        ext = final.get("extension")
        if not isinstance(ext, dict):
            nxt = final.get("next_stop")
            when = (f"; the pod stops at {fmt.wall_time(str(nxt))} "
                    f"({final.get('next_stop_reason')})" if nxt else "")
            warned = ", warned now" if final.get("warned") is True else ""
            return Outcome(True, f"extension ended; the plan resumes{when}{warned}",
                           dict(final))
        return Outcome(True, f"pod kept until {fmt.when_text(ext.get('until_iso'))} by "
                             f"{ext.get('by')}; next stop {fmt.when_text(final.get('next_stop'))} "
                             f"({final.get('next_stop_reason')})", dict(final))
    return Outcome(True, f"watchdog {'armed' if final.get('armed') else 'disarmed'}")
