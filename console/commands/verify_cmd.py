"""``pod-console smoke [--json]``: the deployment answers the way its users reach it
(``console/smoke.py``). Exit 0 when every check passes (skips allowed), 1 when one fails,
3 on a configuration that cannot be read."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from . import examples

EXIT_FAILED, EXIT_CONFIG = 1, 3


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


async def smoke_for_settings(settings, on_check=None):  # type: ignore[no-untyped-def]
    """The smoke test of the settings' deployment (today's profile, the pod's address)."""
    from ..collect.http import HttpClient
    from ..deployment import open_deployment
    from ..smoke import plan_for, run_smoke

    dep = open_deployment(settings)
    client = HttpClient()
    try:
        return await run_smoke(plan_for(dep.today.profile, dep.targets, settings), client,
                               on_check)
    finally:
        await client.aclose()


def cmd_smoke(args: argparse.Namespace) -> int:
    from ..deployment import DeploymentError
    from ..settings import ConfigError, load_settings

    try:
        settings = load_settings(args.config)
        from .pod_cmd import apply_current_pod

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
