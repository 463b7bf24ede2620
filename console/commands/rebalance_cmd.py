"""``pod-console rebalance --plan --json`` / ``--apply``: the planner without the screen."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from console.commands import examples
from console.commands.argtypes import seconds


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rebalance", help="plan a gpu_util split from live KV usage; apply it",
        **examples(
            'pod-console rebalance --plan            # a split from live KV usage',
            'pod-console rebalance --plan --json',
            'pod-console rebalance --apply           # apply the plan through the agent',
        ))
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--plan", action="store_true", help="print the plan")
    mode.add_argument("--apply", action="store_true", help="apply the plan through the agent")
    p.add_argument("--json", action="store_true", help="JSON output (with --plan)")
    p.add_argument("--config", type=Path)
    p.add_argument("--sample", type=seconds(0, 3600), default=5.0,
                   help="without Prometheus: seconds between the two scrapes")
    p.set_defaults(func=cmd_rebalance)


async def _run(args: argparse.Namespace) -> int:
    from console.commands.pod_cmd import apply_current_pod
    from console.config.settings import load_settings
    from console.session.context import make_context

    settings = load_settings(args.config)
    apply_current_pod(settings)
    ctx = make_context(settings)
    planner = ctx.planner
    assert planner is not None, "a context that is not read-only has a planner"
    try:
        snap = await ctx.poller.poll()
        if not settings.prometheus_url and args.sample > 0:
            await asyncio.sleep(args.sample)
            snap = await ctx.poller.poll()
        current = {n: s.gpu_util for n, s in ctx.profile.slots.items()}
        agent_slots: dict = {}
        if ctx.agent is not None and ctx.agent.configured:
            from pod_agent.requests import StatusRequest

            try:
                r = await ctx.agent.request(StatusRequest())
                agent_slots = (r.final or {}).get("slots") or {}
                current.update({n: float(v.get("gpu_util", current[n]))
                                for n, v in agent_slots.items() if n in current})
            except Exception as exc:  # the plan still works from the profile's values
                print(f"agent unreachable: {exc}", file=sys.stderr)
        split, lines, predict = planner.preview(snap, current, agent_slots)
        if args.plan:
            out = {"profile": ctx.profile_name, "current": current, "proposed": split,
                   "explain": lines,
                   "predicted": {n: predict(n, u) for n, u in split.items()},
                   "models": {n: {"points": list(m.points), "tokens_per_util": m.slope,
                                  "how": m.how} for n, m in planner.models().items()}}
            if args.json:
                print(json.dumps(out, indent=2, sort_keys=True))
            else:
                print("\n".join(lines))
            return 0
        if all(abs(split[n] - current[n]) < 1e-9 for n in split):
            print("nothing to do: the plan equals the current split")
            return 0

        def progress(step: str, frac: float | None, msg: str) -> None:
            print(f"{time.strftime('%H:%M:%S')} {step} {msg}".rstrip(), flush=True)

        done = await ctx.registry.invoke("rebalance", {"set": split}, progress)
        print(f"{done.state or ('ok' if done.ok else 'failed')}: {done.message}")
        return 0 if done.ok else 1
    finally:
        await ctx.poller.aclose()
        for fn in ctx.on_exit:
            r = fn()
            if asyncio.iscoroutine(r):
                await r


def cmd_rebalance(args: argparse.Namespace) -> int:
    from console.config.settings import ConfigError
    from console.session.deployment import DeploymentError

    try:
        return asyncio.run(_run(args))
    except (ConfigError, DeploymentError) as exc:
        print(f"pod-console rebalance: {exc}", file=sys.stderr)
        return 1
