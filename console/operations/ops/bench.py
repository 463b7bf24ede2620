"""B: the field's benchmark protocol on the slot under the cursor, kept and compared with
the slot's last run (``console/operations/benchmark/`` measures and records)."""

from __future__ import annotations

from console.operations.operation import Args, OperationDeps, OperationFacts, fill
from console.operations.registry import OperationSpec, Outcome, Progress

SPEC = OperationSpec(
    "bench", "B", "Benchmark", "the field's protocol on the slot under the cursor, "
    "through the gateway users call: TTFT, TPOT, tok/s at concurrency 1 and 4, short "
    "and long inputs, speculative acceptance by task type; kept and compared with the "
    "last run", True,
    "Benchmark slot {slot} on pod {pod}? It sends {requests} streamed requests via "
    "{via} for a few minutes: users' requests to this slot slow down meanwhile.",
    label="bench", shows_progress=True, cancellable=True, per_slot=True,
    compact_log=True)


def question(facts: OperationFacts, args: Args) -> str:
    """How many requests it sends and by which path, asked before it sends them."""
    from console.operations.benchmark.runner import BenchError, plans_for

    requests = via = "?"
    if args.get("slot"):
        try:
            plan = plans_for(facts.profile_name, facts.profile, facts.targets,
                             facts.settings, [args["slot"]])[0]
            requests, via = str(plan.requests), plan.via
        except BenchError:
            pass  # the handler says why when it runs; the question says it does not know
    return fill(SPEC.confirm, facts, args, requests=requests, via=via)


async def handler(deps: OperationDeps, args: Args, progress: Progress) -> Outcome:
    if deps.bench is None:
        return Outcome(False, "no deployment to benchmark", state="failed")
    slot = args.get("slot")
    if not slot:
        return Outcome(False, "no slot named", state="failed")
    from console.operations.benchmark.record import lines
    from console.operations.benchmark.runner import RecordNotKept

    try:
        rec, path = await deps.bench(str(slot), progress)
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
        return Outcome(False, f"REGRESSION {regs[0]}{more}; kept {path}", data, "regressed")
    figs = []
    for c in rec["configs"]:
        tok = c["summary"]["tok_s"]["mean"]
        acc = (c.get("spec") or {}).get("acceptance_rate")
        figs.append(f"{c['name']} {'–' if tok is None else f'{tok:.1f}'} tok/s"
                    + ("" if acc is None else f" ({acc * 100:.0f} % accepted)"))
    return Outcome(True, f"{', '.join(figs)}; kept {path}", data)
