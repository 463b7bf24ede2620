"""Alertmanager as the console's receiver (issue 43, items 1, 2 and 5), through its v2 API.

The console sends as Prometheus does: every evaluation (poll) each firing alert again,
with ``endsAt`` a few intervals ahead (a console that stops sending lets its alerts
resolve there on their own), and a resolved one once with ``endsAt`` now. Alertmanager
deduplicates by the label set, so every console, wall and ``record`` of a deployment may
send: the labels are derived from the alert alone (``labels_of``), identical in each.
Grouping, repeats, retries, inhibition and receivers are then Alertmanager's.

An acknowledgement is a silence (author, comment, expiry) on the alert's exact labels;
silences made in Alertmanager's UI or ``amtool`` show as acknowledgements here. The
``Watchdog`` alert (the dead-man's-switch convention of kube-prometheus) is sent with
every batch: a receiver that stops hearing it knows the console side is gone.

Everything here is a request with one deadline over the whole exchange (``asyncio.timeout``:
httpx's own timeout is per read); the session runs them beside the poll.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from msgspec import Struct

from console.model.alerts import Alert
from console.model.printable import printable
from pod_agent import heartbeat
from pod_agent.heartbeat import iso

ALERTNAMES = {
    "down": "SlotDown", "probe": "SlotCompletionsFailing", "starting": "SlotStarting",
    "stall": "SlotStalled", "kv": "SlotKvCacheHigh", "ttft": "SlotTtftHigh",
    "preempt": "SlotPreempting", "accept": "SlotAcceptanceLow", "slo": "SlotSloAttainmentLow",
    "restarting": "SlotRestarting",
    "stopped": "PodStopped", "agent": "PodAgentUnreachable", "provider": "ProviderApiError",
    "watchdog": "PodWatchdogStopFailed", "hours": "PodOutsideWorkingHours",
    "stop-soon": "PodStopSoon", "memory-guard": "PodMemoryGuard", "pod-clock": "PodClockSkew",
    "extension-ends": "PodExtensionEnds", "cuda": "HostCudaTooOld", "p2p": "GpuP2pDisabled",
    "prometheus": "PrometheusUnreachable", "util": "GpuOvercommitted",
    "ecc": "GpuEccErrors", "remap": "GpuRowRemapPending", "remapfail": "GpuRowRemapFailed",
    "throttle": "GpuThrottled", "heat": "GpuHot", "stray": "GpuStrayProcess", "xid": "GpuXid",
    "gw-down": "GatewayDown", "gw-ready": "GatewayNotReady",
    "gw-metrics": "GatewayMetricsUnreadable", "gw-fallbacks": "GatewayFallbacksRising",
    "gw-cooldown": "GatewayDeploymentCooldown",
    "gw-5xx": "Gateway5xxHigh", "gw-overhead": "GatewayOverheadHigh",
    "gw-route": "GatewayRouteFailing",
}
"""Alert key prefix → ``alertname`` (the rendered Prometheus rules use the same names)."""
SLOT_KEYS = {"down", "probe", "starting", "stall", "kv", "ttft", "preempt", "accept", "slo",
             "restarting"}
PLANNED_STOP = "PodStopPlanned"
"""A stop somebody meant (severity info): issue 43's name. A stop nobody here made (the
provider, someone at its console: a WARN) keeps ``PodStopped``; the rendered inhibit rule
takes both, as the console holds its slots' and agent's alerts for both."""
GPU_KEYS = {"util", "ecc", "remap", "remapfail", "throttle", "heat", "stray", "xid"}
SEVERITY = {"crit": "critical", "warn": "warning", "info": "info"}
ACK_COMMENT = "pod-console acknowledgement"
"""How the silences this console makes begin (it expires them when their alert clears)."""


DEFAULT_CONTEXT = "default"
"""The ``context`` label of a config without contexts (Alertmanager drops empty labels)."""


class Where(Struct, frozen=True):
    """What every alert of a session is labelled with."""

    profile: str
    pod: str
    context: str = DEFAULT_CONTEXT


def _label(value: str) -> str:
    return printable(value, 200)


def alertname(key: str, severity: str | None = None) -> str:
    prefix = key.split(":", 1)[0]
    if prefix == "stopped" and severity == "info":
        return PLANNED_STOP
    if prefix in ALERTNAMES:
        return ALERTNAMES[prefix]
    return "".join(p.capitalize() for p in re.split(r"[^A-Za-z0-9]+", prefix) if p) or "Alert"


def labels_of(alert: Alert, where: Where) -> dict[str, str]:
    """The alert's label set: the same in every session that judges it (its identity in
    Alertmanager), never its title or figures (they change while it fires)."""
    prefix, _, rest = alert.key.partition(":")
    labels = {"alertname": alertname(alert.key, alert.severity),
              "severity": SEVERITY[alert.severity],
              "profile": _label(where.profile), "pod": _label(where.pod),
              "context": _label(where.context)}
    if prefix in SLOT_KEYS and rest:
        labels["slot"] = _label(rest)
    elif prefix in GPU_KEYS and rest:
        # a hardware fault's key ends in "@pod" (``gpu_faults``): the pod is a label of
        # its own, so the GPU is the index alone, as the exporter's ``gpu`` label
        gpu, _, more = rest.split("@", 1)[0].partition(":")
        labels["gpu"] = _label(gpu)
        if prefix == "xid" and more:
            # one alert per pod, GPU and code (the rendered rules' identity): a second
            # Xid 79 of the same GPU is the same fault, not a second page
            labels["xid"] = _label(more.split(":", 1)[0])
    elif prefix in ALERTNAMES and rest:
        labels["scope"] = _label(rest)  # a gateway group, a model id
    elif prefix not in ALERTNAMES:
        labels["key"] = _label(alert.key)
    return labels


def api_alert(alert: Alert, where: Where, now: float, *, ends_at: float,
              runbook_url: str | None = None) -> dict[str, Any]:
    """One alert as ``POST /api/v2/alerts`` takes it."""
    labels = labels_of(alert, where)
    ann = {"summary": _label(alert.title)}
    if alert.description():  # what to do about it, and what it explains
        ann["description"] = printable(alert.description(), 1000)
    if runbook_url:
        ann["runbook_url"] = runbook_url.replace("{alertname}", labels["alertname"])
    starts = alert.fired_at if alert.fired_at is not None else alert.since
    return {"labels": labels, "annotations": ann, "startsAt": iso(min(starts, now)),
            "endsAt": iso(ends_at), "generatorURL": ""}


def restarting(slot: str, op: str, where: Where, since: float, now: float, *,
               ends_at: float) -> dict[str, Any]:
    """``SlotRestarting`` (info): an operation of this console takes ``slot`` down on
    purpose (``inhibit.InhibitBook.restarting``). The console holds that slot's alerts
    itself; this tells Alertmanager, whose rendered inhibit rule then mutes the same
    slot's alerts from Prometheus's rules (their ``for`` is shorter than a restart)."""
    a = Alert(f"restarting:{slot}", "info", f"{slot} restarting ({op})",
              "taken down on purpose by an operation: its alerts are held until it is "
              "up again", since, fired_at=since)
    return api_alert(a, where, now, ends_at=ends_at)


def watchdog(where: Where, now: float, ends_at: float, started: float) -> dict[str, Any]:
    """The always-firing heartbeat (``severity: none``: routed to the rendered config's
    ``heartbeat`` receiver), in the shape the pod agent's own takes
    (``pod_agent/heartbeat.py``): ``sender: pod-console`` and no ``pod`` label, so a
    dead-man's switch tells "no console" from "this pod's agent is gone"."""
    return heartbeat.alert({"context": _label(where.context), "sender": "pod-console"},
                           "pod-console is watching: this alert always fires; its absence "
                           "means no console session is running", now, started, ends_at)


def silence(labels: dict[str, str], who: str, now: float, until: float) -> dict[str, Any]:
    return {"matchers": [{"name": k, "value": v, "isRegex": False, "isEqual": True}
                         for k, v in sorted(labels.items())],
            "startsAt": iso(now), "endsAt": iso(until), "createdBy": _label(who),
            "comment": f"{ACK_COMMENT} (expires when the alert clears)"}


def exact(matchers: Iterable[dict[str, Any]]) -> dict[str, str] | None:
    """A silence's matchers as the label set they pin, or None (a regex, a negation)."""
    out: dict[str, str] = {}
    for m in matchers:
        if m.get("isRegex") or m.get("isEqual") is False:
            return None
        out[str(m.get("name"))] = str(m.get("value"))
    return out


class AlertmanagerError(Exception):
    pass


class Alertmanager:
    """An Alertmanager's v2 API on one client; every call bounded by ``timeout_s``."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._client: Any = None

    def _http(self) -> Any:
        if self._client is None:
            import httpx  # here, not at the top: the first frame does not wait for it

            self._client = httpx.AsyncClient(timeout=self.timeout_s, trust_env=False,
                                             follow_redirects=False)
        return self._client

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        import httpx

        try:
            async with asyncio.timeout(self.timeout_s):
                # the deadline of now, not the client's first (the refresh may change)
                r = await self._http().request(method, self.url + path, json=body,
                                               timeout=self.timeout_s)
        except TimeoutError:
            raise AlertmanagerError(
                f"Alertmanager: no answer within {self.timeout_s:g} s") from None
        except httpx.HTTPError as exc:
            raise AlertmanagerError(f"Alertmanager: {type(exc).__name__}") from None
        if not 200 <= r.status_code < 300:
            raise AlertmanagerError(
                f"Alertmanager {method} {path}: HTTP {r.status_code} "
                f"{printable(r.text, 120)}")
        try:
            return r.json() if r.content else None
        except ValueError:
            raise AlertmanagerError(f"Alertmanager {path}: not JSON") from None

    async def post_alerts(self, alerts: list[dict[str, Any]]) -> None:
        if alerts:
            await self._call("POST", "/api/v2/alerts", alerts)

    async def alerts(self) -> list[dict[str, Any]]:
        got = await self._call("GET", "/api/v2/alerts")
        return [a for a in got if isinstance(a, dict)] if isinstance(got, list) else []

    async def silences(self) -> list[dict[str, Any]]:
        got = await self._call("GET", "/api/v2/silences")
        return [s for s in got if isinstance(s, dict)] if isinstance(got, list) else []

    async def create_silence(self, body: dict[str, Any]) -> str:
        got = await self._call("POST", "/api/v2/silences", body)
        sid = got.get("silenceID") if isinstance(got, dict) else None
        if not isinstance(sid, str):
            raise AlertmanagerError("Alertmanager: a silence without an id")
        return sid

    async def expire_silence(self, sid: str) -> None:
        await self._call("DELETE", f"/api/v2/silence/{sid}")

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def acked_here(am_alerts: list[dict[str, Any]], silences: list[dict[str, Any]],
               ours: dict[str, dict[str, str]]) -> dict[str, tuple[str, float]]:
    """Of our alerts (key → labels), those Alertmanager shows silenced: key → (who, when),
    the silence's author and start."""
    by_id = {s.get("id"): s for s in silences}
    out: dict[str, tuple[str, float]] = {}
    for a in am_alerts:
        labels = a.get("labels")
        status = a.get("status") or {}
        ids = status.get("silencedBy") if isinstance(status, dict) else None
        if not isinstance(labels, dict) or not ids:
            continue
        for key, mine in ours.items():
            # ours, or the same alert from the rendered Prometheus rules (the same
            # labels; a rule a team wrote may add more: job, instance)
            if mine.items() <= labels.items():
                s = by_id.get(ids[0]) or {}
                out[key] = (_label(str(s.get("createdBy") or "Alertmanager")),
                            _parse(s.get("startsAt")))
    return out


def save_watchdog(state_dir: Path, t: float) -> None:
    """When a heartbeat last reached Alertmanager, for ``status --json`` (blocking)."""
    from console.config.config_file import replace_whole

    path = state_dir / "alertmanager.json"
    state_dir.mkdir(parents=True, exist_ok=True)
    replace_whole(path, json.dumps({"watchdog_sent_at": t}).encode(),
                  path.with_name(f"{path.name}.{os.getpid()}.tmp"))


def load_watchdog(state_dir: Path) -> float | None:
    try:
        t = json.loads((state_dir / "alertmanager.json").read_text()).get("watchdog_sent_at")
    except (OSError, ValueError, AttributeError):
        return None
    return float(t) if isinstance(t, int | float) and not isinstance(t, bool) else None


def _parse(text: Any) -> float:
    try:
        return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
