"""The GPU line at the refresh (issue 27, item 3): the exporter read at every poll.

The pod itself is read every ``POD_POLL_S`` (RunPod's rate limit, an SSH command to the
agent). Its GPU figures would be that old too. Where the pod serves its GPUs over HTTP
(``gpu_metrics_url``: ``pod-agent exporter``, which samples them every second, or a
dcgm-exporter), that endpoint is cheap to read: one GET on the pod's own port, a few
hundred lines. So the session reads it at every poll. The numbers that move (use,
memory, heat, power, clock) come from that read. What only the pod reading knows stays
from the pod reading: which slot's processes sit on which GPU, and the Xid events the
agent saw.

Prometheus is not read faster. It holds a GPU sample only as often as it scrapes
(15 s). Reading it every second would not make the number younger, so the GPU line
keeps the pod's cadence there and shows its age.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from msgspec import Struct
from msgspec.structs import replace

if TYPE_CHECKING:
    from console.model.gpu_state import GpuReport
    from console.model.snapshot import PodSnapshot
    from console.sources.collect.gpu_metrics import GpuMetrics


class GpuLine(Struct, frozen=True):
    """One good read of the pod's GPU endpoint: whose pod it was and when it started
    (the console's clock)."""

    pod_id: str | None
    report: GpuReport
    read_at: float


def fast_source(gpu_metrics: GpuMetrics | None) -> GpuMetrics | None:
    """The GPU endpoint worth reading at every poll: a URL (the exporter), never
    Prometheus."""
    return gpu_metrics if gpu_metrics is not None and gpu_metrics.url else None


async def read(source: GpuMetrics, pod_id: str | None, started: float,
               timeout_s: float) -> GpuLine | None:
    """This poll's GPU line, or None when the endpoint did not answer well in time (the
    last good line stays on screen, its age beside it)."""
    try:
        report = await asyncio.wait_for(source.fetch(), timeout_s)
    except Exception:  # late, or an answer nobody could read: the slots' poll goes on
        return None
    if report.error is not None or not report.gpus:
        return None
    return GpuLine(pod_id, report, started)


def in_use(line: GpuLine | None, pod: PodSnapshot, pod_read_at: float | None
           ) -> GpuLine | None:
    """The line, when it is of this pod and younger than the pod reading."""
    if line is None or line.pod_id != pod.pod_id:
        return None
    return line if pod_read_at is None or line.read_at >= pod_read_at else None


def merged(pod: PodSnapshot, line: GpuLine | None) -> PodSnapshot:
    """The pod reading with the line's numbers (a line :func:`in_use`); the reading as it
    is without one."""
    if line is None:
        return pod
    base = pod.gpus
    if base is None or not base.gpus:
        return replace(pod, gpus=line.report)
    procs = {g.index: g.processes for g in base.gpus}
    gpus = tuple(replace(g, processes=procs.get(g.index, g.processes))
                 for g in line.report.gpus)
    return replace(pod, gpus=replace(base, gpus=gpus, sampled_at=line.read_at))


__all__ = ["GpuLine", "fast_source", "in_use", "merged", "read"]
