"""The console's operations, registered once: resume, fallback, host checks, rebalance, watchdog.

Every handler takes ``(args, progress)`` and returns an :class:`Outcome`; the
Textual layer never calls the agent or RunPod itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from console.operations.audit import AuditLog
from console.operations.registry import ActionRegistry, Outcome, Progress
from console.operations.specs import SPECS
from console.sources.agent_client import AgentClient
from console.sources.remote import AgentError, report_from


def relay_events(progress: Progress) -> Callable[[dict[str, Any]], None]:
    def on_event(ev: dict[str, Any]) -> None:
        if ev.get("kind") == "progress":
            progress(str(ev.get("step", "")), ev.get("fraction"), str(ev.get("message", "")))
        elif ev.get("kind") == "log":
            progress("", None, str(ev.get("line", "")))
    return on_event


def summarize_checks(report: dict[str, Any]) -> str:
    parts = []
    for c in report.get("checks", []):
        mark = {True: "ok", False: "FAIL", None: "skip"}.get(c.get("ok"), "?")
        parts.append(f"{c.get('name')} {mark}")
    return ", ".join(parts)


def build_registry(audit: AuditLog, read_only: bool, *, agent: AgentClient,
                   refresh: Callable[[], None], provisioner: Any | None = None,
                   on_rebalanced: Callable[[dict[str, float]], Awaitable[str]] | None = None,
                   smoke: Callable[[Callable[[Any], None]], Awaitable[Any]] | None = None,
                   bench: Callable[[str, Progress], Awaitable[tuple[dict[str, Any], Path]]]
                   | None = None,
                   ) -> ActionRegistry:
    """The registry with every operation's handler; ``agent`` is how they reach the pod."""
    reg = ActionRegistry(audit, read_only)

    reg.refresh_target = refresh  # type: ignore[attr-defined]  # the app points it at itself
    reg.ack_target = None  # type: ignore[attr-defined]  # the app's alert book, once it has one

    async def acknowledge(args: dict[str, Any], progress: Progress) -> Outcome:
        target = reg.ack_target  # type: ignore[attr-defined]
        if target is None:
            return Outcome(False, "no alerts to acknowledge yet", state="failed")
        titles = target()
        if not titles:
            return Outcome(True, "nothing firing to acknowledge", state="ok")
        return Outcome(True, f"acknowledged {len(titles)}: " + "; ".join(titles),
                       {"alerts": titles})

    async def do_refresh(args: dict[str, Any], progress: Progress) -> Outcome:
        reg.refresh_target()  # type: ignore[attr-defined]
        return Outcome(True, "refresh requested")

    def need_agent() -> Outcome | None:
        if not agent.configured:
            return Outcome(False, "no pod agent configured (pod.ssh_host)", state="failed")
        return None

    async def host_checks(args: dict[str, Any], progress: Progress) -> Outcome:
        if (miss := need_agent()) is not None:
            return miss
        progress("check-host", None, "running on the pod (P2P probe up to 90 s)")
        try:
            res = await agent.check_host()
        except AgentError as exc:
            return Outcome(False, str(exc), state="failed")
        report = report_from(res)
        if report is None:
            return Outcome(False, f"no report from check-host (exit {res.exit_status})",
                           state="failed")
        msg = summarize_checks(report)
        code = res.exit_status
        if code == 3:
            return Outcome(False, "P2P probe HUNG — NCCL_P2P_DISABLE=1 written; " + msg,
                           {"report": report}, "failed")
        return Outcome(bool(report.get("ok")), msg, {"report": report},
                       "ok" if report.get("ok") else "failed")

    async def rebalance(args: dict[str, Any], progress: Progress) -> Outcome:
        if (miss := need_agent()) is not None:
            return miss
        values = {str(k): float(v) for k, v in (args.get("set") or {}).items()}
        aid = str(args.get("action_id") or f"rebalance-{uuid.uuid4().hex[:10]}")
        try:
            res = await agent.rebalance(values, aid, on_event=relay_events(progress))
        except AgentError as exc:
            return Outcome(False, f"{exc} — the action {aid} keeps running on the pod; "
                                  f"`pod-agent attach {aid}` shows its end", state="failed")
        final = res.final or {}
        if not res.ok:
            return Outcome(False, str(final.get("message", "rebalance refused")),
                           state="failed")
        if final.get("state") == "rolled_back":
            return Outcome(False, f"{final.get('failed_slot')} failed to start "
                                  f"({final.get('reason', '')[:120]}); restored "
                                  f"{final.get('restored')}", dict(final), "rolled_back")
        note = ""
        if on_rebalanced is not None and final.get("changed"):
            note = await on_rebalanced(values)
        return Outcome(True, f"applied {final.get('changed') or 'nothing to do'}"
                             + (f"; {note}" if note else ""), dict(final), "ok")

    async def watchdog(args: dict[str, Any], progress: Progress) -> Outcome:
        if (miss := need_agent()) is not None:
            return miss
        cmd = str(args.get("cmd", ""))
        if cmd not in ("arm", "disarm", "stop-now", "extend"):
            return Outcome(False, f"unknown watchdog command {cmd!r}", state="failed")
        aid = f"stop-{uuid.uuid4().hex[:10]}" if cmd == "stop-now" else None
        extra: list[str] = []
        if cmd == "extend":
            import getpass

            # --opt=value: a reason that starts with "-" is still a reason
            extra = ["--clear"] if args.get("clear") else [
                str(args.get("until") or ""), f"--by={args.get('by') or getpass.getuser()}",
                f"--reason={args.get('reason') or ''}"]
        try:
            res = await agent.watchdog(cmd, aid, on_event=relay_events(progress), extra=extra)
        except AgentError as exc:
            return Outcome(False, str(exc), state="failed")
        final = res.final or {}
        if not res.ok:
            return Outcome(False, str(final.get("message", "failed")), state="failed")
        if cmd == "stop-now":
            return Outcome(True, f"pod stopping: {final.get('message', '')}")
        if cmd == "extend":
            ext = final.get("extension")
            if not isinstance(ext, dict):
                return Outcome(True, "extension ended; the schedule applies", dict(final))
            return Outcome(True, f"pod kept until {ext.get('until_iso')} by {ext.get('by')}; "
                                 f"next stop {final.get('next_stop')} "
                                 f"({final.get('next_stop_reason')})", dict(final))
        return Outcome(True, f"watchdog {'armed' if final.get('armed') else 'disarmed'}")

    async def resume(args: dict[str, Any], progress: Progress) -> Outcome:
        if provisioner is None:
            return Outcome(False, "no RunPod pod configured (pod.runpod_id, RUNPOD_API_KEY)",
                           state="failed")
        return await provisioner.resume_action(progress)

    async def fallback(args: dict[str, Any], progress: Progress) -> Outcome:
        if provisioner is None:
            return Outcome(False, "RunPod is not configured (RUNPOD_API_KEY)", state="failed")
        return await provisioner.fallback_action(progress)

    async def smoke_test(args: dict[str, Any], progress: Progress) -> Outcome:
        if smoke is None:
            return Outcome(False, "no deployment to test", state="failed")
        from console.operations.smoke import CHECKS

        done = 0

        def on_check(c: Any) -> None:
            nonlocal done
            done += 1
            progress(c.name, done / len(CHECKS), f"{c.verdict}: {c.evidence}")

        report = await smoke(on_check)
        failed = ", ".join(f"{c.name} ({c.evidence})" for c in report.failed)
        skipped = sum(1 for c in report.checks if c.ok is None)
        return Outcome(report.ok, (f"all passed via {report.via}" if report.ok else
                                   f"FAILED via {report.via}: {failed}")
                       + (f"; {skipped} skipped" if skipped else ""), report.to_json(),
                       "ok" if report.ok else "failed")

    async def benchmark(args: dict[str, Any], progress: Progress) -> Outcome:
        if bench is None:
            return Outcome(False, "no deployment to benchmark", state="failed")
        slot = args.get("slot")
        if not slot:
            return Outcome(False, "no slot named", state="failed")
        from console.operations.benchmark.record import lines
        from console.operations.benchmark.runner import RecordNotKept

        try:
            rec, path = await bench(str(slot), progress)
        except RecordNotKept as exc:  # measured, not kept: show it rather than lose it
            for line in lines(exc.record):
                progress("", None, line)
            return Outcome(False, f"measured, but {exc}", state="failed")
        for line in lines(rec):  # the table and the bars, in the dialog and the log
            progress("", None, line)
        data = {"record": str(path)}
        if rec["failed_requests"]:
            return Outcome(False, f"{rec['failed_requests']} requests failed "
                                  f"({'; '.join(rec['errors'][:2])}); kept {path}", data,
                           "failed")
        regs = rec["comparison"]["regressions"]
        if regs:
            more = f" (and {len(regs) - 1} more)" if len(regs) > 1 else ""
            return Outcome(False, f"REGRESSION {regs[0]}{more}; kept {path}", data,
                           "regressed")
        figs = []
        for c in rec["configs"]:
            tok = c["summary"]["tok_s"]["mean"]
            acc = (c.get("spec") or {}).get("acceptance_rate")
            figs.append(f"{c['name']} {'–' if tok is None else f'{tok:.1f}'} tok/s"
                        + ("" if acc is None else f" ({acc * 100:.0f} % accepted)"))
        return Outcome(True, f"{', '.join(figs)}; kept {path}", data)

    reg.register(SPECS["refresh"], do_refresh)
    reg.register(SPECS["bench"], benchmark)
    reg.register(SPECS["smoke"], smoke_test)
    reg.register(SPECS["resume"], resume)
    reg.register(SPECS["fallback"], fallback)
    reg.register(SPECS["host_checks"], host_checks)
    reg.register(SPECS["rebalance"], rebalance)
    reg.register(SPECS["watchdog"], watchdog)
    reg.register(SPECS["ack"], acknowledge)
    return reg


def audit_for(state_dir: Path) -> AuditLog:
    return AuditLog(state_dir / "audit.jsonl")
