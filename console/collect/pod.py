"""Pod state for the header: RunPod (status, GPU, cost) plus the agent (P2P, slots, watchdog).

Both sources are optional; a missing or failing one leaves its fields None and
its error set. Nothing here raises into the UI.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Any

from ..provider.runpod import RunPodClient, RunPodError
from ..remote import AgentError


@dataclass(frozen=True)
class PodSnapshot:
    pod_id: str | None = None
    status: str | None = None
    gpu_name: str | None = None
    gpu_count: int | None = None
    cost_per_hr: float | None = None
    started_at: float | None = None
    host_cuda: str | None = None
    p2p_disabled: bool | None = None
    watchdog_armed: bool | None = None
    next_stop: str | None = None
    agent_slots: dict[str, dict[str, Any]] = field(default_factory=dict)
    agent_actions: tuple[dict[str, Any], ...] = ()
    last_watchdog_result: str | None = None
    provider_error: str | None = None
    agent_error: str | None = None
    fetched_at: float = 0.0

    def uptime_s(self, now: float) -> float | None:
        return None if self.started_at is None else max(0.0, now - self.started_at)

    def spend_today(self, now: float, tz: dt.tzinfo | None = None) -> float | None:
        """$ since local midnight or since the pod started, whichever is later."""
        if self.cost_per_hr is None or self.started_at is None or self.status != "RUNNING":
            return None
        local_now = dt.datetime.fromtimestamp(now, tz)
        midnight = local_now.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
        hours = max(0.0, now - max(midnight, self.started_at)) / 3600
        return hours * self.cost_per_hr

    def stop_in_s(self, now: float) -> float | None:
        if not self.next_stop:
            return None
        try:
            return dt.datetime.fromisoformat(self.next_stop).timestamp() - now
        except ValueError:
            return None


def _iso_ts(s: str | None) -> float | None:
    if not s:
        return None
    try:
        return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class PodCollector:
    def __init__(self, pod_id: str | None, client: RunPodClient | None, transport: Any | None,
                 timeout_s: float = 5.0) -> None:
        self.pod_id = pod_id
        self.client = client
        self.transport = transport
        self.timeout_s = timeout_s

    async def poll(self) -> PodSnapshot:
        import asyncio

        fields: dict[str, Any] = {"pod_id": self.pod_id, "fetched_at": time.time()}
        if self.client is not None and self.pod_id:
            try:
                pod = await asyncio.wait_for(self.client.get_pod(self.pod_id), self.timeout_s)
                fields.update(status=pod.status, cost_per_hr=pod.cost,
                              gpu_name=pod.gpu.id if pod.gpu else None,
                              gpu_count=pod.gpu.count if pod.gpu else None,
                              host_cuda=pod.cudaVersion, started_at=_iso_ts(pod.startedAt))
            except (RunPodError, TimeoutError) as exc:
                fields["provider_error"] = getattr(exc, "message", None) or "timed out"
        if self.transport is not None:
            try:
                r = await self.transport.run(["status", "--json"], timeout_s=self.timeout_s)
                st = r.final or {}
                if r.ok:
                    wd = st.get("watchdog") or {}
                    fields.update(p2p_disabled=st.get("p2p_disabled"),
                                  watchdog_armed=wd.get("armed"), next_stop=wd.get("next_stop"),
                                  last_watchdog_result=wd.get("last_result"),
                                  agent_slots=st.get("slots") or {},
                                  agent_actions=tuple(st.get("actions") or ()))
                else:
                    fields["agent_error"] = r.message
            except AgentError as exc:
                fields["agent_error"] = str(exc)
        return PodSnapshot(**fields)
