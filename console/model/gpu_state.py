"""The pod's GPUs as the agent reported them (``status`` → ``gpus``): immutable, parsed
defensively — an agent of another version or a malformed answer gives fewer fields,
never an exception — and the GPU alert rules.

Numbers are the agent's NVML readings (``pod_agent/gpus.py``): percent, bytes, °C, W,
MHz. None means the GPU did not report it (not zero)."""

from __future__ import annotations

from typing import Any

from msgspec import Struct
from msgspec.structs import asdict

from console.model.conditions import Condition, Severity
from console.model.gpu_topology import GpuTopology, P2pProbe, parse_probe, parse_topology

THERMAL = ("sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown",
           "hw_power_brake_slowdown")
"""Throttle reasons that are trouble (power capping under load is the GPU working)."""
UNOWNED_MIN_BYTES = 1 << 30
"""GPU memory a program outside every slot must hold before it is an alert."""
IDLE_SM_PCT = 5.0
"""SM activity under this (percent) reads as an idle GPU."""
BUSY_PCT = 50.0
"""A tensor pipe or the DRAM interface busy at least this (percent) is what bounds the
work: the H200 capture's matmul loop read 93 % tensor / 16 % DRAM, its copy loop 0 % /
88 % (``tests/fixtures/gpm-h200``)."""
XID_RECENT_S = 15 * 60
"""An Xid stays an alert this long after it arrived (NVML reports it once)."""


class GpuProcess(Struct, frozen=True):
    pid: int
    slot: str | None
    used_bytes: int | None


class Gpu(Struct, frozen=True):
    index: int
    name: str = ""
    uuid: str = ""
    util_pct: float | None = None
    mem_used: int | None = None
    mem_total: int | None = None
    temp_c: float | None = None
    temp_slowdown_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    throttled: tuple[str, ...] = ()
    ecc_sbe_volatile: int | None = None
    ecc_dbe_volatile: int | None = None
    remapped_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failed: bool | None = None
    retired_pending: bool | None = None
    nvlink_up: int | None = None
    nvlink_links: int | None = None
    gpm_supported: bool | None = None
    """NVML's GPM metrics on this GPU (Hopper on): False says "not on this GPU"; None:
    not said (an older agent, nvidia-smi)."""
    sm_active_pct: float | None = None
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_active_pct: float | None = None
    processes: tuple[GpuProcess, ...] = ()

    @property
    def mem_frac(self) -> float | None:
        if self.mem_used is None or not self.mem_total:
            return None
        return self.mem_used / self.mem_total

    @property
    def power_frac(self) -> float | None:
        if self.power_w is None or not self.power_limit_w:
            return None
        return self.power_w / self.power_limit_w

    @property
    def hot(self) -> bool:
        return bool(set(self.throttled) & set(THERMAL))

    @property
    def clock_reason(self) -> str:
        """Why the SM clock is held down, in a word every screen uses: ``thermal``,
        ``power cap``, or "" (not held down, or for a benign reason)."""
        reasons = set(self.throttled)
        if reasons & {"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown"}:
            return "thermal"
        if reasons & {"sw_power_cap", "hw_power_brake_slowdown"}:
            return "power cap"
        return ""

    @property
    def activity(self) -> str:
        """What the GPM figures say the SMs are doing, in a word: ``idle``,
        ``tensor-bound`` (tensor pipes busy, DRAM not), ``memory-bound`` (DRAM busy,
        tensor pipes not), ``mixed``; "" without the figures. A decode step that waits on
        memory reads 100 % util as much as a matmul does; this tells them apart."""
        sm, tensor, dram = self.sm_active_pct, self.tensor_active_pct, self.dram_active_pct
        if sm is None or tensor is None or dram is None:
            return ""
        if sm < IDLE_SM_PCT:
            return "idle"
        if tensor >= BUSY_PCT and dram < BUSY_PCT:
            return "tensor-bound"
        if dram >= BUSY_PCT and tensor < BUSY_PCT:
            return "memory-bound"
        return "mixed"

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "uuid": self.uuid,
                "util_pct": self.util_pct, "mem_used": self.mem_used,
                "mem_total": self.mem_total, "temp_c": self.temp_c,
                "power_w": self.power_w, "power_limit_w": self.power_limit_w,
                "sm_clock_mhz": self.sm_clock_mhz, "throttled": list(self.throttled),
                "ecc_dbe_volatile": self.ecc_dbe_volatile,
                "ecc_sbe_volatile": self.ecc_sbe_volatile,
                "remap_pending": self.remap_pending, "remap_failed": self.remap_failed,
                "gpm_supported": self.gpm_supported, "sm_active_pct": self.sm_active_pct,
                "sm_occupancy_pct": self.sm_occupancy_pct,
                "tensor_active_pct": self.tensor_active_pct,
                "dram_active_pct": self.dram_active_pct,
                "processes": [{"pid": p.pid, "slot": p.slot, "used_bytes": p.used_bytes}
                              for p in self.processes]}


class XidRecord(Struct, frozen=True):
    t: float
    gpu: int
    xid: int
    severity: str
    meaning: str
    advice: str


class GpuReport(Struct, frozen=True):
    """What the agent's last status said of the GPUs."""

    gpus: tuple[Gpu, ...] = ()
    source: str | None = None
    error: str | None = None
    sampled_at: float | None = None
    xids: tuple[XidRecord, ...] = ()
    topology: GpuTopology | None = None
    p2p_probe: P2pProbe | None = None
    """The last ``check-host`` P2P probe the agent keeps (None: never probed)."""

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "error": self.error, "sampled_at": self.sampled_at,
                "gpus": [g.to_json() for g in self.gpus],
                "xid_events": [asdict(x) for x in self.xids],
                "topology": None if self.topology is None else {
                    "gpus": list(self.topology.gpus),
                    "matrix": [list(r) for r in self.topology.matrix]},
                "p2p_probe": None if self.p2p_probe is None else {
                    "verdict": self.p2p_probe.verdict,
                    "transports": list(self.p2p_probe.transports)}}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def _bool(v: Any) -> bool | None:
    return v if isinstance(v, bool) else None


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def parse(doc: Any) -> GpuReport | None:
    """The agent's ``gpus`` object, or None when there is none (an older agent)."""
    if not isinstance(doc, dict):
        return None
    gpus = []
    for g in doc.get("gpus") or ():
        if not isinstance(g, dict) or _int(g.get("index")) is None:
            continue
        procs = tuple(GpuProcess(int(p["pid"]), p.get("slot") if isinstance(p.get("slot"), str)
                                 else None, _int(p.get("used_bytes")))
                      for p in g.get("processes") or () if isinstance(p, dict)
                      and _int(p.get("pid")) is not None)
        gpus.append(Gpu(
            index=int(g["index"]), name=_str(g.get("name")), uuid=_str(g.get("uuid")),
            util_pct=_num(g.get("util_gpu_pct")), mem_used=_int(g.get("mem_used_bytes")),
            mem_total=_int(g.get("mem_total_bytes")), temp_c=_num(g.get("temp_c")),
            temp_slowdown_c=_num(g.get("temp_slowdown_c")), power_w=_num(g.get("power_w")),
            power_limit_w=_num(g.get("power_limit_w")),
            sm_clock_mhz=_int(g.get("sm_clock_mhz")),
            sm_clock_max_mhz=_int(g.get("sm_clock_max_mhz")),
            throttled=tuple(x for x in g.get("throttled") or () if isinstance(x, str)),
            ecc_sbe_volatile=_int(g.get("ecc_sbe_volatile")),
            ecc_dbe_volatile=_int(g.get("ecc_dbe_volatile")),
            remapped_uncorrectable=_int(g.get("remapped_uncorrectable")),
            remap_pending=_bool(g.get("remap_pending")),
            remap_failed=_bool(g.get("remap_failed")),
            retired_pending=_bool(g.get("retired_pending")),
            nvlink_up=_int(g.get("nvlink_up")), nvlink_links=_int(g.get("nvlink_links")),
            gpm_supported=_bool(g.get("gpm_supported")),
            sm_active_pct=_num(g.get("sm_active_pct")),
            sm_occupancy_pct=_num(g.get("sm_occupancy_pct")),
            tensor_active_pct=_num(g.get("tensor_active_pct")),
            dram_active_pct=_num(g.get("dram_active_pct")),
            processes=procs))
    xids = []
    for x in doc.get("xid_events") or ():
        if isinstance(x, dict) and _int(x.get("xid")) is not None and _num(x.get("t")):
            xids.append(XidRecord(float(x["t"]), _int(x.get("gpu")) or 0, int(x["xid"]),
                                  _str(x.get("severity")) or "warning",
                                  _str(x.get("meaning")), _str(x.get("advice"))))
    return GpuReport(tuple(sorted(gpus, key=lambda g: g.index)), _str(doc.get("source")) or None,
                     _str(doc.get("error")) or None, _num(doc.get("t")), tuple(xids),
                     parse_topology(doc.get("topology")), parse_probe(doc.get("p2p_probe")))


def conditions(report: GpuReport | None, slots: set[str], now: float, for_s: float,
               hold_s: float) -> list[Condition]:
    """The GPU alerts true now: heat, thermal throttling, ECC, row remapping, Xid, and
    GPU memory held by a program that is no slot of today's profile."""
    if report is None:
        return []
    out: list[Condition] = []
    sev: dict[str, Severity] = {"critical": "crit", "warning": "warn", "info": "info"}
    for x in report.xids:
        if now - x.t <= XID_RECENT_S:
            out.append(Condition(f"xid:{x.gpu}:{x.xid}:{x.t:.0f}", sev.get(x.severity, "warn"),
                                 f"GPU {x.gpu} Xid {x.xid}: {x.meaning}", x.advice,
                                 0.0, hold_s))
    # a process is "no slot's" only where the agent can match processes to slots at all
    # (inside some containers NVML reports PIDs of another namespace: nothing matches)
    matched = any(p.slot for g in report.gpus for p in g.processes)
    for g in report.gpus:
        if g.ecc_dbe_volatile:
            out.append(Condition(f"ecc:{g.index}", "crit",
                                 f"GPU {g.index} double-bit ECC errors: {g.ecc_dbe_volatile}",
                                 "take this GPU out of service: a fallback pod (f)", 0.0,
                                 hold_s))
        if g.remap_failed:
            out.append(Condition(f"remapfail:{g.index}", "crit",
                                 f"GPU {g.index} row remapping failed",
                                 "the GPU cannot hide its bad memory: a fallback pod (f)"))
        elif g.remap_pending or g.retired_pending:
            out.append(Condition(f"remap:{g.index}", "warn",
                                 f"GPU {g.index} memory repair pending a reset",
                                 "plan a pod restart (r after a stop)", 0.0, hold_s))
        if g.hot:
            out.append(Condition(f"throttle:{g.index}", "warn",
                                 f"GPU {g.index} throttled: {', '.join(g.throttled)}",
                                 _temp(g), for_s, hold_s))
        elif (g.temp_c is not None and g.temp_slowdown_c is not None
              and g.temp_c >= g.temp_slowdown_c - 5):
            out.append(Condition(f"heat:{g.index}", "warn",
                                 f"GPU {g.index} at {g.temp_c:.0f}°C (slowdown at "
                                 f"{g.temp_slowdown_c:.0f}°C)", "", for_s, hold_s))
        if slots and matched:
            stray = [p for p in g.processes if p.slot is None
                     and (p.used_bytes or 0) >= UNOWNED_MIN_BYTES]
            if stray:
                gib = sum(p.used_bytes or 0 for p in stray) / 2**30
                pids = ", ".join(str(p.pid) for p in stray[:4])
                out.append(Condition(f"stray:{g.index}", "warn",
                                     f"GPU {g.index}: {gib:.1f} GiB held by no slot",
                                     f"pid {pids}: a leftover engine? it shrinks the slots' "
                                     "KV cache", for_s, hold_s))
    return out


def _temp(g: Gpu) -> str:
    if g.temp_c is None:
        return ""
    clock = (f", SM {g.sm_clock_mhz}/{g.sm_clock_max_mhz} MHz"
             if g.sm_clock_mhz and g.sm_clock_max_mhz else "")
    why = f" ({g.clock_reason})" if clock and g.clock_reason else ""
    return f"{g.temp_c:.0f}°C{clock}{why}"
