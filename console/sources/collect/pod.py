"""Pod state for the header: the provider (status, GPU, cost) plus the agent (P2P, slots,
watchdog).

Both sources are optional; a missing or failing one leaves its fields None and
its error set. Nothing here raises into the UI.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

from console.model import gpu_state
from console.model.printable import clean
from console.model.snapshot import AgentHeartbeat, PodSnapshot, StopPlan
from console.sources.agent_client import AgentClient
from console.sources.collect.gpu_metrics import GpuMetrics
from console.sources.provider.base import Provider, ProviderError
from console.sources.remote import AgentError

__all__ = ["POD_STOPPED", "PodCollector", "PodSnapshot"]

STOPPED_STATUSES = ("EXITED", "STOPPED", "TERMINATED")
POD_STOPPED = "the pod is stopped: no GPUs to read"


def _iso_ts(s: str | None) -> float | None:
    if not s:
        return None
    try:
        return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class PodCollector:
    def __init__(self, pod_id: str | Callable[[], str | None] | None, client: Provider | None,
                 agent: AgentClient | None, timeout_s: float = 5.0,
                 gpu_metrics: GpuMetrics | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._pod_id = pod_id if callable(pod_id) else (lambda: pod_id)
        self.client = client
        self.agent = agent
        self.timeout_s = timeout_s
        self.gpu_metrics = gpu_metrics
        """Where GPUs are read when the agent does not say (a wall: no SSH)."""
        self._clock = clock
        """The wall clock a reading is dated on (a test's own)."""

    @property
    def pod_id(self) -> str | None:
        """The machine as its deployment says now (a pod switch needs no word here)."""
        return self._pod_id()

    async def poll(self) -> PodSnapshot:
        import asyncio

        pod_id = self.pod_id  # one poll, one pod
        fields: dict[str, Any] = {"pod_id": pod_id, "fetched_at": self._clock()}
        if self.client is not None and pod_id:
            try:
                m = await asyncio.wait_for(self.client.get(pod_id), self.timeout_s)
                fields.update(status=m.status, cost_per_hr=m.cost_per_hr, gpu_name=m.gpu_type,
                              gpu_count=m.gpu_count or None, host_cuda=m.cuda,
                              started_at=_iso_ts(m.started_at))
            except (ProviderError, TimeoutError) as exc:
                fields["provider_error"] = getattr(exc, "message", None) or "timed out"
        if self.agent is not None and self.agent.configured:
            from pod_agent.requests import StatusRequest

            try:
                r = await self.agent.request(StatusRequest(), timeout_s=self.timeout_s)
                st = r.final or {}
                if r.ok:
                    wd = st.get("watchdog") or {}
                    fields.update(p2p_disabled=st.get("p2p_disabled"),
                                  watchdog_armed=wd.get("armed"), next_stop=wd.get("next_stop"),
                                  last_watchdog_result=wd.get("last_result"),
                                  agent_slots=st.get("slots") or {},
                                  agent_actions=tuple(st.get("actions") or ()),
                                  gpus=gpu_state.parse(st.get("gpus")),
                                  stop_plan=StopPlan.parse(wd, self._clock())
                                  if isinstance(wd, dict) else None,
                                  agent_heartbeat=AgentHeartbeat.parse(st.get("heartbeat")))
                else:
                    fields["agent_error"] = r.message
            except AgentError as exc:
                fields["agent_error"] = str(exc)
        if fields.get("status") in STOPPED_STATUSES and fields.get("gpus") is None:
            # nothing runs on a stopped pod: "Prometheus has no GPU readings" is no news
            fields["gpus"] = gpu_state.GpuReport(error=POD_STOPPED)
        elif fields.get("gpus") is None and self.gpu_metrics is not None \
                and self.gpu_metrics.configured:
            try:
                gpus, plan, armed = await asyncio.wait_for(self.gpu_metrics.fetch_pod(),
                                                           self.timeout_s)
                fields["gpus"] = gpus
                if fields.get("stop_plan") is None and plan is not None:
                    fields.update(stop_plan=plan, watchdog_armed=armed)
            except TimeoutError:
                fields["gpus"] = gpu_state.GpuReport(error="GPU metrics: timed out")
        # the provider's, the agent's and the exporter's words, drawn on every screen: no
        # control character (a pod name, an agent error, a watchdog result, a GPU name)
        return clean(PodSnapshot(**fields))
