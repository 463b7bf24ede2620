"""``pod-console status --json``: one snapshot of the whole deployment, for scripts."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="print the deployment's current snapshot")
    p.add_argument("--json", action="store_true", required=True)
    p.add_argument("--config", type=Path, help="config file (default: XDG config)")
    p.add_argument("--sample", type=float, default=0.0, metavar="S",
                   help="without Prometheus: scrape twice, S seconds apart, for rates")
    p.set_defaults(func=cmd_status)


async def _snapshot(args: argparse.Namespace) -> dict[str, object]:
    from ..deployment import open_deployment
    from ..settings import load_settings

    settings = load_settings(args.config)
    dep = open_deployment(settings)
    poller = dep.poller()
    try:
        snap = await poller.poll()
        await poller.probes_done()  # the real completion that poll started
        if args.sample > 0 and not settings.prometheus_url:
            await asyncio.sleep(args.sample)
        snap = await poller.poll()  # with the probe's answer (and rates, after a sample)
    finally:
        await poller.aclose()
    return snap.to_json()


def cmd_status(args: argparse.Namespace) -> int:
    from ..deployment import DeploymentError
    from ..settings import ConfigError

    try:
        out = asyncio.run(_snapshot(args))
    except (ConfigError, DeploymentError) as exc:
        print(f"pod-console status: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out, indent=2, sort_keys=True, allow_nan=False))
    return 0
