"""``pod-agent check-host``: every trap the field met on a new host, as a check.

Output: ``{"ok": bool, "checks": [{"name", "ok", "value", "detail", "duration_s"}]}``
with ``ok: null`` for a skipped check. Exit 0 all passed, 1 any failed, 3 the
P2P probe hung.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from . import gpuinfo, p2p
from .envfile import update_env
from .profile import Profile

SYS_PIDFD_GETFD = {"x86_64": 438, "aarch64": 438}
DEFAULT_MEM_FLOOR_GIB = 12.0


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None
    value: Any = None
    detail: str = ""
    duration_s: float = 0.0


def _timed(name: str, fn: Callable[[], Check]) -> Check:
    t0 = time.monotonic()
    try:
        c = fn()
    except Exception as exc:  # a broken check is a failed check, never a crash
        c = Check(name, False, None, f"{type(exc).__name__}: {exc}")
    return Check(c.name, c.ok, c.value, c.detail, round(time.monotonic() - t0, 3))


def check_gpus(info: gpuinfo.GpuInfo, profile: Profile | None) -> Check:
    if info.error:
        return Check("gpus", False, None, info.error)
    gpu_names = [g.name for g in info.gpus]
    value = {"count": len(info.gpus), "names": gpu_names,
             "memory_mib": [g.memory_mib for g in info.gpus], "driver": info.driver,
             "cuda": info.cuda}
    if profile is not None and len(info.gpus) < profile.effective_gpu_count:
        return Check("gpus", False, value,
                     f"{len(info.gpus)} GPU(s), the profile needs {profile.effective_gpu_count}")
    names = ", ".join(sorted(set(gpu_names)))
    return Check("gpus", True, value, f"{len(info.gpus)} × {names}, driver {info.driver}")


def check_cuda(info: gpuinfo.GpuInfo, profile: Profile | None) -> Check:
    need = profile.min_cuda if profile else None
    if info.cuda is None:
        return Check("driver_cuda", False if need else None, None,
                     "driver CUDA version unknown" + ("" if need else "; no min_cuda to check"))
    if not need:
        return Check("driver_cuda", None, info.cuda, "no min_cuda in the profile")
    have, want = gpuinfo.version_tuple(info.cuda), gpuinfo.version_tuple(need)
    if not have or not want:  # unreadable: not a number to compare, and never a crash
        return Check("driver_cuda", False, info.cuda,
                     f"cannot compare driver CUDA {info.cuda!r} with required {need!r}")
    ok = have >= want
    rel = ">=" if ok else "<"
    return Check("driver_cuda", ok, info.cuda, f"driver CUDA {info.cuda} {rel} required {need}")


def check_p2p(info: gpuinfo.GpuInfo, timeout_s: float, env_path: str | None) -> Check:
    """P2P certified only when NCCL used it; a failed P2P run needs a proven fallback.

    ``ok`` is False when P2P hung or broke (the host still serves with P2P off, if
    the fallback probe passed: ``value.fallback.verdict``), True otherwise. The
    ``.env`` verdict is written only from what was proven: ``NCCL_P2P_DISABLE=0``
    needs P2P exercised, never merely a finished all_reduce.
    """
    n = len(info.gpus)
    if n < 2:
        return Check("p2p", None, None, f"skipped: {n} GPU(s), the probe needs two")
    if not p2p.torch_available():
        return Check("p2p", None, None, "skipped: torch is not importable here")
    res = p2p.run_probe(2, timeout_s)
    disable = res.verdict != "ok"
    if env_path:
        update_env(env_path, {"NCCL_P2P_DISABLE": "1" if disable else "0"})
        p2p.save_result(res, os.path.join(os.path.dirname(env_path), p2p.RESULT_FILE))
    value = res.as_dict()
    value["nccl_p2p_disable"] = 1 if disable else 0
    value["fallback_proven"] = (res.fallback.verdict in ("ok", "unused")
                                if res.fallback is not None else None)
    return Check("p2p", res.verdict not in ("hung", "broken"), value, res.detail)


def check_gpu_health(telemetry: Any = None) -> Check:
    """Memory faults and current throttling, per GPU (NVML, else nvidia-smi).

    A GPU with an uncorrectable ECC error since the driver loaded, a pending page
    retirement or row remap, or a failed remap fails the check: the next host is the
    way out. Throttling is said, not failed (an idle or power-capped GPU is fine; the
    alerts follow heat)."""
    from .gpus import Telemetry

    tel = (telemetry or Telemetry()).sample()
    if not tel.readings:
        return Check("gpu_health", None, None, f"skipped: {tel.error or 'no GPU readings'}")
    bad: list[str] = []
    value = []
    for r in tel.readings:
        faults = []
        if r.ecc_dbe_volatile:  # since the driver loaded; older ones were remapped away
            faults.append(f"{r.ecc_dbe_volatile} double-bit ECC error(s) since the driver "
                          "loaded")
        if r.remap_failed:
            faults.append("row remapping failed")
        if r.remap_pending or r.retired_pending:
            faults.append("memory repair pending a reset")
        value.append({"gpu": r.index, "uuid": r.uuid, "faults": faults,
                      "throttled": r.throttled, "temp_c": r.temp_c,
                      "remapped_uncorrectable": r.remapped_uncorrectable,
                      "ecc_dbe_aggregate": r.ecc_dbe_aggregate})
        bad += [f"GPU {r.index}: {f}" for f in faults]
    throttled = [f"GPU {r.index} {','.join(r.throttled)}" for r in tel.readings if r.throttled]
    detail = "; ".join(bad) if bad else (
        f"{len(value)} GPU(s): no memory faults via {tel.source}"
        + (f"; throttled now: {'; '.join(throttled)}" if throttled else ""))
    return Check("gpu_health", not bad, value, detail)


OPTIONAL_MODULES = (
    # (import name, distribution and its install line, what the agent uses it for)
    ("pynvml", "nvidia-ml-py", "nvidia-ml-py>=12.535",
     "GPU telemetry through NVML (else nvidia-smi: slower, no per-process GPU memory)"),
    ("prometheus_client", "prometheus-client", "prometheus-client>=0.17",
     "the GPU metrics exporter (the profile's gpu_metrics_port)"),
)
"""What the agent imports beyond its own install (pyproject's ``agent`` extra; vLLM's
images carry both). The watchdog needs neither: a plain ``pip install .`` stops pods."""


def check_modules(profile: Profile | None) -> Check:
    """The optional modules this host lacks, each with what it costs and the line that
    installs it. Failed when one the agent cannot do without here is missing: NVML's
    binding with no nvidia-smi to fall back on, ``prometheus_client`` for a profile
    that serves GPU metrics."""
    import importlib.util

    missing: list[str] = []
    lines: list[str] = []
    fatal = False
    for module, dist, spec, use in OPTIONAL_MODULES:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if found:
            continue
        missing.append(dist)
        lines.append(f"{dist} missing ({use}): pip install '{spec}'")
        if module == "pynvml" and shutil.which("nvidia-smi") is None:
            fatal = True
        if module == "prometheus_client" and profile is not None \
                and profile.gpu_metrics_port is not None:
            fatal = True
    value = {"missing": missing}
    if not missing:
        return Check("modules", True, value, "nvidia-ml-py, prometheus-client: installed")
    return Check("modules", not fatal, value, "; ".join(lines))


def check_pidfd() -> Check:
    """pidfd_open + pidfd_getfd on a child: vLLM's PLE CPU offload needs both.

    Docker's default seccomp profile answers EPERM to pidfd_getfd without
    CAP_SYS_PTRACE, which RunPod pods cannot add.
    """
    if not hasattr(os, "pidfd_open"):
        return Check("pidfd", None, None, "skipped: os.pidfd_open unavailable (not Linux?)")
    nr = SYS_PIDFD_GETFD.get(platform.machine())
    if nr is None:
        return Check("pidfd", None, None, f"skipped: unknown syscall number on "
                                          f"{platform.machine()}")
    child = subprocess.Popen(["sleep", "30"], stdin=subprocess.PIPE)
    try:
        try:
            pidfd = os.pidfd_open(child.pid)
        except OSError as exc:
            return Check("pidfd", False, {"pidfd_open": errno.errorcode.get(exc.errno or 0, "?")},
                         f"pidfd_open failed: {exc.strerror}")
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.syscall(nr, pidfd, 0, 0)
            if fd < 0:
                err = ctypes.get_errno()
                name = errno.errorcode.get(err, str(err))
                return Check("pidfd", False, {"pidfd_open": "ok", "pidfd_getfd": name},
                             f"pidfd_getfd: {name} (PLE CPU offload unavailable here)")
            os.close(fd)
            return Check("pidfd", True, {"pidfd_open": "ok", "pidfd_getfd": "ok"},
                         "pidfd_open and pidfd_getfd work")
        finally:
            os.close(pidfd)
    finally:
        child.kill()
        child.wait()


def _hf_cached(repo: str) -> bool:
    hub = os.path.join(os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface"),
                       "hub")
    return os.path.isdir(os.path.join(hub, "models--" + repo.replace("/", "--")))


def check_disk(profile: Profile | None, where: str) -> Check:
    os.makedirs(where, exist_ok=True)
    free_gb = shutil.disk_usage(where).free / 1e9
    need = 0.0
    missing = []
    if profile is not None:
        for name, slot in profile.slots.items():
            if slot.weights_gb and not _hf_cached(slot.hf_repo_id):
                need += slot.weights_gb
                missing.append(name)
    need *= 1.1  # download temp files and HF cache bookkeeping
    value = {"free_gb": round(free_gb, 1), "need_gb": round(need, 1), "path": where}
    if need == 0:
        return Check("disk", True, value, f"{free_gb:.1f} GB free; no weights to download")
    ok = free_gb >= need
    return Check("disk", ok, value, f"{free_gb:.1f} GB free, {need:.1f} GB needed for "
                                    f"{', '.join(missing)}")


def mem_available_gib(meminfo: str = "/proc/meminfo", key: str = "MemAvailable"
                      ) -> float | None:
    try:
        with open(meminfo) as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / (1024 * 1024)
    except OSError:
        return None
    return None


def mem_total_gib(meminfo: str = "/proc/meminfo") -> float | None:
    return mem_available_gib(meminfo, "MemTotal")


def check_memory(floor_gib: float) -> Check:
    avail = mem_available_gib()
    if avail is None:
        return Check("memory", None, None, "MemAvailable not readable")
    ok = avail >= floor_gib
    return Check("memory", ok, {"available_gib": round(avail, 1), "floor_gib": floor_gib},
                 f"{avail:.1f} GiB available ({'>=' if ok else '<'} {floor_gib:g} GiB)")


def run_checks(profile: Profile | None, p2p_timeout_s: float = p2p.DEFAULT_TIMEOUT_S,
               env_path: str | None = None, disk_path: str | None = None,
               mem_floor_gib: float = DEFAULT_MEM_FLOOR_GIB) -> list[Check]:
    info = gpuinfo.query()
    where = disk_path or os.environ.get("HF_HOME") or os.path.expanduser("~")
    return [
        _timed("gpus", lambda: check_gpus(info, profile)),
        _timed("driver_cuda", lambda: check_cuda(info, profile)),
        _timed("gpu_health", check_gpu_health),
        _timed("p2p", lambda: check_p2p(info, p2p_timeout_s, env_path)),
        _timed("pidfd", check_pidfd),
        _timed("disk", lambda: check_disk(profile, where)),
        _timed("memory", lambda: check_memory(mem_floor_gib)),
        _timed("modules", lambda: check_modules(profile)),
    ]


def report(checks: list[Check]) -> dict[str, Any]:
    return {"ok": all(c.ok is not False for c in checks),
            "checks": [asdict(c) for c in checks]}


def exit_code(checks: list[Check]) -> int:
    for c in checks:
        if c.name == "p2p" and isinstance(c.value, dict) and c.value.get("verdict") == "hung":
            return 3
    return 0 if all(c.ok is not False for c in checks) else 1
