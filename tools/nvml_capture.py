"""Record what NVML answers on a real GPU host, call by call, for an NVML stand-in.

Run on a GPU machine:  python tools/nvml_capture.py OUT_DIR [--load SECONDS] [--memory]

Writes OUT_DIR/nvml-<phase>.json for each phase (``idle``; with ``--load``, ``load``
while a PyTorch matrix-product loop runs on every GPU): every NVML query the pod
agent's telemetry makes, with its arguments and either its answer (structures as
dicts) or the NVML error it raised (code and text) — a query a GPU does not support
is recorded as such, not skipped. Also ``nvidia-smi.csv`` (the fallback's query),
``nvidia-smi-q.txt``, ``timing.json`` (the cost of one telemetry sample per GPU) and
``events.json`` (which event types the GPUs accept for registration, and what a 1 s
wait returned).

With ``--memory``, ``memory-<phase>.json`` for phases ``idle`` (no program on the GPU),
``context`` (one process holding a CUDA context), ``alloc`` (that process holding a few
odd-sized buffers too), ``two-contexts`` (a second process's context besides) and
``load`` (a matrix-product loop): NVML's v1 and v2 memory
answers, ``nvidia-smi --query-gpu=SMI_MEMORY`` (bare and with units), the FB section of
``nvidia-smi -q -d MEMORY``, and the pod agent's own reading and exposition lines, all
at one instant. The NVML answers are read before and after nvidia-smi; ``steady`` says
they were equal, so nvidia-smi saw the same memory the NVML answers say (tried up to
five times per phase).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pynvml as N

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pod_agent.gpus import SMI_QUERY as SMI_FIELDS  # the agent's own query


def plain(x: Any) -> Any:
    if isinstance(x, bytes):
        return x.decode(errors="replace")
    if isinstance(x, list | tuple):
        return [plain(v) for v in x]
    if isinstance(x, ctypes.Array):
        return [plain(v) for v in x]
    if hasattr(x, "_fields_"):
        return {name: plain(getattr(x, name)) for name, *_ in x._fields_}
    if hasattr(x, "__dict__"):  # the binding's nvmlFriendlyObject (process lists)
        return {k: plain(v) for k, v in vars(x).items() if not k.startswith("_")}
    if isinstance(x, int | float | str | bool) or x is None:
        return x
    return repr(x)


def call(out: dict[str, Any], name: str, *args: Any) -> Any:
    """Record ``N.<name>(*args)`` under a key naming the call; handles print as ``h<i>``."""
    key = name + "(" + ",".join(a if isinstance(a, str) else str(a) for a in
                                ("h" + str(HANDLE_INDEX[id(a)]) if id(a) in HANDLE_INDEX
                                 else a for a in args)) + ")"
    try:
        value = getattr(N, name)(*args)
        out[key] = {"ok": plain(value)}
        return value
    except N.NVMLError as exc:
        out[key] = {"error": exc.value, "text": str(exc)}
    except Exception as exc:  # a binding without the function, say
        out[key] = {"exception": f"{type(exc).__name__}: {exc}"}
    return None


HANDLE_INDEX: dict[int, int] = {}


def per_gpu(out: dict[str, Any], h: Any) -> None:
    for name in ("nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo",
                 "nvmlDeviceGetSerial", "nvmlDeviceGetIndex", "nvmlDeviceGetMinorNumber",
                 "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo",
                 "nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit",
                 "nvmlDeviceGetPowerManagementLimit", "nvmlDeviceGetTotalEnergyConsumption",
                 "nvmlDeviceGetPerformanceState", "nvmlDeviceGetCurrentClocksEventReasons",
                 "nvmlDeviceGetCurrentClocksThrottleReasons",
                 "nvmlDeviceGetSupportedClocksEventReasons",
                 "nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth",
                 "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth",
                 "nvmlDeviceGetEccMode", "nvmlDeviceGetRetiredPagesPendingStatus",
                 "nvmlDeviceGetRemappedRows", "nvmlDeviceGetComputeRunningProcesses",
                 "nvmlDeviceGetGraphicsRunningProcesses", "nvmlDeviceGetFanSpeed",
                 "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetComputeMode",
                 "nvmlDeviceGetMigMode", "nvmlDeviceGetBAR1MemoryInfo",
                 "nvmlDeviceGetPcieReplayCounter"):
        call(out, name, h)
    call(out, "nvmlDeviceGetMemoryInfo", h, N.nvmlMemory_v2)
    call(out, "nvmlDeviceGetTemperature", h, N.NVML_TEMPERATURE_GPU)
    for t in ("SHUTDOWN", "SLOWDOWN", "MEM_MAX", "GPU_MAX"):
        c = getattr(N, f"NVML_TEMPERATURE_THRESHOLD_{t}", None)
        if c is not None:
            call(out, "nvmlDeviceGetTemperatureThreshold", h, c)
    for clock in ("SM", "MEM", "GRAPHICS"):
        c = getattr(N, f"NVML_CLOCK_{clock}")
        call(out, "nvmlDeviceGetClockInfo", h, c)
        call(out, "nvmlDeviceGetMaxClockInfo", h, c)
    for err in ("CORRECTED", "UNCORRECTED"):
        for counter in ("VOLATILE_ECC", "AGGREGATE_ECC"):
            call(out, "nvmlDeviceGetTotalEccErrors", h,
                 getattr(N, f"NVML_MEMORY_ERROR_TYPE_{err}"), getattr(N, f"NVML_{counter}"))
    for cause in ("MULTIPLE_SINGLE_BIT_ECC_ERRORS", "DOUBLE_BIT_ECC_ERROR"):
        c = getattr(N, f"NVML_PAGE_RETIREMENT_CAUSE_{cause}")
        call(out, "nvmlDeviceGetRetiredPages", h, c)
    for link in range(getattr(N, "NVML_NVLINK_MAX_LINKS", 18)):
        call(out, "nvmlDeviceGetNvLinkState", h, link)
    # dcgm-exporter's XID field has no NVML getter: it comes from events; field values
    # carry a few others (power, energy) — record what the binding offers
    fields = [getattr(N, n) for n in ("NVML_FI_DEV_POWER_INSTANT",
                                      "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                                      "NVML_FI_DEV_NVLINK_BANDWIDTH_C0_TOTAL",
                                      "NVML_FI_DEV_PCIE_REPLAY_COUNTER") if hasattr(N, n)]
    if fields:
        call(out, "nvmlDeviceGetFieldValues", h, fields)


def capture(phase: str, outdir: Path) -> None:
    out: dict[str, Any] = {"phase": phase, "time": time.time()}
    call(out, "nvmlSystemGetDriverVersion")
    call(out, "nvmlSystemGetNVMLVersion")
    call(out, "nvmlSystemGetCudaDriverVersion")
    n = call(out, "nvmlDeviceGetCount") or 0
    for i in range(n):
        h = N.nvmlDeviceGetHandleByIndex(i)
        HANDLE_INDEX[id(h)] = i
        per_gpu(out, h)
    (outdir / f"nvml-{phase}.json").write_text(json.dumps(out, indent=1, sort_keys=True))


def sample(h: Any) -> None:
    """One telemetry sample: what the agent reads per GPU every second."""
    for fn, args in ((N.nvmlDeviceGetUtilizationRates, ()), (N.nvmlDeviceGetMemoryInfo, ()),
                     (N.nvmlDeviceGetTemperature, (N.NVML_TEMPERATURE_GPU,)),
                     (N.nvmlDeviceGetPowerUsage, ()), (N.nvmlDeviceGetEnforcedPowerLimit, ()),
                     (N.nvmlDeviceGetClockInfo, (N.NVML_CLOCK_SM,)),
                     (N.nvmlDeviceGetClockInfo, (N.NVML_CLOCK_MEM,)),
                     (N.nvmlDeviceGetCurrentClocksEventReasons, ()),
                     (N.nvmlDeviceGetTotalEccErrors, (N.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                                       N.NVML_VOLATILE_ECC)),
                     (N.nvmlDeviceGetTotalEccErrors, (N.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                       N.NVML_VOLATILE_ECC)),
                     (N.nvmlDeviceGetRemappedRows, ()),
                     (N.nvmlDeviceGetComputeRunningProcesses, ())):
        with contextlib.suppress(N.NVMLError):
            fn(h, *args)


def timing(outdir: Path) -> None:
    handles = [N.nvmlDeviceGetHandleByIndex(i) for i in range(N.nvmlDeviceGetCount())]
    for h in handles:
        sample(h)  # warm
    n = 200
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        for h in handles:
            sample(h)
    c1, t1 = time.process_time(), time.perf_counter()
    (outdir / "timing.json").write_text(json.dumps({
        "gpus": len(handles), "samples": n,
        "wall_ms_per_sample_all_gpus": (t1 - t0) / n * 1000,
        "cpu_ms_per_sample_all_gpus": (c1 - c0) / n * 1000}, indent=1))


def events(outdir: Path) -> None:
    out: dict[str, Any] = {}
    handles = [N.nvmlDeviceGetHandleByIndex(i) for i in range(N.nvmlDeviceGetCount())]
    for i, h in enumerate(handles):
        try:
            out[f"supported_event_types(h{i})"] = N.nvmlDeviceGetSupportedEventTypes(h)
        except N.NVMLError as exc:
            out[f"supported_event_types(h{i})"] = {"error": exc.value, "text": str(exc)}
    try:
        es = N.nvmlEventSetCreate()
        for i, h in enumerate(handles):
            try:
                N.nvmlDeviceRegisterEvents(h, N.nvmlEventTypeXidCriticalError, es)
                out[f"register_xid(h{i})"] = "ok"
            except N.NVMLError as exc:
                out[f"register_xid(h{i})"] = {"error": exc.value, "text": str(exc)}
        try:
            d = N.nvmlEventSetWait_v2(es, 1000)
            out["wait_1s"] = {"eventType": d.eventType, "eventData": d.eventData}
        except N.NVMLError as exc:
            out["wait_1s"] = {"error": exc.value, "text": str(exc)}
        N.nvmlEventSetFree(es)
    except N.NVMLError as exc:
        out["event_set"] = {"error": exc.value, "text": str(exc)}
    for cmd in (["dmesg", "--level=err,warn"], ["journalctl", "-k", "-n", "50"]):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            out[" ".join(cmd)] = {"rc": r.returncode, "xid_lines": [
                line for line in r.stdout.splitlines() if "Xid" in line][:20],
                "stderr": r.stderr[-300:]}
        except (OSError, subprocess.TimeoutExpired) as exc:
            out[" ".join(cmd)] = {"exception": str(exc)}
    out["/dev/kmsg readable"] = os.access("/dev/kmsg", os.R_OK)
    (outdir / "events.json").write_text(json.dumps(out, indent=1))


SMI_MEMORY = "memory.used,memory.reserved,memory.free,memory.total"


def memory_answers() -> dict[str, Any]:
    """v1 and v2 memory of every GPU, as recorded calls."""
    out: dict[str, Any] = {}
    for i in range(N.nvmlDeviceGetCount()):
        h = N.nvmlDeviceGetHandleByIndex(i)
        HANDLE_INDEX[id(h)] = i
        call(out, "nvmlDeviceGetMemoryInfo", h)
        call(out, "nvmlDeviceGetMemoryInfo", h, N.nvmlMemory_v2)
    return out


def smi(*args: str) -> str:
    r = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60)
    return r.stdout + r.stderr


def memory_instant(phase: str, outdir: Path) -> None:
    """NVML's memory answers, nvidia-smi's and the agent's at one instant."""
    from pod_agent.exporter import Collector
    from pod_agent.gpus import GpuTelemetry, NvmlSource

    source = NvmlSource(N)
    doc: dict[str, Any] = {"phase": phase, "smi_query": SMI_MEMORY}
    for attempt in range(5):
        before = memory_answers()
        bare = smi(f"--query-gpu={SMI_MEMORY}", "--format=csv,noheader,nounits")
        units = smi(f"--query-gpu={SMI_MEMORY}", "--format=csv,noheader")
        agent = [source.read(i) for i in range(source.count)]
        after = memory_answers()
        doc.update(attempt=attempt, time=time.time(), before=before, after=after,
                   steady=before == after, smi_csv=bare, smi_csv_units=units,
                   agent=[{k: v for k, v in r.to_json().items() if k.startswith("mem_")}
                          for r in agent])
        if doc["steady"]:
            break
        time.sleep(0.5)
    q = smi("-q", "-d", "MEMORY")
    doc["smi_q_memory"] = q
    doc["after_q_steady"] = memory_answers() == doc["after"]
    tel = GpuTelemetry(agent, "nvml", t=time.time())
    coll = Collector(lambda: tel, None, "capture")
    doc["exposition"] = [f"{s.name}{{gpu=\"{s.labels['gpu']}\"}} {s.value}"
                         for fam in coll.collect() for s in fam.samples
                         if s.name.startswith("DCGM_FI_DEV_FB_")]
    (outdir / f"memory-{phase}.json").write_text(json.dumps(doc, indent=1, sort_keys=True))


def hold_memory(outdir: Path, load_s: float) -> None:
    """The ``context``, ``alloc`` and ``load`` phases, in this process (a CUDA context
    on every GPU, then buffers of odd sizes, then a matrix-product loop)."""
    import torch

    n = torch.cuda.device_count()
    keep = [torch.ones(1, device=f"cuda:{d}") for d in range(n)]
    torch.cuda.synchronize()
    memory_instant("context", outdir)
    for d in range(n):  # sizes that are no whole MiB, nor whole 2 MiB pages
        for mib in (1000.3, 37.7, 5.1):
            keep.append(torch.empty(int(mib * (1 << 20)), dtype=torch.uint8,
                                    device=f"cuda:{d}"))
    torch.cuda.synchronize()
    memory_instant("alloc", outdir)
    # a second process's context: another odd amount, so the captured figures do not
    # all share one fraction of a MiB
    other = subprocess.Popen(
        [sys.executable, "-c", "import sys, torch\n"
         "[torch.ones(1, device=f'cuda:{d}') for d in range(torch.cuda.device_count())]\n"
         "torch.cuda.synchronize(); print('ready', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert other.stdout is not None and other.stdin is not None
    if other.stdout.readline().strip() == "ready":
        memory_instant("two-contexts", outdir)
    other.stdin.close()
    other.wait(60)
    if load_s:
        stop = threading.Event()
        t = threading.Thread(target=load, args=(load_s, stop))
        t.start()
        time.sleep(min(load_s / 2, 10))
        memory_instant("load", outdir)
        stop.set()
        t.join()
    del keep


def load(seconds: float, stop: threading.Event) -> None:
    import torch

    def work(dev: int) -> None:
        with torch.cuda.device(dev):
            a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
            end = time.time() + seconds
            while time.time() < end and not stop.is_set():
                for _ in range(20):
                    a @ a
                torch.cuda.synchronize()

    threads = [threading.Thread(target=work, args=(d,)) for d in
               range(torch.cuda.device_count())]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main() -> int:
    outdir = Path(sys.argv[1])
    outdir.mkdir(parents=True, exist_ok=True)
    load_s = float(sys.argv[sys.argv.index("--load") + 1]) if "--load" in sys.argv else 0
    N.nvmlInit()
    if "--memory" in sys.argv:
        try:
            memory_instant("idle", outdir)
            hold_memory(outdir, load_s)
        finally:
            N.nvmlShutdown()
        return 0
    try:
        capture("idle", outdir)
        timing(outdir)
        events(outdir)
        smi = subprocess.run(["nvidia-smi", f"--query-gpu={SMI_FIELDS}",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True)
        (outdir / "nvidia-smi.csv").write_text(f"# --query-gpu={SMI_FIELDS}\n"
                                               + smi.stdout + smi.stderr)
        q = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True)
        (outdir / "nvidia-smi-q.txt").write_text(q.stdout + q.stderr)
        if load_s:
            stop = threading.Event()
            t = threading.Thread(target=load, args=(load_s, stop))
            t.start()
            time.sleep(min(load_s / 2, 20))
            capture("load", outdir)
            smi = subprocess.run(["nvidia-smi", f"--query-gpu={SMI_FIELDS}",
                                  "--format=csv,noheader,nounits"], capture_output=True,
                                 text=True)
            (outdir / "nvidia-smi-load.csv").write_text(smi.stdout + smi.stderr)
            stop.set()
            t.join()
    finally:
        N.nvmlShutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
