"""Record what NVML's GPM (GPU Performance Monitoring, Hopper and later) and topology calls
answer on a real GPU host, for the pod agent's reader and its tests.

Run on a GPU machine:  python tools/gpm_capture.py OUT_DIR [--seconds 8]

Writes OUT_DIR/gpm.json:
- ``host``: driver, NVML and nvidia-ml-py versions, each GPU's name, architecture and
  whether ``nvmlGpmQueryDeviceSupport`` says GPM is supported;
- ``phases``: for ``idle`` (nothing running), ``tensor`` (a bf16 matrix-product loop on
  every GPU: tensor-pipe bound) and ``memory`` (a device-to-device copy loop of 4 GiB
  buffers: DRAM bound), one entry per GPU and per one-second interval: each metric id
  asked of ``nvmlGpmMetricsGet`` with its NVML return code and value, exactly as answered;
  beside it, what ``nvidia-smi dmon --gpm-metrics`` printed during the same phase (the
  independent reference);
- ``topology``: for every ordered pair of GPUs, ``nvmlDeviceGetTopologyCommonAncestor``
  and ``nvmlDeviceGetP2PStatus`` for each capability index, each GPU's NvLink states, and
  ``nvidia-smi topo -m`` as printed.

Every call's error is recorded (code and text), never skipped: a query a GPU does not
support is data too.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pynvml as N

METRICS = {
    1: "GRAPHICS_UTIL", 2: "SM_UTIL", 3: "SM_OCCUPANCY", 4: "INTEGER_UTIL",
    5: "ANY_TENSOR_UTIL", 7: "HMMA_TENSOR_UTIL", 10: "DRAM_BW_UTIL",
    11: "FP64_UTIL", 12: "FP32_UTIL", 13: "FP16_UTIL",
    20: "PCIE_TX_PER_SEC", 21: "PCIE_RX_PER_SEC",
    60: "NVLINK_TOTAL_RX_PER_SEC", 61: "NVLINK_TOTAL_TX_PER_SEC",
}
"""The ids asked; dcgm-exporter's profiling fields map onto 2 (SM_ACTIVE), 3
(SM_OCCUPANCY), 5 (PIPE_TENSOR_ACTIVE) and 10 (DRAM_ACTIVE)."""

P2P_INDEXES = {"READ": 0, "WRITE": 1, "NVLINK": 2, "ATOMICS": 3, "PCI": 4}
"""Literal values: nvidia-ml-py spells NVML_P2P_CAPS_INDEX_READ with a trailing comma
(a tuple), so the module's constants are not used here."""

LOADS = {
    "tensor": """
import torch, time, threading, sys
secs = float(sys.argv[1])
def w(d):
    with torch.cuda.device(d):
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        end = time.time() + secs
        while time.time() < end:
            for _ in range(20): a @ a
            torch.cuda.synchronize()
ts = [threading.Thread(target=w, args=(d,)) for d in range(torch.cuda.device_count())]
[t.start() for t in ts]; [t.join() for t in ts]
""",
    "memory": """
import torch, time, threading, sys
secs = float(sys.argv[1])
def w(d):
    with torch.cuda.device(d):
        n = 1 << 30  # 1 Gi floats: 4 GiB per buffer
        a = torch.empty(n, device="cuda", dtype=torch.float32).fill_(1.0)
        b = torch.empty_like(a)
        end = time.time() + secs
        while time.time() < end:
            for _ in range(10): b.copy_(a)
            torch.cuda.synchronize()
ts = [threading.Thread(target=w, args=(d,)) for d in range(torch.cuda.device_count())]
[t.start() for t in ts]; [t.join() for t in ts]
""",
}


def _err(exc: BaseException) -> dict[str, Any]:
    return {"error": type(exc).__name__, "code": getattr(exc, "value", None),
            "text": str(exc)}


def _call(fn: Any, *args: Any) -> Any:
    try:
        out = fn(*args)
    except N.NVMLError as exc:
        return _err(exc)
    if isinstance(out, bytes):
        return out.decode()
    return out


def host_info(handles: list[Any]) -> dict[str, Any]:
    gpus = []
    for i, h in enumerate(handles):
        sup = _call(N.nvmlGpmQueryDeviceSupport, h)
        gpus.append({
            "index": i, "name": _call(N.nvmlDeviceGetName, h),
            "uuid": _call(N.nvmlDeviceGetUUID, h),
            "architecture": _call(N.nvmlDeviceGetArchitecture, h),
            "gpm_supported": (sup if isinstance(sup, dict)
                              else bool(sup.isSupportedDevice)),
        })
    return {"driver": _call(N.nvmlSystemGetDriverVersion),
            "nvml": _call(N.nvmlSystemGetNVMLVersion),
            "nvidia_ml_py": getattr(N, "__version__", None), "gpus": gpus}


def sample_phase(handles: list[Any], seconds: int) -> list[dict[str, Any]]:
    """``seconds`` one-second intervals per GPU: two GPM samples a second apart, then
    every metric id asked of the pair."""
    out: list[dict[str, Any]] = []
    samples = {}
    for i, h in enumerate(handles):
        try:
            s = N.nvmlGpmSampleAlloc()
            N.nvmlGpmSampleGet(h, s)
            samples[i] = s
        except N.NVMLError as exc:
            out.append({"gpu": i, "interval": None, **_err(exc)})
    for k in range(seconds):
        t0 = time.monotonic()
        time.sleep(1.0)
        for i, h in enumerate(handles):
            if i not in samples:
                continue
            s2 = N.nvmlGpmSampleAlloc()
            try:
                N.nvmlGpmSampleGet(h, s2)
                mg = N.c_nvmlGpmMetricsGet_t()
                mg.version = N.NVML_GPM_METRICS_GET_VERSION
                mg.numMetrics = len(METRICS)
                mg.sample1 = samples[i]
                mg.sample2 = s2
                for j, mid in enumerate(METRICS):
                    mg.metrics[j].metricId = mid
                N.nvmlGpmMetricsGet(mg)
                vals = {}
                for j, mid in enumerate(METRICS):
                    m = mg.metrics[j]
                    vals[METRICS[mid]] = {"id": mid, "nvmlReturn": int(m.nvmlReturn),
                                          "value": float(m.value)}
                out.append({"gpu": i, "interval": k,
                            "seconds": round(time.monotonic() - t0, 3), "metrics": vals})
            except N.NVMLError as exc:
                out.append({"gpu": i, "interval": k, **_err(exc)})
            N.nvmlGpmSampleFree(samples[i])
            samples[i] = s2
    for s in samples.values():
        N.nvmlGpmSampleFree(s)
    return out


def dmon(seconds: int) -> dict[str, Any]:
    cmd = ["nvidia-smi", "dmon", "--gpm-metrics", "2,3,5,10", "-c", str(seconds)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 20)
        return {"argv": cmd, "rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"argv": cmd, "error": str(exc)}


def topology(handles: list[Any]) -> dict[str, Any]:
    pairs = []
    for i, a in enumerate(handles):
        for j, b in enumerate(handles):
            if i == j:
                continue
            anc = _call(N.nvmlDeviceGetTopologyCommonAncestor, a, b)
            p2p = {name: _call(N.nvmlDeviceGetP2PStatus, a, b, idx)
                   for name, idx in P2P_INDEXES.items()}
            pairs.append({"gpu": i, "peer": j, "common_ancestor": anc, "p2p": p2p})
    links = []
    for i, h in enumerate(handles):
        states = {}
        for link in range(N.NVML_NVLINK_MAX_LINKS):
            st = _call(N.nvmlDeviceGetNvLinkState, h, link)
            states[str(link)] = st
            if isinstance(st, dict):  # past the GPU's last link NVML says so: stop there
                break
        links.append({"gpu": i, "nvlink_state": states})
    try:
        smi = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True,
                             timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        smi = f"error: {exc}"
    return {"pairs": pairs, "nvlink": links, "nvidia_smi_topo_m": smi}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seconds", type=int, default=8)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    N.nvmlInit()
    handles = [N.nvmlDeviceGetHandleByIndex(i) for i in range(N.nvmlDeviceGetCount())]
    doc: dict[str, Any] = {"host": host_info(handles), "phases": {}}
    for phase in ("idle", "tensor", "memory"):
        load = None
        if phase in LOADS:
            load = subprocess.Popen([sys.executable, "-c", LOADS[phase],
                                     str(2 * a.seconds + 25)])
            time.sleep(8)  # CUDA context and the first kernels: the steady part is sampled
        nv = sample_phase(handles, a.seconds)
        ref = dmon(a.seconds)
        doc["phases"][phase] = {"nvml": nv, "nvidia_smi_dmon": ref}
        if load is not None:
            load.terminate()
            load.wait(timeout=30)
    doc["topology"] = topology(handles)
    (out / "gpm.json").write_text(json.dumps(doc, indent=1, default=str))
    print(json.dumps(doc["host"]))
    for phase, d in doc["phases"].items():
        print(phase, d["nvidia_smi_dmon"].get("stdout", d["nvidia_smi_dmon"]))
    print(doc["topology"]["nvidia_smi_topo_m"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
