"""``pod-console fleet``: every context's pod on one line (``console/session/fleet.py``)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

from console.commands import examples

if TYPE_CHECKING:
    from console.model.fleet import FleetSnapshot


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fleet", help="every pod of the config's contexts: state, GPUs, $/h, "
                                     "spend today and this month, stop countdown, worst "
                                     "slot, TTFT p95, KV p99, alerts",
        **examples(
            'pod-console fleet                       # one line per pod, then the totals',
            'pod-console fleet --json                # the same as one JSON object',
        ))
    p.add_argument("--config", type=Path)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_fleet)


async def _fleet(config: Path | None) -> FleetSnapshot:
    from console.session.fleet import FleetCollector

    fleet = FleetCollector(config)
    try:
        snap = await fleet.poll()
        # a second cycle: rates over a window and the completion probes' answers, as a
        # one-shot `status` gives them
        for m in fleet.members:
            if m.poller is not None:
                await m.poller.probes_done()
        return await fleet.poll() if not fleet.shared_prometheus else snap
    finally:
        await fleet.aclose()


def cmd_fleet(args: argparse.Namespace) -> int:
    snap = asyncio.run(_fleet(args.config))
    if args.json:
        print(json.dumps(snap.to_json(), indent=2, sort_keys=True))
    else:
        print("\n".join(snap.lines()))
    return 1 if all(r.error and r.pod_id is None for r in snap.rows) else 0
