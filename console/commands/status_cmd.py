"""``pod-console status --json``: one snapshot of the whole deployment, for scripts."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from . import aligned, examples


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="print the deployment's current snapshot",
        **examples(
            'pod-console status                      # a table of every slot',
            'pod-console status --json --sample 2    # the whole snapshot, rates over 2 s',
        ))
    p.add_argument("--json", action="store_true",
                   help="the whole snapshot as JSON (without it: a table to read)")
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
    if not args.json:
        print(slots_table(out))
        return 0
    print(json.dumps(out, indent=2, sort_keys=True, allow_nan=False))
    return 0


def slots_table(snap: dict) -> str:
    """One line per slot with the table's columns (catalog), then each slot's error."""
    from ..catalog import BY_KEY, columns

    cols = columns()
    rows = [("SLOT", "HEALTH", *(c.header for _, c in cols))]
    notes = []
    for s in snap["slots"]:
        figs = s.get("figures") or {}
        spec = figs.get("spec_decode") or {}
        rates = s.get("rates") or {}

        def value(key: str, figs=figs, spec=spec, rates=rates, s=s) -> float | None:
            if key == "kv_p99":
                return s.get("kv_p99")
            for src in (figs, spec, rates):
                if key in src:
                    return src[key]
            return None

        cells = []
        for fig, col in cols:
            text = fig.show(value(fig.key)) if s["health"] == "up" else "–"
            if col.joins and s["health"] == "up":
                text += "/" + BY_KEY[col.joins].show(value(col.joins))
            cells.append(text)
        rows.append((s["slot"], s["health"].upper(), *cells))
        if s.get("error"):
            notes.append(f"{s['slot']}: {s['error']}")
    return "\n".join(aligned(rows) + notes)
