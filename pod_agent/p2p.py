"""The NCCL P2P probe as the field ran it: two processes, ``file://`` init, one all_reduce.

Verdicts: ``ok`` (finished, sum correct), ``broken`` (a rank failed),
``hung`` (not finished within the timeout: 90 s by default), ``skipped``
(no torch, or fewer than two GPUs). Anything but ``ok`` means P2P must be
disabled on this host: ``NCCL_P2P_DISABLE=1`` plus ``--disable-custom-all-reduce``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

DEFAULT_TIMEOUT_S = 90.0


@dataclass(frozen=True)
class ProbeResult:
    verdict: str
    detail: str
    duration_s: float
    world_size: int


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def run_probe(world_size: int = 2, timeout_s: float = DEFAULT_TIMEOUT_S,
              env: dict[str, str] | None = None, python: str = sys.executable) -> ProbeResult:
    """Run ``world_size`` worker processes; kill the whole group on timeout."""
    t0 = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="p2p-probe-")
    init_file = os.path.join(workdir, "init")
    penv = dict(os.environ)
    penv.update(env or {})
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    penv["PYTHONPATH"] = pkg_root + os.pathsep + penv.get("PYTHONPATH", "")
    procs: list[subprocess.Popen] = []
    try:
        for rank in range(world_size):
            procs.append(subprocess.Popen(
                [python, "-m", "pod_agent.p2p_worker", str(rank), str(world_size), init_file],
                env=penv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                start_new_session=True))
        deadline = t0 + timeout_s
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.05)
        duration = time.monotonic() - t0
        if any(p.poll() is None for p in procs):
            return ProbeResult("hung", f"all_reduce not finished after {timeout_s:g} s",
                               duration, world_size)
        bad = [(i, p) for i, p in enumerate(procs) if p.returncode != 0]
        if bad:
            i, p = bad[0]
            out = (p.stdout.read() if p.stdout else "").strip().splitlines()
            why = out[-1] if out else f"exit {p.returncode}"
            return ProbeResult("broken", f"rank {i}: {why}"[:300], duration, world_size)
        return ProbeResult("ok", f"all_reduce over {world_size} ranks gave {world_size}",
                           duration, world_size)
    finally:
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            if p.stdout:
                p.stdout.close()
        for name in os.listdir(workdir):
            os.unlink(os.path.join(workdir, name))
        os.rmdir(workdir)
