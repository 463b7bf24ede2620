"""Proving a deployment: ``pod-console smoke`` (it answers the way its users reach it,
``console/operations/smoke.py``) and ``pod-console bench`` (how fast, and how well speculative
decoding pays, ``console/operations/benchmark``).

smoke: exit 0 when every check passes (skips allowed), 1 when one fails, 3 on a
configuration that cannot be read.
bench: exit 0 done, 1 requests failed, 3 bad configuration, 4 a regression flagged,
130 interrupted (nothing kept)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from console.commands import aligned, examples

if TYPE_CHECKING:
    from console.config.settings import Settings
    from console.operations.benchmark.measure import PodFacts

EXIT_FAILED, EXIT_CONFIG, EXIT_REGRESSION, EXIT_INTERRUPTED = 1, 3, 4, 130


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("smoke", help="the field's eight checks through the gateway (else "
                                     "each slot): models, aliases, chat, streaming, 4xx, "
                                     "targets UP, trace sink",
        **examples(
            'pod-console smoke                       # pass/fail, evidence and time per check',
            'pod-console smoke --json                # the same as one JSON object',
            'exit: 0 all passed (skips allowed), 1 a check failed, 3 bad config',
        ))
    s.add_argument("--config", type=Path)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_smoke)

    b = sub.add_parser("bench", help="the field's benchmark through the users' path: TTFT, "
                                     "TPOT, tok/s, speculative acceptance (by task type "
                                     "too); kept and compared with the last run",
        **examples(
            'pod-console bench                       # every slot of today\'s profile',
            'pod-console bench QWEN --json           # one slot; the record as JSON',
            'pod-console bench --runs 1 --max-tokens 256 --tasks none   # a quick look',
            'pod-console bench --history             # the kept records, oldest first',
            'exit: 0 done, 1 requests failed, 3 bad config, 4 a regression, 130 interrupted',
        ))
    b.add_argument("slots", nargs="*", metavar="SLOT", help="slots to measure (default: all)")
    b.add_argument("--config", type=Path)
    b.add_argument("--json", action="store_true", help="the record(s) as JSON on stdout")
    b.add_argument("--history", action="store_true", help="list the kept records instead")
    b.add_argument("--runs", type=int, help="measured runs per configuration (default 3)")
    b.add_argument("--warmup", type=int, help="unmeasured runs first (default 1)")
    b.add_argument("--concurrency", type=_ints, help="comma-separated, default 1,4")
    b.add_argument("--max-tokens", type=int, help="output tokens at most (default 1024)")
    b.add_argument("--long-tokens", type=int, help="long input size, tokens (default 3000)")
    b.add_argument("--task-max-tokens", type=int, help="per task request (default 768)")
    b.add_argument("--lengths", type=_words, help="short,long (default both)")
    b.add_argument("--tasks", type=_words, help="task types, comma-separated, or none "
                                               "(default all seven)")
    b.set_defaults(func=cmd_bench)


def _ints(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not out or any(n < 1 or n > 64 for n in out):
        raise argparse.ArgumentTypeError("each concurrency is 1..64")
    return out


def _words(text: str) -> list[str]:
    return [] if text.strip() == "none" else [w.strip() for w in text.split(",") if w.strip()]


def cmd_smoke(args: argparse.Namespace) -> int:
    from console.commands.smoke_run import smoke_for_settings
    from console.config.settings import ConfigError, load_settings
    from console.session.deployment import DeploymentError

    try:
        settings = load_settings(args.config)
        from console.commands.pod_cmd import apply_current_pod

        apply_current_pod(settings)
        report = asyncio.run(smoke_for_settings(settings))
    except (ConfigError, DeploymentError) as exc:
        print(f"pod-console smoke: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.json:
        print(json.dumps(report.to_json(), indent=1))
    else:
        print("\n".join(report.lines()))
    return 0 if report.ok else EXIT_FAILED


def _progress_line(step: str, fraction: float | None, message: str) -> None:
    pct = "" if fraction is None else f"{fraction * 100:3.0f} % "
    with contextlib.suppress(OSError, ValueError):  # stderr gone: the run goes on
        print(f"  {pct}{step}: {message}", file=sys.stderr, flush=True)


async def _pod_facts(settings: Settings) -> PodFacts:
    """Where the benchmark runs, as the provider and the agent say (unknown when neither
    answers in time: a record is still worth keeping)."""
    from console.operations.benchmark.measure import PodFacts
    from console.session.deployment import connect

    _, parts = connect(settings)  # the console's wiring: GPU source, agent and all
    try:
        return PodFacts.from_pod(await parts.pods.poll())
    finally:
        await parts.aclose()


async def _bench(args: argparse.Namespace, settings: Settings) -> int:
    from console.commands.pod_cmd import _audit, _interruptible
    from console.operations.audit import audit_log_for
    from console.operations.benchmark.record import lines
    from console.operations.benchmark.runner import (
        RecordNotKept,
        baseline_of,
        bench_and_record,
        plans_for,
    )
    from console.session.deployment import open_deployment
    from console.sources.collect.http import HttpClient

    dep = open_deployment(settings)
    plans = plans_for(dep.today.name, dep.today.profile, dep.targets, settings, args.slots,
                      runs=args.runs, warmup=args.warmup, concurrency=args.concurrency,
                      max_tokens=args.max_tokens, long_tokens=args.long_tokens,
                      task_max_tokens=args.task_max_tokens, lengths=args.lengths,
                      tasks=args.tasks)
    audit = audit_log_for(settings)
    records: list[dict] = []
    unkept: list[str] = []

    async def main() -> int:
        facts = await _pod_facts(settings)
        client = HttpClient()
        try:
            for plan in plans:
                what = {"slot": plan.slot, "pod": facts.pod_id, "via": plan.via}
                _audit(audit, "bench", what, "started")
                print(f"bench {plan.slot} ({plan.served_model_name}) via {plan.via}: "
                      f"{plan.steps} steps", file=sys.stderr, flush=True)
                try:
                    rec, path = await bench_and_record(
                        plan, client, facts, settings.state_dir,
                        baseline_of(dep.today.profile, plan.slot),
                        settings.bench.regression_pct, _progress_line)
                except asyncio.CancelledError:
                    _audit(audit, "bench", what, "cancelled", message="nothing kept")
                    raise
                except RecordNotKept as exc:  # measured, not kept: printed, never lost
                    records.append(exc.record)
                    unkept.append(str(exc))
                    _audit(audit, "bench", what, "failed", message=str(exc))
                    print("\n".join([*lines(exc.record), f"  NOT KEPT: {exc}"]),
                          file=sys.stderr if args.json else sys.stdout, flush=True)
                    continue
                records.append(rec)
                regs = rec["comparison"]["regressions"]
                state = "failed" if rec["failed_requests"] else "ok"
                _audit(audit, "bench", what, state, record=str(path),
                       message="; ".join([*rec["errors"], *regs])[:500])
                if not args.json:
                    print("\n".join([*lines(rec), f"  kept: {path}"]), flush=True)
        finally:
            await client.aclose()
        if unkept or any(r["failed_requests"] for r in records):
            return EXIT_FAILED
        return EXIT_REGRESSION if any(r["comparison"]["regressions"] for r in records) else 0

    rc = await _interruptible(main)
    if rc == 130:
        print("pod-console bench: interrupted; the unfinished run was not kept",
              file=sys.stderr)
    if args.json and records:
        print(json.dumps(records if len(records) > 1 else records[0], indent=1,
                         ensure_ascii=False))
    return rc


def _history(args: argparse.Namespace, settings: Settings) -> int:
    from console.operations.benchmark.record import load_history

    recs, bad = load_history(settings.state_dir)
    if args.slots:
        recs = [r for r in recs if r.get("slot") in args.slots]
    for b in bad:
        print(f"pod-console bench: skipped unreadable record {b}", file=sys.stderr)
    if args.json:
        print(json.dumps(recs, indent=1, ensure_ascii=False))
        return 0
    if not recs:
        print(f"no benchmark records in {settings.state_dir / 'bench'}")
        return 0
    rows = [("started", "profile", "slot", "GPU", "P2P", "vLLM", "tok/s by config",
             "regressions")]
    for r in recs:
        pod = r.get("pod") or {}
        toks = " ".join(f"{c['name']}={c['summary']['tok_s']['mean']:.1f}"
                        for c in r.get("configs") or ()
                        if c["summary"]["tok_s"]["mean"] is not None)
        rows.append((str(r.get("started_at")), str(r.get("profile")), str(r.get("slot")),
                     str(pod.get("gpu_type") or "?"), str(pod.get("p2p")),
                     str(r.get("vllm_version") or "?"), toks or "–",
                     str(len((r.get("comparison") or {}).get("regressions") or ()))))
    print("\n".join(aligned(rows)))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from console.config.settings import ConfigError, load_settings
    from console.operations.benchmark.runner import BenchError
    from console.session.deployment import DeploymentError

    try:
        settings = load_settings(args.config)
        from console.commands.pod_cmd import apply_current_pod

        apply_current_pod(settings)
        if args.history:
            return _history(args, settings)
        return asyncio.run(_bench(args, settings))
    except (ConfigError, DeploymentError, BenchError) as exc:
        print(f"pod-console bench: {exc}", file=sys.stderr)
        return EXIT_CONFIG
