"""The GPU screen's plots fed: one sample of every GPU into the bounded history. Its own
module because the live session and the recorder's store both feed it (the session imports
the store: a circle)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from console.model.gpu_state import GpuReport
    from console.model.history import History


def record_gpus(history: History, report: GpuReport | None, t: float) -> None:
    """Add one sample of every GPU to the bounded history (the GPU screen's plots)."""
    if report is None:
        return
    t = report.sampled_at or t
    for g in report.gpus:
        name = f"GPU{g.index}"
        history.add(name, "gpu_util", t, g.util_pct)
        history.add(name, "gpu_mem", t, g.mem_frac)
        history.add(name, "gpu_temp", t, g.temp_c)
        history.add(name, "gpu_power", t, g.power_w)
        # GPM (Hopper on): what the SMs did, beside util; None where the GPU has none
        history.add(name, "gpu_sm_active", t, g.sm_active_pct)
        history.add(name, "gpu_tensor", t, g.tensor_active_pct)
        history.add(name, "gpu_dram", t, g.dram_active_pct)
        history.add(name, "gpu_sm_occ", t, g.sm_occupancy_pct)
