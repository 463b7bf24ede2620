"""``pod-agent``: the commands the console runs on the pod over SSH.

Every command prints JSON lines (``progress``, ``log``, ``result``, ``error``);
``check-host --json`` prints its one report object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from typing import Any

from . import __version__, paths
from .client import relay


def _profile(path: str | None):
    if not path:
        return None
    from .profiles import ProfileError, load_profile

    try:
        return load_profile(path)
    except ProfileError as exc:
        print(str(exc), file=sys.stderr)
        sys.exit(2)


def cmd_check_host(args: argparse.Namespace) -> int:
    from .hostcheck import exit_code, report, run_checks

    profile = _profile(args.profile)
    checks = run_checks(profile, p2p_timeout_s=args.p2p_timeout,
                        env_path=None if args.no_env else paths.env_file(),
                        disk_path=args.disk_path, mem_floor_gib=args.mem_floor_gib)
    rep = report(checks)
    _audit_local("check-host", {"ok": rep["ok"]})
    if args.json:
        print(json.dumps(rep, sort_keys=True))
    else:
        for c in rep["checks"]:
            mark = {True: "ok  ", False: "FAIL", None: "skip"}[c["ok"]]
            print(f"{mark} {c['name']:<12} {c['detail']}")
    return exit_code(checks)


def cmd_serve(args: argparse.Namespace) -> int:
    from .supervisor import Supervisor

    sup = Supervisor(args.profile, vllm=args.vllm, models_root=args.models_root,
                     watchdog_interval_s=args.watchdog_interval,
                     heartbeat_interval_s=args.heartbeat_interval,
                     backoff_s=tuple(float(x) for x in args.backoff.split(",")),
                     apply_patches=not args.no_patches)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, sup.request_stop)
        await sup.run()

    asyncio.run(main())
    return 0


def cmd_gpus(args: argparse.Namespace) -> int:
    """One telemetry sample of every GPU (NVML, else nvidia-smi)."""
    from .gpus import Telemetry

    tel = Telemetry().sample_once()  # GPM figures over a second, as nvidia-smi dmon
    if args.json:
        print(json.dumps(tel.to_json(), sort_keys=True))
    else:
        if tel.error:
            print(f"no GPU telemetry: {tel.error}", file=sys.stderr)
        for r in tel.readings:
            mib = r.memory_mib()  # as nvidia-smi prints them
            reserved = f" (+{mib['reserved']} reserved)" if mib["reserved"] is not None \
                else ""
            print(f"{r.index} {r.name:<14} util {r.util_gpu_pct or 0:3.0f}%  "
                  f"mem {mib['used'] or 0}/{mib['total'] or 0} MiB{reserved}  "
                  f"{r.temp_c or 0:3.0f}C  "
                  f"{r.power_w or 0:5.0f}/{r.power_limit_w or 0:.0f} W  "
                  f"{','.join(r.throttled) or 'not throttled'}  {_gpm_line(r)}")
        top = tel.topology
        if top and len(top.get("gpus") or ()) > 1:  # nvidia-smi topo -m's GPU columns
            from .topology import render

            print(render(top["gpus"], top["matrix"]))
    return 1 if tel.error and not tel.readings else 0


def _gpm_line(r: Any) -> str:
    """The GPM figures in a few words, or that this GPU has none."""
    if not r.gpm_supported:
        return "GPM: not on this GPU"
    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f}%"
    return (f"SM active {pct(r.sm_active_pct)} occupancy {pct(r.sm_occupancy_pct)} "
            f"tensor {pct(r.tensor_active_pct)} DRAM {pct(r.dram_active_pct)}")


def cmd_exporter(args: argparse.Namespace) -> int:
    import threading

    from .exporter import Exporter, main_loop, parse_listen

    token = None
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as fh:
                token = fh.read().strip()
        except OSError as exc:
            print(f"--token-file: {exc}", file=sys.stderr)
            return 2
        if len(token) < 16:
            print("--token-file: the token must be at least 16 characters", file=sys.stderr)
            return 2
    host, port = parse_listen(args.listen)
    try:
        exporter = Exporter(host, port, args.interval, token, from_agent=args.from_agent)
    except OSError as exc:
        print(f"cannot listen on {args.listen}: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(json.dumps({"event": "listening", "port": exporter.port,
                      "source": exporter.source,
                      "nvml_error": exporter.telemetry and exporter.telemetry.nvml_error}),
          flush=True)
    main_loop(exporter, stop)
    return 0


def _audit_local(op: str, extra: dict) -> None:
    import time

    try:
        with open(paths.audit_log(), "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"t": round(time.time(), 3), "op": op, **extra}) + "\n")
    except OSError:
        pass


def build_parser() -> argparse.ArgumentParser:
    """``pod-agent``'s parser, every subcommand with its options (docs' test reads it)."""
    p = argparse.ArgumentParser(prog="pod-agent", description=__doc__)
    p.add_argument("--version", action="version", version=f"pod-agent {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)

    c = sub.add_parser("check-host", help="GPU, driver CUDA, P2P, pidfd, disk, memory checks")
    c.add_argument("--json", action="store_true")
    c.add_argument("--profile")
    c.add_argument("--p2p-timeout", type=float,
                   default=float(os.environ.get("POD_AGENT_P2P_TIMEOUT", "90")))
    c.add_argument("--disk-path", help="where the weights go (default: HF_HOME or ~)")
    c.add_argument("--mem-floor-gib", type=float, default=12.0)
    c.add_argument("--no-env", action="store_true", help="do not write the P2P verdict to .env")
    c.set_defaults(func=cmd_check_host)

    s = sub.add_parser("serve", help="run the slot supervisor and watchdog (long-running)")
    s.add_argument("--profile", required=True)
    s.add_argument("--vllm", default=os.environ.get("POD_AGENT_VLLM", "vllm"))
    s.add_argument("--models-root", help="local weights: DIR/<owner>/<name> used if present")
    s.add_argument("--watchdog-interval", type=_interval, default=30.0,
                   help="seconds between watchdog ticks on the pod's clock (an accelerated "
                        "clock ticks as often in pod time: half a real second at x60)")
    s.add_argument("--heartbeat-interval", type=_heartbeat_interval, default=30.0,
                   metavar="S",
                   help="real seconds between two sends of the agent's Watchdog alert to "
                        "the Alertmanager at POD_AGENT_ALERTMANAGER_URL (environment or "
                        ".env; none without it); each ends 4 intervals ahead")
    s.add_argument("--no-patches", action="store_true")
    s.add_argument("--backoff", default="5,10,30,60,120",
                   help="restart delays in seconds after a crash; the last repeats")
    s.set_defaults(func=cmd_serve)

    # the requests the supervisor takes: one subcommand each, made from its model
    # (pod_agent/requests.py), so what the console sends parses back into that model
    from .requests import add_commands

    add_commands(sub, relay)

    g = sub.add_parser("gpus", help="GPU telemetry now: utilisation, memory, heat, power, "
                                    "throttling, ECC, remapped rows, processes")
    g.add_argument("--json", action="store_true")
    g.set_defaults(func=cmd_gpus)

    ex = sub.add_parser("exporter", help="GPU metrics for Prometheus, dcgm-exporter names "
                                         "(metrics only, its own process)")
    ex.add_argument("--listen", default="127.0.0.1:9400", metavar="[HOST:]PORT")
    ex.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    ex.add_argument("--token-file", help="scrapers must send 'Authorization: Bearer TOKEN'")
    ex.add_argument("--from-agent", action="store_true",
                    help="take the running supervisor's samples (its Unix socket) instead "
                         "of loading NVML here: one process on the pod holds NVML")
    ex.set_defaults(func=cmd_exporter)

    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


def _interval(text: str) -> float:
    import math

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(v) and 0.05 <= v <= 3600):
        raise argparse.ArgumentTypeError("seconds from 0.05 to 3600")
    return v


def _heartbeat_interval(text: str) -> float:
    v = _interval(text)
    if v < 0.5:
        raise argparse.ArgumentTypeError("seconds from 0.5 to 3600")
    return v


if __name__ == "__main__":
    sys.exit(main())
