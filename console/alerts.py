"""Alert rules from the field's own triggers, with start times and self-clearing.

``evaluate`` turns the latest snapshots into the set of active conditions;
``AlertBook`` keeps when each began, drops the ones that cleared, and reports
changes, so the webhook fires on a change, never on every poll.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from . import catalog
from .snapshot import DeploymentSnapshot, PodSnapshot

if TYPE_CHECKING:  # evaluated only once settings and profiles have loaded
    from pod_agent.profile import Profile

    from .settings import Settings

Severity = Literal["crit", "warn", "info"]


@dataclass(frozen=True)
class Condition:
    key: str
    severity: Severity
    title: str
    detail: str = ""


@dataclass(frozen=True)
class Alert:
    key: str
    severity: Severity
    title: str
    detail: str
    since: float


@dataclass
class AlertBook:
    active: dict[str, Alert] = field(default_factory=dict)

    def update(self, conditions: Iterable[Condition], now: float
               ) -> tuple[list[Alert], list[Alert]]:
        """Apply the current conditions; return (raised, cleared)."""
        seen: dict[str, Condition] = {c.key: c for c in conditions}
        raised, cleared = [], []
        for key, cond in seen.items():
            old = self.active.get(key)
            if old is None:
                a = Alert(key, cond.severity, cond.title, cond.detail, now)
                self.active[key] = a
                raised.append(a)
            elif (old.detail, old.severity) != (cond.detail, cond.severity):
                self.active[key] = Alert(key, cond.severity, cond.title, cond.detail, old.since)
        for key in list(self.active):
            if key not in seen:
                cleared.append(self.active.pop(key))
        return raised, cleared

    def sorted(self) -> list[Alert]:
        order = {"crit": 0, "warn": 1, "info": 2}
        return sorted(self.active.values(), key=lambda a: (order[a.severity], a.since))


def _working_hours(profile: Profile, now: float) -> bool:
    from zoneinfo import ZoneInfo

    s = profile.schedule
    local = dt.datetime.fromtimestamp(now, ZoneInfo(s.timezone))
    day = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")[local.weekday()]
    hm = (local.hour, local.minute)
    start = tuple(int(x) for x in s.start.split(":"))
    stop = tuple(int(x) for x in s.stop.split(":"))
    return day in s.days and start <= hm < stop


def evaluate(snap: DeploymentSnapshot | None, pod: PodSnapshot | None, profile: Profile,
             settings: Settings, now: float, failures: Iterable[Condition] = ()
             ) -> list[Condition]:
    from pod_agent.gpuinfo import version_tuple
    from pod_agent.profile import MAX_GPU_UTIL_PER_GPU as max_per_gpu

    out: list[Condition] = list(failures)
    if snap is not None:
        for s in snap.slots:
            th = settings.thresholds_for(s.slot)
            if s.health != "up":
                out.append(Condition(f"down:{s.slot}", "crit", f"{s.slot} down",
                                     s.error or s.health_detail))
            elif s.probe_ok is False:
                out.append(Condition(f"probe:{s.slot}", "crit",
                                     f"{s.slot} up but completions fail", s.probe_detail))
            f = s.figures
            if f is None:
                continue
            for fig, rule in catalog.thresholds():
                value = s.figure(fig.key)
                if value is not None and rule.breached(value, th):
                    out.append(Condition(f"{rule.alert}:{s.slot}", "warn",
                                         rule.title(s.slot, value, th), rule.hint))
    per_gpu: dict[int, float] = {}
    for name, slot in profile.slots.items():
        util = slot.gpu_util
        if pod is not None and name in pod.agent_slots:
            util = float(pod.agent_slots[name].get("gpu_util", util))
        for g in slot.gpus:
            per_gpu[g] = per_gpu.get(g, 0.0) + util
    for g, total in sorted(per_gpu.items()):
        if total > max_per_gpu + 1e-9:
            out.append(Condition(f"util:{g}", "crit", f"GPU {g} gpu_util {total:.2f} > 0.95"))
    if pod is not None:
        if pod.p2p_disabled:
            out.append(Condition("p2p", "info", "P2P disabled on this host",
                                 "NCCL_P2P_DISABLE=1 + --disable-custom-all-reduce (slower TP)"))
        if pod.host_cuda and profile.min_cuda and (
                version_tuple(pod.host_cuda) < version_tuple(profile.min_cuda)):
            out.append(Condition("cuda", "crit", f"host driver CUDA {pod.host_cuda} < "
                                 f"{profile.min_cuda}"))
        if pod.status == "RUNNING" and not _working_hours(profile, now):
            rate = f" at ${pod.cost_per_hr:.2f}/h" if pod.cost_per_hr else ""
            out.append(Condition("hours", "warn", f"pod running outside working hours{rate}"))
        if pod.last_watchdog_result and "FAILED" in pod.last_watchdog_result:
            out.append(Condition("watchdog", "crit", "watchdog stop FAILED",
                                 pod.last_watchdog_result))
        if pod.agent_error:
            out.append(Condition("agent", "warn", "pod agent unreachable", pod.agent_error))
        if pod.provider_error:
            out.append(Condition("provider", "warn", "RunPod API error", pod.provider_error))
    if snap is not None and snap.prometheus_error:
        out.append(Condition("prometheus", "info", "Prometheus unreachable: scraping slots "
                             "directly", snap.prometheus_error))
    return out


async def notify(url: str, raised: list[Alert], cleared: list[Alert], source: str,
                 timeout_s: float = 5.0) -> str | None:
    """POST a Slack-compatible message about changes; return an error text or None."""
    if not raised and not cleared:
        return None
    icon = {"crit": ":red_circle:", "warn": ":large_orange_circle:", "info": ":information_source:"}
    lines = [f"{icon[a.severity]} {a.title}" + (f" — {a.detail}" if a.detail else "")
             for a in raised]
    lines += [f":white_check_mark: cleared: {a.title}" for a in cleared]
    payload = {"text": f"[{source}]\n" + "\n".join(lines)}
    import httpx  # here, not at the top: the console's first frame does not wait for it

    try:
        # httpx's timeout is per read: a server dripping a byte a second never trips
        # it. One deadline covers the whole exchange.
        async with asyncio.timeout(timeout_s):
            async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as c:
                r = await c.post(url, content=json.dumps(payload),
                                 headers={"Content-Type": "application/json"})
        return None if r.status_code < 400 else f"webhook HTTP {r.status_code}"
    except TimeoutError:
        return f"webhook failed: no answer within {timeout_s:g} s"
    except httpx.HTTPError as exc:
        return f"webhook failed: {type(exc).__name__}"
