"""``pod-console up|down``: the morning start and the evening stop, for cron/Task Scheduler.

The same Provisioner as the ``r``/``f`` keys. Progress goes to stdout as log
lines. Exit codes: 0 ok, 2 no capacity after all rounds, 3 fatal (API refused
or failing, bad config, unwritable state), 4 host checks failed on every
attempt, 5 slots never became healthy, 6 interrupted (SIGTERM, SIGHUP, SIGINT;
whatever it had created is terminated, a resumed pod stopped), 7 a pod may
still be billing (named with its $/h on stderr, and kept in the ledger so the
next ``up``/``down`` terminates it) — an interrupted run whose cleanup could not
settle everything within its bound exits 7, not 6.
The pod that came up is remembered in ``STATE_DIR/current_pod.json`` (by the
provisioner, as it adopts the pod) so the next ``down``, ``up`` and the console
follow it. One ``up``, ``down`` or console ``r``/``f`` runs at a time per state
directory (``ledger.exclusive``); each first settles what an earlier, interrupted
run left in ``STATE_DIR/pods.jsonl``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import math
import signal
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from console.commands import examples
from console.commands.argtypes import count, seconds
from console.config import config_file

if TYPE_CHECKING:  # the implementations load when a command runs, not with the parser
    from console.config.settings import Settings
    from console.sources.provider.base import Provider

# ``provision.EXIT_*``, without importing the provisioner to parse argv
EXIT_FATAL, EXIT_INTERRUPTED, EXIT_LEAKED = 3, 6, 7



def register(sub: argparse._SubParsersAction) -> None:
    u = sub.add_parser("up", help="resume the pod, or provision a new one in profile order",
        **examples(
            'pod-console up                          # resume, else fallback (cron at 08:50)',
            'pod-console up --rounds 12 --round-wait 600 --ssh-wait 600',
            'exit: 0 ok, 2 no capacity, 3 fatal, 4 host checks, 5 unhealthy or smoke',
            '      6 interrupted, 7 a pod may still be billing (named on stderr)',
        ))
    u.add_argument("--config", type=Path)
    u.add_argument("--rounds", type=count(1, 1000), default=12,
                   help="rounds when everything is sold out (1-1000)")
    u.add_argument("--round-wait", type=seconds(0, 86400), default=600.0,
                   help="seconds between rounds (0-86400)")
    u.add_argument("--health-wait", type=seconds(0, 86400, above=True), default=1800.0,
                   help="seconds to wait for every slot (up to 86400)")
    u.add_argument("--ssh-wait", type=seconds(0, 86400, above=True), default=600.0,
                   help="seconds to wait for a new pod's SSH (up to 86400)")
    u.add_argument("--cleanup-wait", type=seconds(0, 3600, above=True), default=45.0,
                   help="after SIGTERM, SIGHUP or SIGINT, seconds the cleanup may take "
                        "(default 45: inside systemd's 90 s stop timeout; up to 3600)")
    u.add_argument("--no-resume", action="store_true", help="go straight to a new pod")
    u.set_defaults(func=cmd_up)
    d = sub.add_parser("down", help="stop the pod (volume kept); safe to run twice",
        **examples(
            'pod-console down                        # stop the pod (cron at 18:05)',
            'pod-console down --force                # even if someone extended it',
            'exit: 0 stopped, or kept by an extension (said on stdout)',
            '      3 nothing stopped: no pod configured, a config error, or RunPod failed',
            '      6 interrupted (a signal); what it had started is settled',
            '      7 A POD MAY STILL BE BILLING: named with its $/h on stderr and kept in',
            '        the ledger (the next up/down stops it)',
        ))
    d.add_argument("--config", type=Path)
    d.add_argument("--force", action="store_true",
                   help="stop even when the pod's watchdog holds an extension")
    d.set_defaults(func=cmd_down)


def current_pod_file(settings: Settings) -> Path:
    return config_file.current_pod_file(settings.state_dir)


def apply_current_pod(settings: Settings) -> None:
    """``deployment.apply_current_pod``, imported when used: the CLI loads this module
    before the console's first frame, which must not wait for the settings' imports."""
    from console.session.deployment import apply_current_pod as apply

    apply(settings)


def _log(msg: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stdout gone (cron, closed pipe)
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}", flush=True)


def _loud(msg: str) -> None:
    _log(msg)
    with contextlib.suppress(OSError, ValueError):
        print(f"pod-console: {msg}", file=sys.stderr, flush=True)


class LeftBilling(Exception):
    """An interrupted run whose cleanup left something open in the ledger."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("; ".join(lines))
        self.lines = lines


def _tty() -> bool:
    with contextlib.suppress(OSError, ValueError):
        return sys.stdin.isatty()
    return False


def _audit(audit, action: str, args: dict, result: str, **extra) -> bool:
    """Write one audit record; a full disk is said on stderr, never a traceback."""
    from console.operations.audit import AuditError

    try:
        audit.append(action, args, result, **extra)
        return True
    except AuditError as exc:
        _loud(f"AUDIT RECORD LOST ({action} {result}): {exc}")
        return False


async def _interruptible(main: Callable[[], Awaitable[int]]) -> int:
    """SIGTERM and SIGHUP (a cron timeout, a dropped SSH session) cancel like SIGINT:
    the provisioner's cleanup then terminates whatever it had created."""
    task = asyncio.ensure_future(main())
    loop = asyncio.get_running_loop()
    got: list[str] = []

    def cancel(sig: signal.Signals) -> None:
        got.append(sig.name)
        _log(f"{sig.name} received: cleaning up before exit")
        task.cancel()

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        loop.add_signal_handler(sig, cancel, sig)
    try:
        return await task
    except asyncio.CancelledError:
        _loud(f"interrupted ({', '.join(got) or 'cancelled'}); what this run created was "
              "terminated (see the lines above)")
        return EXIT_INTERRUPTED
    except LeftBilling as exc:
        _loud(f"interrupted ({', '.join(got) or 'cancelled'}); the cleanup could not settle "
              f"everything: A POD MAY STILL BE BILLING: {exc}. The ledger keeps it: the next "
              "pod-console up/down terminates (or stops) it")
        return EXIT_LEAKED
    finally:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            loop.remove_signal_handler(sig)


def _setup(args: argparse.Namespace) -> tuple[Settings, Provider]:
    from console.config.settings import ConfigError, load_settings
    from console.sources.provider import make_provider

    settings = load_settings(args.config)
    apply_current_pod(settings)
    if settings.runpod_api_key is None:
        raise ConfigError("RUNPOD_API_KEY is not set")
    provider = make_provider(settings)
    assert provider is not None  # the key was checked above
    return settings, provider


async def _up(args: argparse.Namespace) -> int:
    from console.operations.ledger import exclusive

    settings, client = _setup(args)
    try:
        with exclusive(settings.state_dir, "pod-console up"):
            return await _up_locked(args, settings, client)
    finally:
        await client.aclose()


async def _tell_up_failed(settings: Settings, why: str) -> None:
    """A failed ``up`` told through the webhook's outbox (``session/outbox.py``): posted
    now if the receiver answers, else kept for the next session with a webhook to
    deliver (a cron ``up`` at 08:30 whose receiver was down loses nothing)."""
    import sqlite3  # here, not at the top: the CLI loads this module for every command

    from console.session.outbox import Outbox, drain, message

    assert settings.webhook_url is not None
    outbox = Outbox(settings.state_dir)
    payload = message("pod-console up", "raise", "crit", "pod-console up failed", why, None)
    try:
        await asyncio.to_thread(outbox.put, [("up", "raise", payload)], time.time())
        async with asyncio.timeout(15.0):  # the exit code already tells cron
            await drain(outbox, settings.webhook_url.get_secret_value(), 5.0,
                        asyncio.to_thread, on_error=_log)
    except (OSError, TimeoutError, sqlite3.Error) as exc:
        _log(f"the failure could not be handed to the webhook: {exc}")


async def _up_locked(args: argparse.Namespace, settings: Settings,
                     client: Provider) -> int:
    from console.operations.audit import AuditError, audit_log_for
    from console.operations.provision import (
        EXIT_LEAKED,
        ProvisionFailed,
    )
    from console.session.deployment import open_deployment

    dep = open_deployment(settings)
    cfg = dep.provision_config(rounds=args.rounds, round_wait_s=args.round_wait,
                               health_wait_s=args.health_wait, ssh_wait_s=args.ssh_wait,
                               cleanup_s=args.cleanup_wait)
    prov = dep.provisioner(client, cfg=cfg, log=_log)
    audit = audit_log_for(settings)
    try:
        audit.append("up", {"pod": settings.pod.machine_id}, "started")
    except AuditError as exc:
        _loud(f"nothing started: the audit log cannot be written ({exc})")
        return EXIT_FATAL
    for line in await prov.sweep():
        _loud(f"leftover: {line}")
    try:
        pod_id = None if args.no_resume else settings.pod.machine_id
        res = await prov.up(pod_id, dep.today)
    except ProvisionFailed as exc:
        (_loud if exc.code == EXIT_LEAKED else _log)(f"FAILED ({exc.code}): {exc.message}")
        _audit(audit, "up", {}, "failed", exit_code=exc.code, message=exc.message,
               leaked=(exc.leaked.id if exc.leaked else exc.leaked_name))
        if settings.webhook_url:
            await _tell_up_failed(settings, exc.message)
        return exc.code
    except asyncio.CancelledError:
        # the cleanup ran (bounded); what it could not settle is still open in the ledger
        left = prov.left_billing()
        _audit(audit, "up", {}, "interrupted", **({"leaked": left} if left else {}))
        if left:
            raise LeftBilling(left) from None
        raise
    # the provisioner wrote current_pod.json as it adopted the pod (before "kept")
    _audit(audit, "up", {}, "ok", pod=res.pod.id, profile=res.profile.name)
    _log(f"UP: pod {res.pod.id} with profile {res.profile.name} at {res.address.host}")
    return await _smoke_after_up(settings, audit, res.pod.id)


async def _smoke_after_up(settings: Settings, audit, pod_id: str) -> int:
    """``up``'s last step: the smoke test through the path users take. The pod stays up
    either way (it is healthy as far as the agent can tell); a failure is exit 5 naming
    the failing check, for cron to report."""
    from console.commands.smoke_run import smoke_for_settings
    from console.operations.provision import EXIT_UNHEALTHY
    from console.session.deployment import DeploymentError

    apply_current_pod(settings)  # the pod just brought up, at its address
    try:
        report = await smoke_for_settings(settings)
    except DeploymentError as exc:
        _loud(f"pod {pod_id} is UP but the smoke test could not run: {exc}")
        _audit(audit, "smoke", {"pod": pod_id}, "failed", message=str(exc))
        return EXIT_UNHEALTHY
    for line in report.lines():
        _log(line)
    if report.ok:
        _audit(audit, "smoke", {"pod": pod_id}, "ok", via=report.via)
        return 0
    failed = "; ".join(f"{c.name}: {c.evidence}" for c in report.failed)
    _loud(f"pod {pod_id} is UP but the smoke test FAILED: {failed}")
    _audit(audit, "smoke", {"pod": pod_id}, "failed", via=report.via, message=failed)
    return EXIT_UNHEALTHY


async def _down(args: argparse.Namespace) -> int:
    from console.operations.ledger import exclusive

    settings, client = _setup(args)
    try:
        with exclusive(settings.state_dir, "pod-console down"):
            return await _down_locked(settings, client, args.force)
    finally:
        await client.aclose()


async def _extension_holds(settings: Settings) -> str | None:
    """What keeps the pod up, as its agent says (None: nothing, or no agent to ask).
    The pod's own clock judges the extension: a laptop whose clock is off must not
    stop a pod its user extended, nor keep one whose extension ended."""
    from console.session.context import ssh_transport
    from console.sources.agent_client import AgentClient
    from console.sources.remote import AgentError
    from pod_agent.requests import StatusRequest

    transport = ssh_transport(settings)
    if transport is None:
        return None
    try:
        r = await AgentClient(transport).request(StatusRequest(), timeout_s=30)
    except AgentError as exc:
        _log(f"could not read the pod's extension ({exc}); stopping it")
        return None
    finally:
        with contextlib.suppress(Exception):
            transport.close()
    wd = (r.final or {}).get("watchdog") if r.ok else None
    ext = wd.get("extension") if isinstance(wd, dict) else None
    if not isinstance(wd, dict) or not isinstance(ext, dict):
        if not r.ok:
            _log(f"could not read the pod's extension ({r.message}); stopping it")
        return None
    try:
        until_t, now_t = float(ext["until"]), float(wd["now"])
        # an extension without a finite end is no extension: "inf" would keep it forever
        if not (math.isfinite(until_t) and math.isfinite(now_t)) or until_t <= now_t:
            return None
        until = dt.datetime.fromisoformat(str(ext["until_iso"])).strftime("%H:%M")
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    why = f": {ext['reason']}" if ext.get("reason") else ""
    return f"extended until {until} by {ext.get('by') or '?'}{why}"


async def _down_locked(settings: Settings, client: Provider, force: bool = False) -> int:
    from console.operations.audit import audit_log_for
    from console.operations.provision import EXIT_LEAKED, ProvisionFailed
    from console.session.deployment import provisioner

    # the composition root's, with no profile: terminating needs none, and a broken
    # profiles directory must never keep a pod billing
    prov = provisioner(settings, client, log=_log)
    audit = audit_log_for(settings)
    swept = await prov.sweep()
    for line in swept:
        _loud(f"leftover: {line}")
    leak = any(line.startswith(("COULD NOT", "TERMINATE FAILED")) for line in swept)
    if not settings.pod.machine_id:
        _log("no pod id configured")
        return EXIT_LEAKED if leak else (0 if swept else EXIT_FATAL)
    # asked with --force too: what a forced stop overrides belongs in its record
    held = await _extension_holds(settings)
    args: dict[str, object] = {"pod": settings.pod.machine_id}
    # who stopped it, as the console's pod run tells it: a person, or cron (no terminal)
    extra: dict[str, object] = {"via": "terminal" if _tty() else "cron"}
    if force:
        args["force"] = True
        if held is not None:
            extra["overrode"] = held
            _loud(f"down --force: stopping pod {settings.pod.machine_id} although it is "
                  f"{held}")
    elif held is not None:
        _log(f"pod {settings.pod.machine_id} kept: {held} (down --force stops it)")
        _audit(audit, "down", args, "kept", message=held)
        return EXIT_LEAKED if leak else 0
    try:
        msg = await prov.down(settings.pod.machine_id)
    except ProvisionFailed as exc:
        (_loud if exc.code == EXIT_LEAKED else _log)(f"FAILED: {exc.message}")
        _audit(audit, "down", args, "failed", message=exc.message, **extra)
        return exc.code
    _audit(audit, "down", args, "ok", message=msg, **extra)
    _log(msg)
    return EXIT_LEAKED if leak else 0


def _run(name: str, main: Callable[[], Awaitable[int]]) -> int:
    from console.config.settings import ConfigError
    from console.operations.ledger import Busy
    from console.session.deployment import DeploymentError

    try:
        return asyncio.run(_interruptible(main))
    except (ConfigError, DeploymentError, Busy) as exc:
        print(f"pod-console {name}: {exc}", file=sys.stderr)
        return EXIT_FATAL
    except Exception as exc:  # a bug: the provisioner already cleaned up on the way out
        traceback.print_exc()
        print(f"pod-console {name}: internal error {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return EXIT_FATAL


def cmd_up(args: argparse.Namespace) -> int:
    return _run("up", lambda: _up(args))


def cmd_down(args: argparse.Namespace) -> int:
    return _run("down", lambda: _down(args))
