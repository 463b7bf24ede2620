"""``pod-console doctor``: every check of the set-up, each with its result, one sentence
and the next step (``console/session/doctor/``); ``--bundle`` writes a support bundle
with no secret in it (``console/session/doctor/bundle.py``).

exit: 0 all ok (checks that do not apply are skipped), 1 a warning, 2 a failure; 3 the
bundle could not be written safely."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from console.commands import examples

EXIT_BUNDLE = 3


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check the whole set-up: config, SSH, agent, slots, "
                                      "Prometheus, gateway, Alertmanager, exporter, clock, "
                                      "disk",
        **examples(
            'pod-console doctor                      # ok/warn/fail per check, next steps',
            'pod-console doctor --json               # the same as one JSON object',
            'pod-console doctor --bundle support.tar.gz   # for a ticket; no secrets',
            'exit: 0 all ok, 1 a warning, 2 a failure, 3 bundle not written',
        ))
    p.add_argument("--config", type=Path, help="config file (default: XDG config)")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.add_argument("--bundle", type=Path, metavar="FILE.tar.gz",
                   help="also write a support bundle (redacted) to this new file")
    p.add_argument("--tail", type=int, default=200, metavar="N",
                   help="lines of the audit log and errors.log in the bundle (default 200)")
    p.set_defaults(func=cmd_doctor)


async def _doctor(args: argparse.Namespace) -> int:
    from console.session.doctor import load, run_doctor

    settings, error = await asyncio.to_thread(load, args.config)
    report = await run_doctor(settings, error)
    if args.json:
        print(json.dumps(report.to_json(), indent=1, sort_keys=True))
    else:
        print("\n".join(report.lines()))
    if args.bundle is not None:
        from console.session.deployment import ssh_transport
        from console.session.doctor import open_for
        from console.session.doctor.bundle import BundleError, write_bundle

        dep = (await asyncio.to_thread(open_for, settings))[0] if settings else None
        transport = ssh_transport(settings) if settings is not None else None
        try:
            bundle = await write_bundle(args.bundle, report, settings, args.config,
                                        deployment=dep, transport=transport,
                                        tail_lines=max(1, args.tail))
        except (BundleError, OSError) as exc:
            print(f"pod-console doctor: bundle not written: {exc}", file=sys.stderr)
            return EXIT_BUNDLE
        finally:
            if transport is not None:
                transport.close()
        left = f" ({len(bundle.missing)} item(s) missing: see MANIFEST.json)" \
            if bundle.missing else ""
        print(f"bundle written to {args.bundle}{left}", file=sys.stderr)
    return report.exit_code


def cmd_doctor(args: argparse.Namespace) -> int:
    return asyncio.run(_doctor(args))
