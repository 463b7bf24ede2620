"""An NVML stand-in for hosts without a GPU: the functions of ``nvidia-ml-py`` that the
pod agent calls, answering what a real H200 host answered (a recorded capture, see
``tools/nvml_capture.py``), errors included — a query the real GPU did not support
raises the same NVMLError here.

Used by the demo's simulated pod (on the agent's ``PYTHONPATH``, like the fake torch)
and by the tests. Settings, from the environment:

* ``FAKE_NVML_CAPTURE``: the capture file (default: the shipped H200 capture under load);
* ``FAKE_NVIDIA_SMI_GPUS``: how many GPUs (recorded GPUs are reused in turn);
* ``FAKE_NVIDIA_SMI_NAME`` / ``FAKE_NVIDIA_SMI_MIB``: another GPU kind's name and size
  (the demo's), as its nvidia-smi stand-in takes them;
* ``FAKE_NVML_STEADY``: the recorded values exactly (no drift), for tests;
* ``FAKE_NVML_FAULTS``: a directory of fault files, read at every call —
  ``xid-<gpu>-<code>[-<n>]`` (an Xid event, delivered once to every event set made
  before the file was),
  ``dbe-<gpu>`` (a double-bit ECC error: uncorrectable counts +1, a row remap pending),
  ``hot-<gpu>`` (thermal slowdown: 91 °C, thermal throttle bits, SM clock halved),
  ``nvml-proc-<pid>`` (the demo's simulated vLLM: ``{"gpus": [..], "fraction": f}``;
  with ``FAKE_NVML_ENGINES`` set, the GPU's programs and memory are those engines');
* ``FAKE_NVML_GPM``: the GPM capture (``tools/gpm_capture.py``; default the shipped H200
  one), or ``none``: no GPM, as on a GPU before Hopper (Not Supported);
* ``FAKE_NVML_GPM_PHASE``: which captured phase each GPU replays (``idle``, ``tensor``,
  ``memory``; comma-separated, GPU by GPU in turn; default ``tensor,memory``), interval
  after interval;
* topology (``nvmlDeviceGetTopologyCommonAncestor``, ``nvmlDeviceGetP2PStatus``, the
  NVLinks' far ends): the capture's answers where it has them; else what the captured
  two-H200 host shows (``nvidia-smi topo -m``: NV18 between them): every link up goes to
  an NVSwitch, P2P is ok, and the PCIe relation, which nvidia-smi hides behind NV18 there,
  is NODE (both GPUs are on NUMA node 0). A fault file ``nvlink-down-<gpu>`` takes that
  GPU's links down;
* ``FAKE_NVML_GPU_FAULTS``: where the GPU faults (``xid-``, ``dbe-``, ``hot-``) are read
  instead, when set: the demo gives each simulated pod its own, so a fault stays with
  the pod whose GPU had it (a fallback's new pod starts healthy).
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

NVML_TEMPERATURE_GPU = 0
NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0
NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
NVML_NVLINK_MAX_LINKS = 36
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
nvmlMemory_v2 = 0x02000028  # the binding's version word for c_nvmlMemory_v2_t
nvmlEventTypeXidCriticalError = 0x8
THERMAL = 0x20 | 0x40

DEFAULT_CAPTURE = Path(__file__).resolve().parent.parent / "captures" / "nvml-h200-load.json"
DEFAULT_GPM = DEFAULT_CAPTURE.with_name("gpm-h200.json")
NVML_GPM_METRICS_GET_VERSION = 1
NVML_GPM_METRIC_MAX = 98


class NVMLError(Exception):
    def __init__(self, value: int, text: str | None = None) -> None:
        super().__init__(value)
        self.value = value
        self.text = text or {2: "Invalid Argument", 3: "Not Supported",
                             10: "Timeout", 1: "Uninitialized", 13: "Function Not Found",
                             25: "Argument Version Mismatch"}.get(value, "Unknown Error")

    def __str__(self) -> str:
        return self.text


class _Obj:
    """A structure answer: attributes like the binding's ctypes structures."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


class _Handle:
    def __init__(self, index: int) -> None:
        self.index = index


_calls: dict[str, Any] = {}
_recorded = 0
_init = False


def _load() -> None:
    global _calls, _recorded
    path = Path(os.environ.get("FAKE_NVML_CAPTURE") or DEFAULT_CAPTURE)
    _calls = json.loads(path.read_text())
    _recorded = int(_calls["nvmlDeviceGetCount()"]["ok"])


def _count() -> int:
    return int(os.environ.get("FAKE_NVIDIA_SMI_GPUS") or _recorded)


def _faults() -> Path | None:
    d = os.environ.get("FAKE_NVML_FAULTS")
    return Path(d) if d else None


def _gpu_faults() -> Path | None:
    d = os.environ.get("FAKE_NVML_GPU_FAULTS")
    return Path(d) if d else _faults()


def _has(kind: str, gpu: int) -> bool:
    d = _gpu_faults()
    return d is not None and (d / f"{kind}-{gpu}").exists()


def _answer(name: str, *args: Any) -> Any:
    if not _init:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    parts = []
    for a in args:
        parts.append(f"h{a.index % _recorded}" if isinstance(a, _Handle) else str(a))
    rec = _calls.get(f"{name}({','.join(parts)})")
    if rec is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    if "error" in rec:
        raise NVMLError(int(rec["error"]), rec.get("text"))
    return rec["ok"]


def _wobble(h: _Handle, scale: float) -> float:
    """A slow drift, so the demo's numbers move like a busy GPU's (``FAKE_NVML_STEADY``
    turns it off: the recorded values exactly, for tests)."""
    if os.environ.get("FAKE_NVML_STEADY"):
        return 1.0
    return 1 + scale * math.sin(time.time() / 7 + h.index)


# -- the binding's functions --------------------------------------------------------------

def nvmlInit() -> None:
    global _init
    _load()
    _gpm_next.clear()  # each start replays the GPM capture from its first interval
    _init = True


def nvmlShutdown() -> None:
    global _init
    _init = False


def nvmlSystemGetDriverVersion() -> str:
    return str(_answer("nvmlSystemGetDriverVersion"))


def nvmlDeviceGetCount() -> int:
    if not _init:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    return _count()


def nvmlDeviceGetHandleByIndex(i: int) -> _Handle:
    if not 0 <= i < nvmlDeviceGetCount():
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return _Handle(i)


def nvmlDeviceGetIndex(h: _Handle) -> int:
    return h.index


def nvmlDeviceGetName(h: _Handle) -> str:
    # the demo's simulated GPU kind (as its nvidia-smi stand-in says it)
    return os.environ.get("FAKE_NVIDIA_SMI_NAME") or str(_answer("nvmlDeviceGetName", h))


def nvmlDeviceGetUUID(h: _Handle) -> str:
    uuid = str(_answer("nvmlDeviceGetUUID", h))
    # GPUs reused from the capture still need their own identities
    return uuid if h.index < _recorded else f"{uuid[:-4]}{h.index:04x}"


def nvmlDeviceGetPciInfo(h: _Handle) -> _Obj:
    d = dict(_answer("nvmlDeviceGetPciInfo", h))
    if h.index >= _recorded:
        d["busId"] = f"00000000:00:{6 + h.index:02x}.0"
    return _Obj(**d)


def nvmlDeviceGetUtilizationRates(h: _Handle) -> _Obj:
    d = _answer("nvmlDeviceGetUtilizationRates", h)
    return _Obj(gpu=min(100, round(d["gpu"] * _wobble(h, 0.03))), memory=d["memory"])


def nvmlDeviceGetMemoryInfo(h: _Handle, version: Any = None) -> _Obj:
    """v1 (no ``version``): ``used`` counts the driver's reservation. v2
    (``version=nvmlMemory_v2``): ``used`` leaves it out and ``reserved`` says it; a
    capture from a driver without the v2 call raises Function Not Found, as the binding
    does there."""
    if version is not None and version != nvmlMemory_v2:
        raise NVMLError(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
    if version is None:
        d = dict(_answer("nvmlDeviceGetMemoryInfo", h))
    else:
        try:
            d = dict(_answer("nvmlDeviceGetMemoryInfo", h, nvmlMemory_v2))
        except NVMLError as exc:
            if exc.value == NVML_ERROR_NOT_SUPPORTED:  # not in the capture: no v2 there
                raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND) from None
            raise
    mib = os.environ.get("FAKE_NVIDIA_SMI_MIB")
    if mib:  # the demo's GPU kind has another size
        d["total"] = int(mib) << 20
    engines = _engines(h)
    if engines is not None:  # the demo's engines hold what they asked for
        held, reserved = sum(used for _, used in engines), _reserved(h)
        if version is None:
            d["used"] = reserved + held
        else:
            d["used"], d["reserved"] = held, reserved
    if mib or engines is not None:  # else the recorded free, exactly
        # v1's used holds the reservation; v2's does not, and says it apart
        d["free"] = max(0, d["total"] - d["used"] - int(d.get("reserved", 0)))
    return _Obj(**d)


def _reserved(h: _Handle) -> int:
    """The driver's reservation on this GPU: the capture's v2 figure, else the idle
    baseline."""
    try:
        return int(_answer("nvmlDeviceGetMemoryInfo", h, nvmlMemory_v2)["reserved"])
    except (NVMLError, KeyError, TypeError, ValueError):
        return BASELINE


BASELINE = 512 << 20
"""What a GPU holds with no program on it (driver, contexts) when the capture does not
say (a v1-only capture)."""


def _engines(h: _Handle) -> list[tuple[int, int]] | None:
    """(pid, bytes) of the demo's engines on this GPU (``nvml-proc-<pid>`` files that
    the simulated vLLM writes), or None when there is no such registry."""
    d = _faults()
    if d is None or not os.environ.get("FAKE_NVML_ENGINES"):
        return None
    total = int(os.environ.get("FAKE_NVIDIA_SMI_MIB") or 0) << 20 or \
        int(_answer("nvmlDeviceGetMemoryInfo", h)["total"])
    out = []
    for f in d.glob("nvml-proc-*"):
        try:
            pid = int(f.name.rsplit("-", 1)[1])
            os.kill(pid, 0)
            doc = json.loads(f.read_text())
        except (ValueError, OSError):
            continue  # gone, or half written
        pod = os.environ.get("RUNPOD_POD_ID")
        if pod is not None and doc.get("pod") not in (None, pod):
            continue  # another simulated pod's engine: not on this pod's GPUs
        if h.index in doc.get("gpus", ()):
            out.append((pid, int(float(doc.get("fraction", 0)) * total)))
    return out


def nvmlDeviceGetTemperature(h: _Handle, sensor: int) -> int:
    if _has("hot", h.index):
        return 91
    return round(_answer("nvmlDeviceGetTemperature", h, sensor) * _wobble(h, 0.02))


def nvmlDeviceGetTemperatureThreshold(h: _Handle, kind: int) -> int:
    return int(_answer("nvmlDeviceGetTemperatureThreshold", h, kind))


def nvmlDeviceGetPowerUsage(h: _Handle) -> int:
    return round(_answer("nvmlDeviceGetPowerUsage", h) * _wobble(h, 0.01))


def nvmlDeviceGetEnforcedPowerLimit(h: _Handle) -> int:
    return int(_answer("nvmlDeviceGetEnforcedPowerLimit", h))


def nvmlDeviceGetTotalEnergyConsumption(h: _Handle) -> int:
    base = int(_answer("nvmlDeviceGetTotalEnergyConsumption", h))
    watts = _answer("nvmlDeviceGetPowerUsage", h) / 1000
    return base + int(watts * (time.time() % 1e6) * 1000)  # mJ, always growing


def nvmlDeviceGetClockInfo(h: _Handle, clock: int) -> int:
    mhz = int(_answer("nvmlDeviceGetClockInfo", h, clock))
    return mhz // 2 if clock == NVML_CLOCK_SM and _has("hot", h.index) else mhz


def nvmlDeviceGetMaxClockInfo(h: _Handle, clock: int) -> int:
    return int(_answer("nvmlDeviceGetMaxClockInfo", h, clock))


def nvmlDeviceGetCurrentClocksEventReasons(h: _Handle) -> int:
    mask = int(_answer("nvmlDeviceGetCurrentClocksEventReasons", h))
    return mask | THERMAL if _has("hot", h.index) else mask


nvmlDeviceGetCurrentClocksThrottleReasons = nvmlDeviceGetCurrentClocksEventReasons


def nvmlDeviceGetCurrPcieLinkGeneration(h: _Handle) -> int:
    return int(_answer("nvmlDeviceGetCurrPcieLinkGeneration", h))


def nvmlDeviceGetCurrPcieLinkWidth(h: _Handle) -> int:
    return int(_answer("nvmlDeviceGetCurrPcieLinkWidth", h))


def nvmlDeviceGetMaxPcieLinkGeneration(h: _Handle) -> int:
    return int(_answer("nvmlDeviceGetMaxPcieLinkGeneration", h))


def nvmlDeviceGetMaxPcieLinkWidth(h: _Handle) -> int:
    return int(_answer("nvmlDeviceGetMaxPcieLinkWidth", h))


def nvmlDeviceGetPcieReplayCounter(h: _Handle) -> int:
    return int(_answer("nvmlDeviceGetPcieReplayCounter", h))


def nvmlDeviceGetNvLinkState(h: _Handle, link: int) -> int:
    state = int(_answer("nvmlDeviceGetNvLinkState", h, link))
    return 0 if state == 1 and _has("nvlink-down", h.index) else state


NVML_TOPOLOGY_NODE = 40
NVML_NVLINK_DEVICE_TYPE_SWITCH = 2


def _recorded_or(name: str, default: Any, *args: Any) -> Any:
    """The capture's answer (or its error) where it has this call, else ``default``."""
    parts = [f"h{a.index % _recorded}" if isinstance(a, _Handle) else str(a) for a in args]
    if f"{name}({','.join(parts)})" in _calls:
        return _answer(name, *args)
    if not _init:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    return default


def nvmlDeviceGetTopologyCommonAncestor(a: _Handle, b: _Handle) -> int:
    return int(_recorded_or("nvmlDeviceGetTopologyCommonAncestor", NVML_TOPOLOGY_NODE, a, b))


def nvmlDeviceGetP2PStatus(a: _Handle, b: _Handle, index: int) -> int:
    if index == 2 and (_has("nvlink-down", a.index) or _has("nvlink-down", b.index)):
        return 5  # NVLink P2P: not supported while the links are down
    return int(_recorded_or("nvmlDeviceGetP2PStatus", 0, a, b, index))


def nvmlDeviceGetNvLinkRemoteDeviceType(h: _Handle, link: int) -> int:
    return int(_recorded_or("nvmlDeviceGetNvLinkRemoteDeviceType",
                            NVML_NVLINK_DEVICE_TYPE_SWITCH, h, link))


def nvmlDeviceGetNvLinkRemotePciInfo(h: _Handle, link: int) -> _Obj:
    d = _recorded_or("nvmlDeviceGetNvLinkRemotePciInfo", None, h, link)
    if d is None:  # one of the board's NVSwitches
        d = {"busId": f"00000000:{0x80 + link % 4:02x}:00.0"}
    return _Obj(**d)


def nvmlDeviceGetEccMode(h: _Handle) -> list[int]:
    return list(_answer("nvmlDeviceGetEccMode", h))


def nvmlDeviceGetTotalEccErrors(h: _Handle, kind: int, counter: int) -> int:
    n = int(_answer("nvmlDeviceGetTotalEccErrors", h, kind, counter))
    if kind == NVML_MEMORY_ERROR_TYPE_UNCORRECTED and _has("dbe", h.index):
        n += 1
    return n


def nvmlDeviceGetRetiredPages(h: _Handle, cause: int) -> list[int]:
    return list(_answer("nvmlDeviceGetRetiredPages", h, cause))


def nvmlDeviceGetRetiredPagesPendingStatus(h: _Handle) -> int:
    return int(_answer("nvmlDeviceGetRetiredPagesPendingStatus", h))


def nvmlDeviceGetRemappedRows(h: _Handle) -> tuple[int, int, int, int]:
    corr, unc, pending, failed = _answer("nvmlDeviceGetRemappedRows", h)
    if _has("dbe", h.index):
        unc, pending = unc + 1, 1
    return corr, unc, pending, failed


def nvmlDeviceGetComputeRunningProcesses(h: _Handle) -> list[_Obj]:
    engines = _engines(h)
    if engines is not None:
        return [_Obj(pid=pid, usedGpuMemory=used, gpuInstanceId=0xFFFFFFFF,
                     computeInstanceId=0xFFFFFFFF) for pid, used in engines]
    procs = _answer("nvmlDeviceGetComputeRunningProcesses", h)
    return [_Obj(**p) for p in procs if isinstance(p, dict)]


# -- events ---------------------------------------------------------------------------------

class _EventSet:
    def __init__(self) -> None:
        self.handles: list[_Handle] = []
        self.created = time.time()
        self.delivered: set[str] = set()


def nvmlEventSetCreate() -> _EventSet:
    return _EventSet()


def nvmlDeviceRegisterEvents(h: _Handle, types: int, es: _EventSet) -> None:
    if not types & nvmlEventTypeXidCriticalError:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    es.handles.append(h)


def nvmlEventSetWait_v2(es: _EventSet, timeout_ms: int) -> _Obj:
    """The next Xid fault file made after this event set was, once per event set: as
    NVML tells every process that registered (the agent and the exporter both hear)."""
    deadline = time.monotonic() + timeout_ms / 1000
    watched = {h.index: h for h in es.handles}
    while True:
        d = _gpu_faults()
        if d is not None:
            for f in sorted(d.glob("xid-*-*")):
                gpu, code = f.name.split("-")[1:3]
                try:
                    made = f.stat().st_mtime
                except OSError:
                    continue
                # a file's time comes from the kernel's coarse clock: a file made just
                # after the set can read a few ms earlier than time.time() did
                if f.name in es.delivered or made < es.created - 1.0 \
                        or int(gpu) not in watched:
                    continue
                es.delivered.add(f.name)
                return _Obj(device=watched[int(gpu)], eventType=nvmlEventTypeXidCriticalError,
                            eventData=int(code), gpuInstanceId=0, computeInstanceId=0)
        if time.monotonic() >= deadline:
            raise NVMLError(NVML_ERROR_TIMEOUT)
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))


nvmlEventSetWait = nvmlEventSetWait_v2


def nvmlEventSetFree(es: _EventSet) -> None:
    es.handles.clear()


# -- GPM (GPU performance metrics): the captured intervals replayed --------------------------

_gpm_doc: dict[str, Any] | None = None
_gpm_path: str | None = None
_gpm_next: dict[tuple[int, str], int] = {}


def _gpm() -> dict[str, Any] | None:
    """The GPM capture (cached per path), or None: no GPM on these GPUs."""
    global _gpm_doc, _gpm_path
    where = os.environ.get("FAKE_NVML_GPM") or str(DEFAULT_GPM)
    if where == "none":
        return None
    if where != _gpm_path:
        _gpm_doc, _gpm_path = json.loads(Path(where).read_text()), where
    return _gpm_doc


def _phase(h: _Handle) -> str:
    phases = [p.strip() for p in (os.environ.get("FAKE_NVML_GPM_PHASE")
                                  or "tensor,memory").split(",") if p.strip()]
    return phases[h.index % len(phases)]


def nvmlGpmQueryDeviceSupport(h: _Handle) -> _Obj:
    if not _init:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    doc = _gpm()
    if doc is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    host = doc["host"]["gpus"]
    return _Obj(version=1, isSupportedDevice=int(bool(host[h.index % len(host)]
                                                       ["gpm_supported"])))


class _GpmSample:
    def __init__(self) -> None:
        self.handle: _Handle | None = None
        self.freed = False


def nvmlGpmSampleAlloc() -> _GpmSample:
    return _GpmSample()


def nvmlGpmSampleFree(s: _GpmSample) -> None:
    if s.freed:  # the real library would free it twice: a bug the tests must see
        raise RuntimeError("GPM sample freed twice")
    s.freed = True


def nvmlGpmSampleGet(h: _Handle, s: _GpmSample) -> None:
    if _gpm() is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    s.handle = h


class _GpmMetric:
    def __init__(self) -> None:
        self.metricId = 0
        self.nvmlReturn = 0
        self.value = 0.0


class c_nvmlGpmMetricsGet_t:
    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: _GpmSample | None = None
        self.sample2: _GpmSample | None = None
        self.metrics = [_GpmMetric() for _ in range(NVML_GPM_METRIC_MAX)]


def nvmlGpmMetricsGet(mg: c_nvmlGpmMetricsGet_t) -> c_nvmlGpmMetricsGet_t:
    """The next captured interval of the GPU's phase, metric by metric as answered."""
    doc = _gpm()
    s1, s2 = mg.sample1, mg.sample2
    if doc is None or s1 is None or s2 is None or s1.handle is None or s2.handle is None \
            or s1.freed or s2.freed or mg.version != NVML_GPM_METRICS_GET_VERSION:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    h = s2.handle
    phase = _phase(h)
    ivs = [iv for iv in doc["phases"][phase]["nvml"]
           if iv.get("gpu") == h.index % len(doc["host"]["gpus"]) and "metrics" in iv]
    k = _gpm_next.get((h.index, phase), 0)
    _gpm_next[(h.index, phase)] = k + 1
    by_id = {m["id"]: m for m in ivs[k % len(ivs)]["metrics"].values()}
    for j in range(mg.numMetrics):
        m = mg.metrics[j]
        rec = by_id.get(m.metricId)
        m.nvmlReturn, m.value = ((NVML_ERROR_NOT_SUPPORTED, 0.0) if rec is None
                                 else (int(rec["nvmlReturn"]), float(rec["value"])))
    return mg
