"""``pod-console status``: one snapshot of the whole deployment, for people and scripts.

Beside the slots it says what the pod is doing and costing (from the provider and the
agent, as the console's header does) and which alert conditions hold now, evaluated by
the console's own rules. A one-shot command cannot know how long a condition has held:
an alert whose rule has a ``for:`` duration is reported ``pending``, as Prometheus
reports a rule on its first evaluation."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.commands import aligned, examples
from console.commands.argtypes import seconds
from console.model.printable import printable_lines

if TYPE_CHECKING:
    from console.model.snapshot import AgentHeartbeat, PodSnapshot


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="print the deployment's current snapshot",
        **examples(
            'pod-console status                      # a table of every slot',
            'pod-console status --json --sample 2    # the whole snapshot, rates over 2 s',
        ))
    p.add_argument("--json", action="store_true",
                   help="the whole snapshot as JSON (without it: a table to read)")
    p.add_argument("--config", type=Path, help="config file (default: XDG config)")
    p.add_argument("--sample", type=seconds(0, 3600), default=0.0, metavar="S",
                   help="without Prometheus: scrape twice, S seconds apart, for rates")
    p.set_defaults(func=cmd_status)


async def _snapshot(args: argparse.Namespace) -> dict[str, object]:
    from console.config.settings import load_settings
    from console.model.pod_stop import probe_hold
    from console.session.deployment import apply_current_pod, connect
    from console.session.judging import judge_once

    settings = load_settings(args.config)
    apply_current_pod(settings)  # the pod ``up`` (or ``f``/``r``) last brought up
    dep, parts = connect(settings)  # the console's wiring: GPU source, agent and all
    poller, pods = parts.poller, parts.pods
    gw_col = _gateway_collector(settings, poller.client, dep.today.profile)
    gw = None
    try:
        # the pod first: on an idle pod the completion probe waits (it is a request, and
        # a ``status`` run from cron would otherwise keep a pod nobody uses running)
        pod = await pods.poll()
        # (no stop plan served: the slots' own counters say whether anyone uses it)
        poller.probe_hold = lambda: probe_hold(pod, poller.in_use(0.0))
        snap, _ = await asyncio.gather(
            poller.poll(), gw_col.poll(time.time()) if gw_col else asyncio.sleep(0))
        await poller.probes_done()  # the real completion that poll started
        if args.sample > 0 and not settings.prometheus_url:
            await asyncio.sleep(args.sample)
        # with the probe's answer (and rates, after a sample)
        snap, gw = await asyncio.gather(
            poller.poll(), gw_col.poll(time.time()) if gw_col else asyncio.sleep(0))
    finally:
        await parts.aclose()
    now = time.time()
    judged = await judge_once(snap, pod, dep.today.profile, settings, now)
    pod, conds = judged.pod or pod, judged.conditions
    if gw_col is not None:
        from console.model.gateway import conditions as gateway_conditions

        conds = (*conds, *gateway_conditions(gw, snap, settings.gateway, settings.alerts))
    out = snap.to_json()
    out["pod"] = pod_json(pod, now)
    out["probe_held"] = poller.probe_hold()  # why no slot was probed (None: they were)
    out["gateway"] = gw.as_json() if gw is not None else None
    out["alerts"] = [{"key": c.key, "severity": c.severity, "title": c.title,
                      "detail": c.detail, "state": "firing" if c.for_s <= 0 else "pending",
                      "for_s": c.for_s} for c in conds]
    out["delivery"] = await asyncio.to_thread(delivery_json, settings, now,
                                              pod.agent_heartbeat)
    return out


def delivery_json(settings: Any, now: float,
                  agent: AgentHeartbeat | None = None) -> dict[str, object]:
    """Where alerts go and what is still on the way: the webhook's outbox (depth, oldest
    entry), the console's heartbeat's last send, as the sessions on this state dir left
    them, and the pod agent's own heartbeat as its ``status`` said it (None: no agent
    answered, or one that does not say)."""
    from console.session.alertmanager import load_watchdog
    from console.session.outbox import Outbox

    try:
        outbox: dict[str, object] = Outbox(settings.state_dir).depth().to_json(now)
    except Exception as exc:  # an unreadable outbox is said, not a failed status
        outbox = {"error": f"{type(exc).__name__}: {exc}"[:200]}
    return {"webhook": settings.webhook_url is not None, "webhook_outbox": outbox,
            "alertmanager": settings.alertmanager_url,
            "watchdog_sent_at": load_watchdog(settings.state_dir),
            "agent_watchdog": None if agent is None else agent.to_json()}


def _gateway_collector(settings: Any, client: Any, profile: Any) -> Any:
    """The gateway's collector when one is watched (``gateway_url``), else None."""
    if not settings.gateway_url or not settings.gateway.watch:
        return None
    from console.session.deployment import gateway_collector

    return gateway_collector(settings, client, settings.request_timeout_s, profile)


def pod_json(pod: PodSnapshot, now: float) -> dict[str, object]:
    """The pod as the header shows it; every figure None when its source did not answer
    (``provider_error``/``agent_error`` say why)."""
    return {"pod_id": pod.pod_id, "status": pod.status, "gpu_name": pod.gpu_name,
            "gpu_count": pod.gpu_count, "cost_per_hr": pod.cost_per_hr,
            "spend_today": pod.spend_today(now), "uptime_s": pod.uptime_s(now),
            "started_at": pod.started_at, "next_stop": pod.next_stop,
            "stop_in_s": pod.stop_in_s(now), "watchdog_armed": pod.watchdog_armed,
            "p2p_disabled": pod.p2p_disabled, "host_cuda": pod.host_cuda,
            "provider_error": pod.provider_error, "agent_error": pod.agent_error,
            "gpus": pod.gpus.to_json() if pod.gpus is not None else None,
            "projected_today": pod.projected_today(now), "stop": stop_json(pod, now)}


def stop_json(pod: PodSnapshot, now: float) -> dict[str, object] | None:
    """The agent's stop policy: what stops the pod next and when, idleness, the
    extension, why it last stopped."""
    plan = pod.stop_plan
    if plan is None:
        return None
    return {"next_reason": plan.next_reason, "in_s": plan.stop_in(now),
            "warning": plan.warning, "grace_until": plan.grace_until,
            "idle_s": plan.idle(now), "idle_stop_after_s": plan.idle_after_s,
            "extension": None if not plan.extension_until else {
                "until": plan.extension_until, "by": plan.extension_by,
                "reason": plan.extension_reason},
            "last_stop_reason": plan.last_stop_reason, "pod_clock_skew_s": plan.skew_s,
            "memory_warning": plan.memory_warning,
            "watchdog_failing": None if not plan.failing_since else {
                "since": plan.failing_since, "ticks": plan.failing_ticks,
                "error": plan.failing_error}}


def cmd_status(args: argparse.Namespace) -> int:
    from console.config.settings import ConfigError
    from console.session.deployment import DeploymentError

    try:
        out = asyncio.run(_snapshot(args))
    except (ConfigError, DeploymentError) as exc:
        print(f"pod-console status: {exc}", file=sys.stderr)
        return 1
    if not args.json:
        print(printable_lines(slots_table(out)))  # words from pods, slots, gateway
        gw = out.get("gateway")
        if isinstance(gw, dict):
            print(printable_lines(str(gw.get("headline", ""))))
        return 0
    print(json.dumps(out, indent=2, sort_keys=True, allow_nan=False))
    return 0


def slots_table(snap: dict) -> str:
    """One line per slot with the table's columns (catalog), then each slot's error."""
    from console.model.catalog import BY_KEY, columns

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
    return "\n".join(pod_lines(snap.get("pod")) + aligned(rows) + notes
                     + alert_lines(snap.get("alerts")))


def pod_lines(pod: dict | None) -> list[str]:
    from console.model import fmt

    if not pod or (pod["pod_id"] is None and pod["status"] is None):
        return []  # no pod configured: nothing to say about it
    status = pod["status"]
    if status is None:  # RunPod not read: the agent answering is the pod running
        status = ("RUNNING (its agent answers; RunPod not read)"
                  if pod.get("agent_error") is None and pod.get("uptime_s") is not None
                  else "state unknown (RunPod not read)")
    cost = (f"{fmt.money(pod['cost_per_hr'])}/h" if pod["cost_per_hr"] is not None else
            "$/h unknown (" + ("RunPod did not answer: provider error below"
                               if pod.get("provider_error") else "RunPod gave no price") + ")")
    line = (f"pod {pod['pod_id'] or fmt.DASH} {status}  "
            f"{cost}  today {fmt.money(pod['spend_today'])}  "
            f"up {fmt.duration(pod['uptime_s'], False)}")
    if pod.get("stop_in_s") is not None:
        line += f"  stop in {fmt.duration(pod['stop_in_s'], False)}"
    out = [line]
    for key in ("provider_error", "agent_error"):
        if pod.get(key):
            out.append(f"  {key.replace('_', ' ')}: {pod[key]}")
    return [*out, ""]


def alert_lines(alerts: list[dict] | None) -> list[str]:
    if alerts is None:
        return []
    if not alerts:
        return ["", "no alert conditions hold"]
    return ["", *(f"{a['severity'].upper():<4} {a['state']:<7} {a['title']}"
                  + (f" — {a['detail']}" if a["detail"] else "") for a in alerts)]
