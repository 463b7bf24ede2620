"""The NCCL P2P probe as the field ran it — two processes, ``file://`` init, one
all_reduce — made to prove what it claims.

"The all_reduce finished" alone proves nothing about P2P: with
``NCCL_P2P_DISABLE=1`` inherited (the pod's ``.env`` sets it after an earlier bad
host) NCCL quietly goes through shared memory and the sum is still right. So the
probe:

* scrubs every inherited NCCL setting that chooses a transport (and keeps
  NVLink multicast off: the probe is about P2P, and multicast can take a
  shared host's GPUs out of service);
* runs with ``NCCL_DEBUG=INFO`` and reads, per channel, the transport NCCL
  actually used (``Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM``);
* calls P2P working (``ok``) only when every channel between the ranks went
  ``via P2P``; a finished run over SHM or NET is ``unused``, one with no channel
  lines at all ``unproven`` — neither certifies P2P;
* when the P2P run hangs or breaks, runs a second probe with P2P disabled and
  recommends that fallback only if it is proven (finished, right sum).

Anything but ``ok`` means: ``NCCL_P2P_DISABLE=1`` plus ``--disable-custom-all-reduce``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

DEFAULT_TIMEOUT_S = 90.0

SCRUBBED = (
    "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_P2P_DIRECT_DISABLE", "NCCL_P2P_READ_ENABLE",
    "NCCL_P2P_USE_CUDA_MEMCPY", "NCCL_P2P_NET_CHUNKSIZE", "NCCL_IGNORE_DISABLED_P2P",
    "NCCL_SHM_DISABLE", "NCCL_SHM_USE_CUDA_MEMCPY", "NCCL_IB_DISABLE", "NCCL_NET",
    "NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_READ", "NCCL_CUMEM_ENABLE", "NCCL_ALGO", "NCCL_PROTO",
    "NCCL_TOPO_FILE", "NCCL_GRAPH_FILE", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS",
    "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_COLLNET_ENABLE",
    "CUDA_VISIBLE_DEVICES",
)
"""Inherited settings that decide (or hide) which transport NCCL takes."""

PINNED = {"NCCL_DEBUG": "INFO", "NCCL_NVLS_ENABLE": "0"}

_CHANNEL = re.compile(r"Channel (\d+)(?:/\d+)? : (\d+)\[\d+\] -> (\d+)\[\d+\] via (\S+)")
OUTPUT_CAP = 1024 * 1024
"""Bytes of each rank's log kept for parsing (NCCL INFO is ~10 KB a rank)."""


@dataclass(frozen=True)
class ProbeResult:
    verdict: str
    """ok | unused | unproven | hung | broken | skipped"""
    detail: str
    duration_s: float
    world_size: int
    transports: Tuple[str, ...] = ()
    """Distinct transports NCCL reported between ranks (``P2P/CUMEM``, ``SHM/direct/direct``)."""
    channels: int = 0
    fallback: ProbeResult | None = None
    """The P2P-disabled probe run after a hang or a failure."""
    env: Dict[str, str] = field(default_factory=dict)
    """What the probe set on top of the scrubbed environment."""

    @property
    def p2p_exercised(self) -> bool:
        return bool(self.transports) and all(t.startswith("P2P") for t in self.transports)

    def as_dict(self) -> Dict[str, Any]:
        return {"verdict": self.verdict, "detail": self.detail,
                "probe_s": round(self.duration_s, 3), "transports": list(self.transports),
                "channels": self.channels, "p2p_exercised": self.p2p_exercised,
                "env": dict(self.env),
                "fallback": self.fallback.as_dict() if self.fallback else None}


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def transports_in(text: str) -> Tuple[Tuple[str, ...], int]:
    """Distinct transports of the ``Channel … via X`` lines between different ranks."""
    seen: List[str] = []
    n = 0
    for m in _CHANNEL.finditer(text):
        if m.group(2) == m.group(3):
            continue
        n += 1
        if m.group(4) not in seen:
            seen.append(m.group(4))
    return tuple(seen), n


def probe_env(base: Dict[str, str], extra: Dict[str, str] | None = None
              ) -> Tuple[Dict[str, str], Dict[str, str]]:
    """The scrubbed environment for the workers and what the probe itself set."""
    env = {k: v for k, v in base.items() if k not in SCRUBBED}
    visible = base.get("CUDA_VISIBLE_DEVICES")
    if visible:  # which GPUs the pod may use is not a transport choice: keep it
        env["CUDA_VISIBLE_DEVICES"] = visible
    own = dict(PINNED)
    own.update(extra or {})
    env.update(own)
    return env, own


def run_probe(world_size: int = 2, timeout_s: float = DEFAULT_TIMEOUT_S,
              env: Dict[str, str] | None = None, python: str = sys.executable,
              fallback: bool = True) -> ProbeResult:
    """The P2P probe, then (after a hang or failure) the P2P-disabled one."""
    first = _run_once(world_size, timeout_s, env or {}, python)
    if first.verdict in ("hung", "broken") and fallback:
        second = _run_once(world_size, timeout_s, dict(env or {}, NCCL_P2P_DISABLE="1"), python)
        how = "proven" if second.verdict in ("ok", "unused") else f"also {second.verdict}"
        return ProbeResult(first.verdict, f"{first.detail}; fallback without P2P {how}"
                           f" ({', '.join(second.transports) or 'no channel lines'})",
                           first.duration_s + second.duration_s, world_size, first.transports,
                           first.channels, second, first.env)
    return first


def _run_once(world_size: int, timeout_s: float, extra: Dict[str, str],
              python: str) -> ProbeResult:
    """Run ``world_size`` worker processes; kill each whole group on timeout."""
    t0 = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="p2p-probe-")
    init_file = os.path.join(workdir, "init")
    penv, own = probe_env(dict(os.environ), extra)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    penv["PYTHONPATH"] = pkg_root + os.pathsep + penv.get("PYTHONPATH", "")
    procs: List[subprocess.Popen] = []
    logs: List[str] = []
    try:
        for rank in range(world_size):
            # a file, not a pipe: NCCL INFO can fill a pipe and stall the rank (a false hang)
            log = os.path.join(workdir, f"rank{rank}.log")
            logs.append(log)
            with open(log, "wb") as out:
                procs.append(subprocess.Popen(
                    [python, "-m", "pod_agent.p2p_worker", str(rank), str(world_size),
                     init_file], env=penv, stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True))
        deadline = t0 + timeout_s
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.05)
        duration = time.monotonic() - t0
        texts = [_read(p) for p in logs]
        transports, channels = transports_in("\n".join(texts))
        if any(p.poll() is None for p in procs):
            return ProbeResult("hung", f"all_reduce not finished after {timeout_s:g} s",
                               duration, world_size, transports, channels, env=own)
        bad = [(i, p) for i, p in enumerate(procs) if p.returncode != 0]
        if bad:
            i, p = bad[0]
            lines = [ln for ln in texts[i].strip().splitlines() if " NCCL INFO " not in ln]
            why = lines[-1] if lines else f"exit {p.returncode}"
            return ProbeResult("broken", f"rank {i}: {why}"[:300], duration, world_size,
                               transports, channels, env=own)
        done = f"all_reduce over {world_size} ranks gave {world_size}"
        if not transports:
            return ProbeResult("unproven", f"{done}, but NCCL reported no channel "
                               "transport: P2P not shown to work", duration, world_size,
                               transports, channels, env=own)
        if all(t.startswith("P2P") for t in transports):
            return ProbeResult("ok", f"{done} via {', '.join(transports)} on {channels} "
                               "channels", duration, world_size, transports, channels, env=own)
        return ProbeResult("unused", f"{done} via {', '.join(transports)}: NCCL did not use "
                           "P2P, so P2P was not tested", duration, world_size, transports,
                           channels, env=own)
    finally:
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(OUTPUT_CAP).decode("utf-8", "replace")
    except OSError:
        return ""


RESULT_FILE = "p2p-probe.json"
"""The last probe's result, in the agent's home beside ``.env`` (whose NCCL_P2P_DISABLE
it decided): the GPU screen shows it next to the topology, so a verdict keeps its
evidence after ``check-host`` has ended."""


def save_result(res: ProbeResult, path: str) -> None:
    """Write the result (and when) atomically; a full disk loses only this record."""
    import json

    doc = dict(res.as_dict(), t=round(time.time(), 3))
    tmp = f"{path}.tmp"
    with contextlib.suppress(OSError):
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, sort_keys=True)
        os.replace(tmp, path)


def load_result(path: str) -> Dict[str, Any] | None:
    """The saved result, or None (never probed, or unreadable)."""
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def main(argv: List[str] | None = None) -> int:
    """``python -m pod_agent.p2p [--timeout S] [--no-fallback]``: the probe alone, as JSON."""
    import argparse
    import json

    p = argparse.ArgumentParser(prog="python -m pod_agent.p2p")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S)
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--no-fallback", action="store_true")
    a = p.parse_args(argv)
    res = run_probe(a.world_size, a.timeout, fallback=not a.no_fallback)
    print(json.dumps(res.as_dict(), sort_keys=True))
    return 0 if res.verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
