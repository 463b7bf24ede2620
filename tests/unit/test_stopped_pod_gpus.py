"""A stopped pod's GPU line says it is stopped, not "Prometheus has no GPU readings for
this pod" (issue 42, item 3): nothing runs there to read."""

from __future__ import annotations

from typing import Any

from console.model.gpu_state import GpuReport
from console.sources.collect.gpu_metrics import NO_GPU_READINGS
from console.sources.collect.pod import POD_STOPPED, PodCollector
from console.sources.provider.base import Machine


class Provider:
    """The provider's answer for one machine (RunPod's API is what is emulated here)."""

    def __init__(self, status: str) -> None:
        self.status = status

    async def get(self, pod_id: str) -> Machine:
        return Machine(id=pod_id, status=self.status, gpu_type="NVIDIA RTX PRO 6000",
                       gpu_count=2, cost_per_hr=0.0 if self.status != "RUNNING" else 4.0)


class Prometheus:
    """Where the GPUs are read without an agent: with no exporter scraped it has none."""

    configured = True
    url = None

    def __init__(self) -> None:
        self.calls = 0

    async def fetch_pod(self) -> tuple[GpuReport, Any, Any]:
        self.calls += 1
        return GpuReport(error=NO_GPU_READINGS), None, None


async def test_a_stopped_pod_is_not_asked_for_gpu_readings() -> None:
    prom = Prometheus()
    stopped = PodCollector("p1", Provider("EXITED"), None,  # type: ignore[arg-type]
                           gpu_metrics=prom)  # type: ignore[arg-type]
    snap = await stopped.poll()
    assert snap.gpus is not None and snap.gpus.error == POD_STOPPED
    assert prom.calls == 0
    running = PodCollector("p1", Provider("RUNNING"), None,  # type: ignore[arg-type]
                           gpu_metrics=prom)  # type: ignore[arg-type]
    snap = await running.poll()
    assert snap.gpus is not None and snap.gpus.error == NO_GPU_READINGS
    assert prom.calls == 1
