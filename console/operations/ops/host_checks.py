"""h: the pod agent's host checks (GPUs, driver CUDA, GPU health, NCCL P2P, pidfd, disk,
memory); a hung P2P probe makes the agent write NCCL_P2P_DISABLE=1."""

from __future__ import annotations

from typing import Any

from console.operations.operation import (
    NO_AGENT,
    Args,
    OperationDeps,
    agent_preflight,
    configured_agent,
)
from console.operations.registry import OperationSpec, Outcome, Progress

SPEC = OperationSpec(
    "host_checks", "h", "Host checks", "GPUs, driver CUDA, NCCL P2P probe, pidfd, disk "
    "and memory on the pod", True,
    "Run the host checks on pod {pod}? The P2P probe takes up to 90 s and rewrites "
    "NCCL_P2P_DISABLE in the pod's .env.", label="host checks")

preflight = agent_preflight

P2P_HUNG_EXIT = 3
"""pod-agent check-host's exit status when the P2P probe hung (and it wrote the fix)."""


def summarize(report: dict[str, Any]) -> str:
    """One line: each check's name and ok / FAIL / skip."""
    parts = []
    for c in report.get("checks", []):
        mark = {True: "ok", False: "FAIL", None: "skip"}.get(c.get("ok"), "?")
        parts.append(f"{c.get('name')} {mark}")
    return ", ".join(parts)


async def handler(deps: OperationDeps, args: Args, progress: Progress) -> Outcome:
    from console.sources.remote import AgentError, report_from

    if (agent := configured_agent(deps)) is None:
        return NO_AGENT
    progress("check-host", None, "running on the pod (P2P probe up to 90 s)")
    try:
        res = await agent.check_host()
    except AgentError as exc:
        return Outcome(False, str(exc), state="failed")
    report = report_from(res)
    if report is None:
        return Outcome(False, f"no report from check-host (exit {res.exit_status})",
                       state="failed")
    msg = summarize(report)
    if res.exit_status == P2P_HUNG_EXIT:
        return Outcome(False, "P2P probe HUNG — NCCL_P2P_DISABLE=1 written; " + msg,
                       {"report": report}, "failed")
    return Outcome(bool(report.get("ok")), msg, {"report": report},
                   "ok" if report.get("ok") else "failed")
