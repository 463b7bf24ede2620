"""What ``nvidia-smi`` says about the host: GPUs, driver and the driver's CUDA version."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

QUERY = "index,name,memory.total,driver_version,pci.bus_id"
_CUDA_RE = re.compile(r"CUDA Version\s*:\s*(\d+\.\d+)")


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    memory_mib: int
    driver: str
    bus_id: str = ""


@dataclass(frozen=True)
class GpuInfo:
    gpus: list[Gpu] = field(default_factory=list)
    driver: str | None = None
    cuda: str | None = None
    error: str | None = None


def parse_query_csv(text: str) -> list[Gpu]:
    """Rows of ``--query-gpu=QUERY --format=csv,noheader,nounits``."""
    gpus = []
    for row in text.strip().splitlines():
        parts = [p.strip() for p in row.split(",")]
        if len(parts) < 4:
            continue
        try:
            gpus.append(Gpu(int(parts[0]), parts[1], int(float(parts[2])), parts[3],
                            parts[4] if len(parts) > 4 else ""))
        except ValueError:
            continue
    return gpus


def parse_cuda_version(text: str) -> str | None:
    """The driver's CUDA version from the plain header or from ``nvidia-smi -q``."""
    m = _CUDA_RE.search(text)
    return m.group(1) if m else None


def version_tuple(v: str | None) -> tuple[int, ...]:
    """``"12.4.1"`` → ``(12, 4, 1)``. Tolerant of what drivers and profiles write: each
    part's leading digits count (``"13.0-rc1"`` → ``(13, 0)``, ``" 12.4 "`` → ``(12, 4)``)
    and the first part without any ends it (``"12.x"`` → ``(12,)``); nothing readable
    (``"N/A"``, ``""``, None) → ``()``, which callers treat as unknown, never raising."""
    out: list[int] = []
    for part in (v or "").strip().split("."):
        m = re.match(r"\s*(\d+)", part)
        if m is None:
            break
        out.append(int(m.group(1)))
    return tuple(out)


def _run(argv: list[str], timeout: float) -> str:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if out.returncode != 0:
        lines = (out.stderr or out.stdout).strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"exit {out.returncode}")
    return out.stdout


def query(timeout: float = 20.0) -> GpuInfo:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return GpuInfo(error="nvidia-smi not found on PATH")
    try:
        gpus = parse_query_csv(_run([exe, f"--query-gpu={QUERY}",
                                     "--format=csv,noheader,nounits"], timeout))
        cuda = parse_cuda_version(_run([exe], timeout))
        if cuda is None:
            cuda = parse_cuda_version(_run([exe, "-q"], timeout))
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        return GpuInfo(error=f"nvidia-smi failed: {exc}")
    driver = gpus[0].driver if gpus else None
    return GpuInfo(gpus=gpus, driver=driver, cuda=cuda)
