"""``pod-console up|down``: the morning start and the evening stop, for cron/Task Scheduler.

The same Provisioner as the ``r``/``f`` keys. Progress goes to stdout as log
lines. Exit codes: 0 ok, 2 no capacity after all rounds, 3 fatal API error,
4 host checks failed on every attempt, 5 slots never became healthy.
The pod that came up is remembered in ``STATE_DIR/current_pod.json`` so the
next ``down``, ``up`` and the console follow it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .. import config_file

if TYPE_CHECKING:  # the implementations load when a command runs, not with the parser
    from ..provider.runpod import RunPodClient
    from ..remote import AgentTransport
    from ..settings import Settings

EXIT_FATAL = 3  # ``provision.EXIT_FATAL``, without importing the provisioner to parse argv


def register(sub: argparse._SubParsersAction) -> None:
    u = sub.add_parser("up", help="resume the pod, or provision a new one in profile order")
    u.add_argument("--config", type=Path)
    u.add_argument("--rounds", type=int, default=12, help="rounds when everything is sold out")
    u.add_argument("--round-wait", type=float, default=600.0, help="seconds between rounds")
    u.add_argument("--health-wait", type=float, default=1800.0,
                   help="seconds to wait for every slot")
    u.add_argument("--no-resume", action="store_true", help="go straight to a new pod")
    u.set_defaults(func=cmd_up)
    d = sub.add_parser("down", help="stop the pod (volume kept); safe to run twice")
    d.add_argument("--config", type=Path)
    d.set_defaults(func=cmd_down)


def current_pod_file(settings: Settings) -> Path:
    return config_file.current_pod_file(settings.state_dir)


def apply_current_pod(settings: Settings) -> None:
    """The pod ``up`` last brought up wins over the config file's pod id."""
    cur = config_file.read_current_pod(settings.state_dir)
    if not cur:
        return
    settings.pod.runpod_id = cur["runpod_id"]
    if "host" in cur:
        settings.pod.host = cur["host"]
    if "port_map" in cur:
        settings.pod.port_map = cur["port_map"]
    if "profile" in cur:
        settings.profile = cur["profile"]


def _log(msg: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}", flush=True)


def _setup(args: argparse.Namespace) -> tuple[Settings, RunPodClient]:
    from ..provider.runpod import RunPodClient
    from ..settings import ConfigError, load_settings

    settings = load_settings(args.config)
    apply_current_pod(settings)
    if settings.runpod_api_key is None:
        raise ConfigError("RUNPOD_API_KEY is not set")
    return settings, RunPodClient(settings.runpod_api_key)


async def _up(args: argparse.Namespace) -> int:
    from ..actions.audit import AuditLog
    from ..alerts import Alert, notify
    from ..deployment import open_deployment
    from ..provision import ProvisionConfig, Provisioner, ProvisionFailed
    from ..remote import AgentEndpoint, AgentTransport

    settings, client = _setup(args)
    dep = open_deployment(settings)
    cfg = ProvisionConfig(rounds=args.rounds, round_wait_s=args.round_wait,
                          health_wait_s=args.health_wait,
                          render_dir=settings.state_dir / "rendered",
                          prometheus_url=settings.prometheus_url,
                          agent_dir=settings.pod.agent_dir)

    def factory(pod, agent_cmd: str) -> AgentTransport:
        host, port = pod.ssh_endpoint
        return AgentTransport(AgentEndpoint(host, port, settings.pod.ssh_user,
                                            settings.pod.ssh_key, pod.id, agent_cmd),
                              settings.state_dir)

    prov = Provisioner(client, list(dep.profiles), factory, cfg, log=_log,
                       pod_id=settings.pod.runpod_id)
    audit = AuditLog(settings.state_dir / "audit.jsonl")
    audit.append("up", {"pod": settings.pod.runpod_id}, "started")
    try:
        pod_id = None if args.no_resume else settings.pod.runpod_id
        res = await prov.up(pod_id, dep.today)
    except ProvisionFailed as exc:
        _log(f"FAILED ({exc.code}): {exc.message}")
        audit.append("up", {}, "failed", exit_code=exc.code, message=exc.message)
        if settings.webhook_url:
            now = time.time()
            await notify(settings.webhook_url.get_secret_value(),
                         [Alert("up", "crit", "pod-console up failed", exc.message, now)], [],
                         "pod-console up")
        return exc.code
    finally:
        await client.aclose()
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    current_pod_file(settings).write_text(json.dumps({
        "pod_id": res.pod.id, "profile": res.profile.name, "host": res.address.host,
        "port_map": res.address.port_map, "since": time.time()}, indent=1))
    audit.append("up", {}, "ok", pod=res.pod.id, profile=res.profile.name)
    _log(f"UP: pod {res.pod.id} with profile {res.profile.name} at {res.address.host}")
    return 0


async def _down(args: argparse.Namespace) -> int:
    from ..actions.audit import AuditLog
    from ..provision import ProvisionConfig, Provisioner, ProvisionFailed

    settings, client = _setup(args)
    if not settings.pod.runpod_id:
        _log("no pod id configured")
        return EXIT_FATAL
    prov = Provisioner(client, [], lambda *a: None, ProvisionConfig(), log=_log)
    audit = AuditLog(settings.state_dir / "audit.jsonl")
    try:
        msg = await prov.down(settings.pod.runpod_id)
    except ProvisionFailed as exc:
        _log(f"FAILED: {exc.message}")
        audit.append("down", {"pod": settings.pod.runpod_id}, "failed", message=exc.message)
        return exc.code
    finally:
        await client.aclose()
    audit.append("down", {"pod": settings.pod.runpod_id}, "ok", message=msg)
    _log(msg)
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    from ..deployment import DeploymentError
    from ..settings import ConfigError

    try:
        return asyncio.run(_up(args))
    except (ConfigError, DeploymentError) as exc:
        print(f"pod-console up: {exc}", file=sys.stderr)
        return EXIT_FATAL


def cmd_down(args: argparse.Namespace) -> int:
    from ..deployment import DeploymentError
    from ..settings import ConfigError

    try:
        return asyncio.run(_down(args))
    except (ConfigError, DeploymentError) as exc:
        print(f"pod-console down: {exc}", file=sys.stderr)
        return EXIT_FATAL
