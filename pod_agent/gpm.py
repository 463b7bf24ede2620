"""GPU activity beyond "utilisation": NVML's GPM (GPU Performance Monitoring) metrics,
Hopper and later.

NVML's utilisation says only that some kernel ran during the sample period: a decode
step waiting on memory reads 100 % as much as a matmul does. GPM counts what the SMs
did over an interval between two samples: SM activity (a warp resident), SM occupancy
(warps resident over the maximum), tensor-pipe activity and DRAM bandwidth — the
"computing, or waiting on memory?" signal. Each is a percentage, as NVML and
``nvidia-smi dmon --gpm-metrics`` give them (captured on an H200:
``tests/fixtures/gpm-h200``).

One :class:`GpmReader` keeps each GPU's previous sample; every :meth:`GpmReader.read`
takes a new one and asks NVML for the metrics over the two. A GPU without GPM (an older
GPU, a driver or binding without the calls, NVML's "Not Supported") has no figures:
None, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict

SM_ACTIVE = 2
SM_OCCUPANCY = 3
TENSOR_ACTIVE = 5
DRAM_ACTIVE = 10
METRICS = {SM_ACTIVE: "sm_active_pct", SM_OCCUPANCY: "sm_occupancy_pct",
           TENSOR_ACTIVE: "tensor_active_pct", DRAM_ACTIVE: "dram_active_pct"}
"""NVML's metric ids (nvml.h: SM_UTIL, SM_OCCUPANCY, ANY_TENSOR_UTIL, DRAM_BW_UTIL) →
the reading's field. dcgm-exporter's DCGM_FI_PROF_SM_ACTIVE, _SM_OCCUPANCY,
_PIPE_TENSOR_ACTIVE and _DRAM_ACTIVE are the same figures as ratios."""


@dataclass(frozen=True)
class GpmFigures:
    """One GPU's GPM answer: whether it has GPM at all, and the figures (percent) over
    the last interval; a figure is None where GPM is missing, before the second sample,
    or where NVML refused that one metric."""

    supported: bool | None = None
    sm_active_pct: float | None = None
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_active_pct: float | None = None

    def fields(self) -> Dict[str, Any]:
        return {"gpm_supported": self.supported, "sm_active_pct": self.sm_active_pct,
                "sm_occupancy_pct": self.sm_occupancy_pct,
                "tensor_active_pct": self.tensor_active_pct,
                "dram_active_pct": self.dram_active_pct}


UNSUPPORTED = GpmFigures(supported=False)


class GpmReader:
    """GPM over NVML for every GPU; ``nvml`` is the binding (or its stand-in)."""

    def __init__(self, nvml: Any, handles: list[Any]) -> None:
        self.nvml = nvml
        self.handles = handles
        self.supported = [self._supported(h) for h in handles]
        self._prev: Dict[int, Any] = {}

    def _supported(self, h: Any) -> bool:
        n = self.nvml
        query = getattr(n, "nvmlGpmQueryDeviceSupport", None)
        if query is None or not hasattr(n, "nvmlGpmMetricsGet"):
            return False  # a binding older than GPM
        try:
            return bool(query(h).isSupportedDevice)
        except n.NVMLError:  # Not Supported, Function Not Found (a driver before R520)
            return False
        except AttributeError:  # the answer has no such field: treat as no GPM
            return False

    def prime(self) -> None:
        """Take each supported GPU's first sample, so the next read has an interval."""
        for i in range(len(self.handles)):
            if self.supported[i] and i not in self._prev:
                self._prev[i] = self._sample(i)

    def _sample(self, i: int) -> Any:
        n = self.nvml
        s = n.nvmlGpmSampleAlloc()
        try:
            n.nvmlGpmSampleGet(self.handles[i], s)
        except n.NVMLError as exc:
            n.nvmlGpmSampleFree(s)
            if getattr(exc, "value", None) == getattr(n, "NVML_ERROR_NOT_SUPPORTED", 3):
                # the device said yes but its samples say no (a MIG-enabled parent, say):
                # no GPM on this GPU, rather than "one sample so far" for ever
                self.supported[i] = False
            return None
        return s

    def read(self, i: int) -> GpmFigures:
        """The figures over (previous sample, a new one); the new one is kept."""
        if not self.supported[i]:
            return UNSUPPORTED
        n = self.nvml
        prev = self._prev.pop(i, None)
        new = self._sample(i)
        if new is not None:
            self._prev[i] = new
        if prev is None or new is None:
            if prev is not None:
                n.nvmlGpmSampleFree(prev)
            return GpmFigures(supported=True)
        try:
            mg = n.c_nvmlGpmMetricsGet_t()
            mg.version = n.NVML_GPM_METRICS_GET_VERSION
            mg.numMetrics = len(METRICS)
            mg.sample1, mg.sample2 = prev, new
            for j, mid in enumerate(METRICS):
                mg.metrics[j].metricId = mid
            n.nvmlGpmMetricsGet(mg)
            vals: Dict[str, float | None] = {}
            for j, name in enumerate(METRICS.values()):
                m = mg.metrics[j]
                # a metric NVML could not compute says so in its own return code
                vals[name] = round(float(m.value), 3) if int(m.nvmlReturn) == 0 else None
        except n.NVMLError:
            return GpmFigures(supported=True)
        finally:
            n.nvmlGpmSampleFree(prev)
        return GpmFigures(True, **vals)

    def close(self) -> None:
        for s in self._prev.values():
            if s is not None:
                self.nvml.nvmlGpmSampleFree(s)
        self._prev.clear()
