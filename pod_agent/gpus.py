"""GPU telemetry on the pod: NVML first (``nvidia-ml-py``, NVIDIA's own binding, which
loads the driver's ``libnvidia-ml.so``), ``nvidia-smi --query-gpu`` when NVML cannot load.

One :func:`sample` reads every GPU once and returns plain data (``GpuReading``). A value
the GPU does not report (NVML's "Not Supported": retired pages on Hopper, which remaps
rows instead; fans on a passively cooled card) is ``None``, never 0: an on-call engineer
must not read "0 retired pages" from a GPU that cannot count them.

Xid errors come from NVML's event API (:class:`XidWatcher`, a thread blocked in
``nvmlEventSetWait``) while the agent runs.
"""

from __future__ import annotations

import collections
import contextlib
import re
import shutil
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Deque, Dict, List, Tuple

from . import topology as topo
from .gpm import GpmReader

# NVML's clock-event (throttle) reason bits, as nvml.h numbers them
THROTTLE_REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap",
    0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clocks",
}
SLOW_EVERY_S = 15.0
"""Queries read this seldom: on an H200 the energy counter costs ~5 ms of CPU a call
(measured: ``bench/gpu_telemetry_bench.py --breakdown``), the PCIe replay counter ~0.4 ms,
the 18 NVLink states ~0.3 ms — more than everything else together. All three are
counters or states that a scrape every 15 s or more reads no better at 1 s."""
BENIGN_THROTTLE = 0x1 | 0x2 | 0x10 | 0x100
"""Reasons that are not trouble: an idle GPU, application clocks, sync boost."""


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_bytes: int | None


@dataclass(frozen=True)
class GpuReading:
    index: int
    uuid: str
    name: str
    pci_bus_id: str
    util_gpu_pct: float | None = None
    util_mem_pct: float | None = None
    mem_used_bytes: int | None = None
    """What programs hold: NVML's v2 ``used``, which leaves out the driver's reservation
    (what nvidia-smi and dcgm-exporter call used); v1's ``used`` where v2 is missing."""
    mem_total_bytes: int | None = None
    mem_reserved_bytes: int | None = None
    """The driver's own reservation (v2 only; None where only v1 answers)."""
    mem_free_bytes: int | None = None
    temp_c: float | None = None
    temp_slowdown_c: float | None = None
    temp_shutdown_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_mj: int | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    throttle_mask: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    pcie_replays: int | None = None
    nvlink_up: int | None = None
    nvlink_links: int | None = None
    ecc_enabled: bool | None = None
    ecc_sbe_volatile: int | None = None
    ecc_dbe_volatile: int | None = None
    ecc_sbe_aggregate: int | None = None
    ecc_dbe_aggregate: int | None = None
    retired_sbe: int | None = None
    retired_dbe: int | None = None
    retired_pending: bool | None = None
    remapped_correctable: int | None = None
    remapped_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failed: bool | None = None
    gpm_supported: bool | None = None
    """Whether the GPU has NVML's GPM metrics (Hopper on); None: not asked (nvidia-smi)."""
    sm_active_pct: float | None = None
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_active_pct: float | None = None
    """GPM figures over the last sampling interval (``pod_agent.gpm``); None without GPM."""
    processes: Tuple[GpuProcess, ...] = ()

    @property
    def throttle(self) -> List[str]:
        """The active clock-event reasons by name (benign ones included)."""
        mask = self.throttle_mask or 0
        return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]

    @property
    def throttled(self) -> List[str]:
        """Reasons that cost speed and are not the GPU idling."""
        mask = (self.throttle_mask or 0) & ~BENIGN_THROTTLE
        return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]

    def memory_mib(self) -> Dict[str, int | None]:
        """Used, reserved, free and total memory in MiB as nvidia-smi prints them."""
        return {"used": smi_mib(self.mem_used_bytes),
                "reserved": smi_mib(self.mem_reserved_bytes),
                "free": smi_mib(self.mem_free_bytes), "total": smi_mib(self.mem_total_bytes)}

    def to_json(self) -> Dict[str, Any]:
        d = asdict(self)
        d["processes"] = [asdict(p) for p in self.processes]
        d["throttle"] = self.throttle
        d["throttled"] = self.throttled
        d["mem_mib"] = self.memory_mib()
        return d

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> GpuReading:
        """The inverse of ``to_json`` (the exporter reads the agent's samples this way);
        unknown keys are ignored, a missing field is None."""
        names = {f.name for f in fields(cls)} - {"processes"}
        kw: Dict[str, Any] = {k: d.get(k) for k in names if k in d}
        procs = tuple(GpuProcess(int(p["pid"]), p.get("used_bytes"))
                      for p in d.get("processes") or () if isinstance(p, dict))
        return cls(**kw, processes=procs)


def smi_mib(n: int | None) -> int | None:
    """Bytes as nvidia-smi prints MiB: rounded up. Captured on an H200 (driver 580,
    ``tests/fixtures/nvml-h200-memory``): 615.06 MiB reserved prints 616, 2298.38 MiB
    used prints 2299, 142535.13 MiB free prints 142536. (dcgm-exporter rounds down.)"""
    return None if n is None else -(-int(n) // (1 << 20))


@dataclass(frozen=True)
class XidEvent:
    t: float
    gpu: int
    uuid: str
    xid: int


@dataclass
class GpuTelemetry:
    """What one sample says: the readings, where they came from, and why not if none."""

    readings: List[GpuReading] = field(default_factory=list)
    source: str = "none"  # nvml | nvidia-smi | none
    error: str | None = None
    driver: str | None = None
    t: float = 0.0
    topology: Dict[str, Any] | None = None
    """How the GPUs connect (``pod_agent.topology``), NVML only."""

    def to_json(self) -> Dict[str, Any]:
        return {"source": self.source, "error": self.error, "driver": self.driver,
                "t": self.t, "gpus": [r.to_json() for r in self.readings],
                "topology": self.topology}

    @classmethod
    def from_json(cls, doc: Dict[str, Any]) -> GpuTelemetry:
        top = doc.get("topology")
        return cls([GpuReading.from_json(g) for g in doc.get("gpus") or ()],
                   str(doc.get("source") or "none"), doc.get("error"), doc.get("driver"),
                   float(doc.get("t") or 0.0), top if isinstance(top, dict) else None)


# -- NVML --------------------------------------------------------------------------------

def load_nvml() -> Any:
    """The binding, initialised; raises ImportError or the binding's NVMLError."""
    import pynvml  # nvidia-ml-py

    pynvml.nvmlInit()
    return pynvml


class NvmlSource:
    """Reads every GPU through NVML. ``nvml`` is the ``pynvml`` module (or a stand-in
    with the same functions, in tests and the demo)."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self._unsupported: set[tuple[Any, ...]] = set()
        self._slow_read = -1e18
        self._slow: dict[int, tuple[int | None, int | None, int | None]] = {}
        self._no_mem_v2: set[int] = set()  # GPUs whose driver has no v2 memory call
        self._topology: Dict[str, Any] | None = None
        self.count = nvml.nvmlDeviceGetCount()
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(self.count)]
        # what does not change while the agent runs: read once
        self.static = [self._static(i, h) for i, h in enumerate(self.handles)]
        self.driver = self._get(nvml.nvmlSystemGetDriverVersion)
        self.gpm = GpmReader(nvml, self.handles)

    def _get(self, fn: Callable[..., Any], *args: Any) -> Any:
        """The answer, or None when the GPU does not support (or fails) the query.

        "Not Supported" is remembered per GPU and query: it does not change while the
        driver runs, and a raised NVMLError costs more than the query itself."""
        key = (fn, *(a if isinstance(a, int) else id(a) for a in args))
        if key in self._unsupported:
            return None
        try:
            value = fn(*args)
        except self.nvml.NVMLError as exc:
            if getattr(exc, "value", None) == getattr(self.nvml, "NVML_ERROR_NOT_SUPPORTED",
                                                      3):
                self._unsupported.add(key)
            return None
        return value.decode() if isinstance(value, bytes) else value

    def _static(self, i: int, h: Any) -> Dict[str, Any]:
        n = self.nvml
        pci = self._get(n.nvmlDeviceGetPciInfo, h)
        bus = getattr(pci, "busId", "") if pci is not None else ""
        links = 0
        for link in range(getattr(n, "NVML_NVLINK_MAX_LINKS", 18)):
            try:
                n.nvmlDeviceGetNvLinkState(h, link)
                links += 1
            except n.NVMLError:
                break  # links are numbered from 0; the first invalid one ends them
        mode = self._get(n.nvmlDeviceGetEccMode, h)
        return {
            "index": i, "uuid": self._get(n.nvmlDeviceGetUUID, h) or "",
            "name": self._get(n.nvmlDeviceGetName, h) or "",
            "pci_bus_id": bus.decode() if isinstance(bus, bytes) else bus,
            "temp_slowdown_c": self._get(n.nvmlDeviceGetTemperatureThreshold, h,
                                         n.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
            "temp_shutdown_c": self._get(n.nvmlDeviceGetTemperatureThreshold, h,
                                         n.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
            "sm_clock_max_mhz": self._get(n.nvmlDeviceGetMaxClockInfo, h, n.NVML_CLOCK_SM),
            "pcie_gen_max": self._get(n.nvmlDeviceGetMaxPcieLinkGeneration, h),
            "pcie_width_max": self._get(n.nvmlDeviceGetMaxPcieLinkWidth, h),
            "nvlink_links": links or None,
            "ecc_enabled": bool(mode[0]) if mode else None,
        }

    def read(self, i: int) -> GpuReading:
        n, h, g = self.nvml, self.handles[i], self._get
        util = g(n.nvmlDeviceGetUtilizationRates, h)
        mem = self._memory(i)
        power = g(n.nvmlDeviceGetPowerUsage, h)
        limit = g(n.nvmlDeviceGetEnforcedPowerLimit, h)
        reasons = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) \
            or n.nvmlDeviceGetCurrentClocksThrottleReasons
        corr, unc = n.NVML_MEMORY_ERROR_TYPE_CORRECTED, n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        vol, agg = n.NVML_VOLATILE_ECC, n.NVML_AGGREGATE_ECC
        remap = g(n.nvmlDeviceGetRemappedRows, h)
        sbe_pages = g(n.nvmlDeviceGetRetiredPages, h,
                      n.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
        dbe_pages = g(n.nvmlDeviceGetRetiredPages, h,
                      n.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        pending = g(n.nvmlDeviceGetRetiredPagesPendingStatus, h)
        nvlink_up, energy, replays = self._slow_counters(i)
        procs = g(n.nvmlDeviceGetComputeRunningProcesses, h) or []
        return GpuReading(
            **self.static[i],
            util_gpu_pct=_num(getattr(util, "gpu", None)),
            util_mem_pct=_num(getattr(util, "memory", None)),
            mem_used_bytes=_bytes(mem, "used"), mem_total_bytes=_bytes(mem, "total"),
            mem_reserved_bytes=_bytes(mem, "reserved"), mem_free_bytes=_bytes(mem, "free"),
            temp_c=_num(g(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU)),
            power_w=power / 1000 if power is not None else None,
            power_limit_w=limit / 1000 if limit is not None else None,
            energy_mj=energy,
            sm_clock_mhz=g(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM),
            mem_clock_mhz=g(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM),
            throttle_mask=g(reasons, h),
            pcie_gen=g(n.nvmlDeviceGetCurrPcieLinkGeneration, h),
            pcie_width=g(n.nvmlDeviceGetCurrPcieLinkWidth, h),
            pcie_replays=replays,
            nvlink_up=nvlink_up,
            ecc_sbe_volatile=g(n.nvmlDeviceGetTotalEccErrors, h, corr, vol),
            ecc_dbe_volatile=g(n.nvmlDeviceGetTotalEccErrors, h, unc, vol),
            ecc_sbe_aggregate=g(n.nvmlDeviceGetTotalEccErrors, h, corr, agg),
            ecc_dbe_aggregate=g(n.nvmlDeviceGetTotalEccErrors, h, unc, agg),
            retired_sbe=len(sbe_pages) if sbe_pages is not None else None,
            retired_dbe=len(dbe_pages) if dbe_pages is not None else None,
            retired_pending=bool(pending) if pending is not None else None,
            remapped_correctable=remap[0] if remap else None,
            remapped_uncorrectable=remap[1] if remap else None,
            remap_pending=bool(remap[2]) if remap else None,
            remap_failed=bool(remap[3]) if remap else None,
            processes=tuple(GpuProcess(int(p.pid), _used(p)) for p in procs),
            **self.gpm.read(i).fields(),
        )

    def _memory(self, i: int) -> Any:
        """Memory by NVML's v2 call where the driver (R510 on) and the binding have it,
        else v1. v1 counts the driver's reservation as used (615 MiB on an idle H200
        that nvidia-smi shows as 0 MiB used); v2 reports it apart as ``reserved``.

        A v2 that the driver or binding lacks (no such function, a version it does not
        know, a binding without ``version=``) is given up for this GPU for good; any
        other failure of v2 falls back to v1 for this one read."""
        n, h = self.nvml, self.handles[i]
        v2 = getattr(n, "nvmlMemory_v2", None)
        if v2 is not None and i not in self._no_mem_v2:
            try:
                return n.nvmlDeviceGetMemoryInfo(h, version=v2)
            except TypeError:  # a binding older than the ``version`` argument
                self._no_mem_v2.add(i)
            except n.NVMLError as exc:
                if getattr(exc, "value", None) in _NO_V2:
                    self._no_mem_v2.add(i)
        return self._get(n.nvmlDeviceGetMemoryInfo, h)

    def sample(self) -> GpuTelemetry:
        now = time.monotonic()
        if now - self._slow_read >= SLOW_EVERY_S:
            self._slow.clear()
            self._slow_read = now
            # the wiring does not change, but a link can go down: read with the slow ones
            self._topology = self.topology().to_json()
        return GpuTelemetry([self.read(i) for i in range(self.count)], "nvml",
                            driver=self.driver, t=time.time(), topology=self._topology)

    def topology(self) -> topo.Topology:
        return topo.read(self.nvml, self.handles, [s["pci_bus_id"] for s in self.static],
                         [s["nvlink_links"] for s in self.static])

    def _slow_counters(self, i: int) -> tuple[int | None, int | None, int | None]:
        """(NVLink links up, energy in mJ, PCIe replays), read every ``SLOW_EVERY_S``."""
        if i not in self._slow:
            n, h = self.nvml, self.handles[i]
            links = self.static[i]["nvlink_links"]
            up = None if not links else sum(
                1 for link in range(links) if self._get(n.nvmlDeviceGetNvLinkState, h, link) == 1)
            self._slow[i] = (up, self._get(n.nvmlDeviceGetTotalEnergyConsumption, h),
                             self._get(n.nvmlDeviceGetPcieReplayCounter, h))
        return self._slow[i]


_NO_V2 = {3, 13, 25}
"""NVML errors that say the v2 memory call is not there to have: Not Supported, Function
Not Found (a driver before R510), Argument Version Mismatch."""


def _bytes(mem: Any, name: str) -> int | None:
    v = getattr(mem, name, None)
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) else None


def _used(p: Any) -> int | None:
    v = getattr(p, "usedGpuMemory", None)
    # NVML reports "not available" (no permission, a container) as a huge sentinel
    return int(v) if isinstance(v, int) and v < 1 << 60 else None


# -- nvidia-smi (fallback) ---------------------------------------------------------------

SMI_QUERY = ("index,uuid,name,pci.bus_id,utilization.gpu,utilization.memory,memory.used,"
             "memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,"
             "clocks_event_reasons.active,ecc.errors.corrected.volatile.total,"
             "ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.aggregate.total,"
             "ecc.errors.uncorrected.aggregate.total,pcie.link.gen.current,"
             "pcie.link.width.current,driver_version")
MIB = 1 << 20


def _reader(fields: List[str], conv: Callable[[str], Any]) -> Callable[[int], Any]:
    """Field ``i`` converted, or None for ``[N/A]``, ``[Not Supported]`` and the like."""
    def read(i: int) -> Any:
        try:
            return conv(fields[i])
        except (ValueError, IndexError):
            return None
    return read


def parse_smi_csv(text: str) -> List[GpuReading]:
    """Rows of ``--query-gpu=SMI_QUERY --format=csv,noheader,nounits``; ``[N/A]`` and
    ``[Not Supported]`` read as None."""
    out = []
    for row in text.strip().splitlines():
        f = [x.strip() for x in row.split(",")]
        if len(f) < 20 or not f[0].isdigit():
            continue
        num = _reader(f, float)
        integer = _reader(f, lambda x: int(float(x)))
        mib = _reader(f, lambda x: int(float(x) * MIB))
        try:
            mask: int | None = int(f[13], 16)
        except ValueError:
            mask = None
        out.append(GpuReading(
            index=int(f[0]), uuid=f[1], name=f[2], pci_bus_id=f[3], util_gpu_pct=num(4),
            util_mem_pct=num(5), mem_used_bytes=mib(6), mem_total_bytes=mib(7),
            temp_c=num(8), power_w=num(9), power_limit_w=num(10), sm_clock_mhz=integer(11),
            mem_clock_mhz=integer(12), throttle_mask=mask, ecc_sbe_volatile=integer(14),
            ecc_dbe_volatile=integer(15), ecc_sbe_aggregate=integer(16),
            ecc_dbe_aggregate=integer(17), pcie_gen=integer(18), pcie_width=integer(19)))
    return out


def smi_sample(timeout_s: float = 5.0) -> GpuTelemetry:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return GpuTelemetry(error="no NVML binding and no nvidia-smi on PATH", t=time.time())
    try:
        r = subprocess.run([exe, f"--query-gpu={SMI_QUERY}", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return GpuTelemetry(error=f"nvidia-smi: {exc}", t=time.time())
    if r.returncode != 0:
        lines = (r.stderr or r.stdout).strip().splitlines()
        return GpuTelemetry(error=f"nvidia-smi: {lines[-1] if lines else r.returncode}",
                            t=time.time())
    driver = None
    first = r.stdout.strip().splitlines()[:1]
    if first:
        driver = first[0].rsplit(",", 1)[-1].strip() or None
    return GpuTelemetry(parse_smi_csv(r.stdout), "nvidia-smi", driver=driver, t=time.time())


GPM_WINDOW_S = 1.0
"""The interval a one-shot reading's GPM figures cover: ``nvidia-smi dmon``'s second."""


class Telemetry:
    """NVML when it loads, else nvidia-smi; the choice is made once and said."""

    def __init__(self, nvml: Any = None) -> None:
        self.nvml_error: str | None = None
        self.source: NvmlSource | None = None
        try:
            self.source = NvmlSource(nvml if nvml is not None else load_nvml())
        except ImportError:
            self.nvml_error = "nvidia-ml-py is not installed"
        except Exception as exc:  # the binding's NVMLError: no driver library, say
            self.nvml_error = f"NVML: {exc}"

    def sample(self) -> GpuTelemetry:
        if self.source is not None:
            return self.source.sample()
        return self._smi()

    def sample_once(self, window_s: float = GPM_WINDOW_S) -> GpuTelemetry:
        """One sample for a one-shot caller (``pod-agent gpus``): GPM figures need an
        interval, so the first GPM samples are taken ``window_s`` before the reading."""
        if self.source is None:
            return self._smi()
        if any(self.source.gpm.supported):
            self.source.gpm.prime()
            time.sleep(window_s)
        return self.source.sample()

    def _smi(self) -> GpuTelemetry:
        tel = smi_sample()
        if tel.error and self.nvml_error:
            tel.error = f"{self.nvml_error}; {tel.error}"
        return tel


class Sampler:
    """One thread sampling every ``interval_s``; ``latest`` is the newest sample."""

    def __init__(self, telemetry: Telemetry, interval_s: float) -> None:
        self.telemetry = telemetry
        self.interval_s = interval_s
        self._latest = telemetry.sample()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpu-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            tel = self.telemetry.sample()
            with self._lock:
                self._latest = tel

    def latest(self) -> GpuTelemetry:
        with self._lock:
            return self._latest

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2 * self.interval_s + 1)


# -- Xid events --------------------------------------------------------------------------

class XidWatcher:
    """A daemon thread blocked in NVML's event wait for critical Xid errors; the events
    it saw, newest last, bounded. ``nvml`` is the initialised binding."""

    def __init__(self, nvml: Any, uuids: List[str], keep: int = 256,
                 on_event: Callable[[XidEvent], None] | None = None) -> None:
        self.nvml = nvml
        self.uuids = uuids
        self.events: Deque[XidEvent] = collections.deque(maxlen=keep)
        self.counts: Dict[int, int] = collections.Counter()
        self.on_event = on_event
        self.error: str | None = None
        self.skipped = 0
        self.last_skipped: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        n = self.nvml
        try:
            self._set = n.nvmlEventSetCreate()
            for i in range(len(self.uuids)):
                n.nvmlDeviceRegisterEvents(n.nvmlDeviceGetHandleByIndex(i),
                                           n.nvmlEventTypeXidCriticalError, self._set)
        except n.NVMLError as exc:
            self.error = f"Xid events unavailable: {exc}"
            return
        self._thread = threading.Thread(target=self._run, name="xid-events", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = self.nvml
        while not self._stop.is_set():
            try:
                data = n.nvmlEventSetWait_v2(self._set, 500)  # ms: wakes to see a stop
            except n.NVMLError as exc:
                if getattr(exc, "value", None) == getattr(n, "NVML_ERROR_TIMEOUT", 10):
                    continue
                self.error = f"Xid event wait failed: {exc}"
                return
            try:
                gpu = int(n.nvmlDeviceGetIndex(data.device))
            except n.NVMLError:
                gpu = -1
            try:
                ev = XidEvent(time.time(), gpu, self.uuids[gpu]
                              if 0 <= gpu < len(self.uuids) else "", int(data.eventData))
                self.events.append(ev)
                self.counts[gpu] += 1
                if self.on_event is not None:
                    self.on_event(ev)
            except Exception as exc:  # one bad event is skipped; the watch goes on
                self.skipped += 1
                self.last_skipped = f"{type(exc).__name__}: {exc}"[:200]

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        if self._thread is not None or getattr(self, "_set", None) is not None:
            with contextlib.suppress(Exception):  # the driver may be gone by now
                self.nvml.nvmlEventSetFree(self._set)

    def last(self, gpu: int) -> XidEvent | None:
        for ev in reversed(self.events):
            if ev.gpu == gpu:
                return ev
        return None


# -- what Xid codes mean (the field's stability checklist, and NVIDIA's Xid catalog) -----

XID_MEANING: Dict[int, Tuple[str, str, str]] = {
    # the field's table (seed 003, "장애 1: Xid 에러"): code, severity, meaning, recovery
    13: ("warning", "graphics engine exception",
         "restart the slot; if it repeats, consider replacing the GPU"),
    31: ("warning", "GPU memory page fault",
         "restart the slot (the container); if it repeats, try a newer CUDA driver"),
    48: ("critical", "double-bit ECC error",
         "take this GPU out of service (a fallback pod: f); its hardware needs replacing"),
    63: ("warning", "ECC page retirement / row remapping recorded",
         "check the remapped rows (nvidia-smi -q -d ROW_REMAPPER); replace past the limit"),
    64: ("warning", "ECC page retirement / row remapping failed",
         "check the remapped rows (nvidia-smi -q -d ROW_REMAPPER); replace past the limit"),
    79: ("critical", "GPU has fallen off the bus",
         "only a power-off cold restart brings it back (nvidia-smi -r cannot): move to a "
         "fallback pod (f)"),
    # NVIDIA's Xid catalog, for codes the table does not list
    43: ("info", "a GPU program was stopped by the driver",
         "see which slot restarted and why in its log"),
    45: ("info", "cleanup after a stopped program", "read the Xid before it"),
    74: ("critical", "NVLink error",
         "P2P over NVLink is unreliable (expect NCCL hangs): a fallback pod (f)"),
    92: ("warning", "high single-bit ECC error rate", "watch for Xid 48/63; plan a move"),
    94: ("warning", "contained ECC error (the program using that memory was stopped)",
         "restart the affected slot; the GPU stays in service"),
    95: ("critical", "uncontained ECC error", "the GPU needs a reset: a fallback pod (f)"),
    119: ("critical", "GSP firmware timeout", "the GPU needs a reset: a fallback pod (f)"),
}


def xid_meaning(code: int) -> Tuple[str, str, str]:
    """(severity, what it is, what to do) for an Xid code; unknown codes are warnings."""
    return XID_MEANING.get(code, ("warning", f"Xid {code}",
                                  "look the code up in NVIDIA's Xid catalog; check the "
                                  "slot logs"))


# -- Xid lines in the kernel log (where readable) ------------------------------------------

KMSG_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+)")
MAX_XID = 65535
"""No Xid code is larger (NVIDIA's catalog ends in the hundreds); a line that says so is
not the driver's (a forged ``/dev/kmsg`` write) and is skipped, never parsed: Python
refuses to read an int of more than 4300 digits, and that ValueError once ended the
reader thread silently."""


def parse_kmsg_xid(text: str) -> Tuple[str, int] | None:
    """``(pci_key, code)`` of a kernel-log Xid line, None for another line; ValueError
    (with what was wrong) for an Xid line whose code is no Xid code."""
    m = KMSG_XID.search(text)
    if m is None:
        return None
    digits = m.group(2)
    if len(digits) > len(str(MAX_XID)) or int(digits) > MAX_XID:
        raise ValueError(f"Xid code of {len(digits)} digits ({digits[:12]}"
                         f"{'…' if len(digits) > 12 else ''}) is out of range")
    return pci_key(m.group(1)), int(digits)


def pci_key(bus_id: str) -> str:
    """``0000:00:06`` (the kernel's) and ``00000000:00:06.0`` (NVML's) → ``00:06``."""
    parts = bus_id.lower().split(".")[0].split(":")
    return ":".join(parts[-2:])


MAX_PENDING = 64 << 10
"""A kernel-log record is at most a few KiB (/dev/kmsg hands out whole records); this
much without a newline is read as one line as it stands, and the buffer starts afresh,
so memory stays bounded whatever a writer sends."""


class KmsgXids:
    """Xid lines of the kernel log as they are written (``/dev/kmsg`` from its end, in a
    thread): the driver logs every Xid there, NVML's event API only the critical ones.
    ``on_xid(pci_key, code)``; a log that cannot be opened (a container without the
    privilege) is said in ``error`` and costs nothing."""

    def __init__(self, on_xid: Callable[[str, int], None], path: str = "/dev/kmsg") -> None:
        self.on_xid = on_xid
        self.path = path
        self.error: str | None = None
        self.skipped = 0
        """Xid lines skipped (a code out of range, a report that failed)."""
        self.last_skipped: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._fd = -1
        """The kernel log, open while the reader runs (-1: not open)."""

    @property
    def status_error(self) -> str | None:
        """``error``, or that the reader thread ended while it should run: whatever
        ends it, the watch must not look healthy."""
        if self.error is None and self._thread is not None and \
                not self._thread.is_alive() and not self._stop.is_set():
            return "kernel log reader stopped unexpectedly"
        return self.error

    def start(self) -> None:
        import os

        try:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            self.error = f"kernel log not readable: {exc.strerror or exc}"
            return
        with contextlib.suppress(OSError):
            os.lseek(self._fd, 0, os.SEEK_END)  # what happens from now on (kmsg only)
        self._thread = threading.Thread(target=self._run, name="kmsg-xid", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._read()
        except Exception as exc:  # the reader's death is said, never silent
            self.error = f"kernel log reader stopped: {type(exc).__name__}: {exc}"[:300]

    def _line(self, line: bytes) -> None:
        """One kernel-log record: an Xid reported, anything wrong with it skipped and
        counted (the reader goes on)."""
        try:
            xid = parse_kmsg_xid(line.decode("utf-8", "replace"))
            if xid is not None:
                self.on_xid(*xid)
        except Exception as exc:
            self.skipped += 1
            self.last_skipped = f"{type(exc).__name__}: {exc}"[:200]

    def _read(self) -> None:
        import errno
        import os
        import select

        pending = b""
        while not self._stop.is_set():
            ready, _, _ = select.select([self._fd], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(self._fd, 8192)
            except BlockingIOError:
                continue
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten before we read them
                    continue
                self.error = f"kernel log read failed: {exc.strerror or exc}"
                return
            if not chunk:  # a pipe's writer closed (tests); the real kmsg never ends
                self._stop.wait(0.2)
                continue
            pending += chunk
            *lines, pending = pending.split(b"\n")
            if len(pending) > MAX_PENDING:  # no newline for this long: not a record
                lines.append(pending[:MAX_PENDING])
                pending = b""
            for line in lines:
                self._line(line)

    def stop(self) -> None:
        import os

        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1
