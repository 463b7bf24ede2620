"""The supervisor's watch over its GPUs: a sample every few seconds (in a thread: the
nvidia-smi fallback is a subprocess), Xid events as NVML reports them — each written to
the agent's audit log the moment it arrives — and which slot owns each GPU process.

``status()`` is what the agent's ``status`` answer carries under ``gpus``: the console's
header, GPU screen and alerts read it from there, over the SSH session it already has."""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
from typing import Any, Callable, Deque, Dict, List

from . import p2p, paths
from .gpus import KmsgXids, Sampler, Telemetry, XidEvent, XidWatcher, pci_key, xid_meaning

SAMPLE_EVERY_S = 5.0
KEEP_XIDS = 50
SAME_XID_S = 5.0
"""An Xid seen by NVML and in the kernel log within this is one event."""


class GpuMonitor:
    def __init__(self, audit: Callable[[Dict[str, Any]], None],
                 sample_every_s: float = SAMPLE_EVERY_S, nvml: Any = None,
                 kmsg_path: str = "/dev/kmsg") -> None:
        self.audit = audit
        self.telemetry = Telemetry(nvml)
        self.sampler = Sampler(self.telemetry, sample_every_s)
        self.events: Deque[Dict[str, Any]] = collections.deque(maxlen=KEEP_XIDS)
        self.xids: XidWatcher | None = None
        src = self.telemetry.source
        if src is not None:
            self.xids = XidWatcher(src.nvml, [s["uuid"] for s in src.static],
                                   on_event=lambda ev: self._xid(ev, "nvml"))
        self.kmsg = KmsgXids(self._kmsg_xid, kmsg_path)
        self._lock = threading.Lock()

    def _kmsg_xid(self, pci: str, code: int) -> None:
        """An Xid line of the kernel log, mapped to its GPU by PCI bus id."""
        for r in self.sampler.latest().readings:
            if pci_key(r.pci_bus_id) == pci:
                self._xid(XidEvent(time.time(), r.index, r.uuid, code), "kernel log")
                return
        self._xid(XidEvent(time.time(), -1, "", code), "kernel log")

    def _xid(self, ev: XidEvent, source: str) -> None:
        with self._lock:  # two threads report; the same Xid from both is one event
            for old in reversed(self.events):
                if (old["gpu"], old["xid"]) == (ev.gpu, ev.xid) and \
                        abs(old["t"] - ev.t) <= SAME_XID_S:
                    return
            severity, meaning, advice = xid_meaning(ev.xid)
            rec = {"t": round(ev.t, 3), "gpu": ev.gpu, "uuid": ev.uuid, "xid": ev.xid,
                   "severity": severity, "meaning": meaning, "advice": advice,
                   "source": source}
            self.events.append(rec)
        # a full disk must not stop the watch; the event is still in status
        with contextlib.suppress(OSError):
            self.audit({"op": "xid", **rec})

    def start(self) -> None:
        self.sampler.start()
        if self.xids is not None:
            self.xids.start()
        self.kmsg.start()

    def stop(self) -> None:
        self.sampler.stop()
        if self.xids is not None:
            self.xids.stop()
        self.kmsg.stop()

    def status(self, slot_pgids: Dict[str, int]) -> Dict[str, Any]:
        tel = self.sampler.latest()
        doc = tel.to_json()
        owner = {pgid: slot for slot, pgid in slot_pgids.items()}
        for g in doc["gpus"]:
            for p in g["processes"]:
                pgid = _pgid(p["pid"])
                p["slot"] = owner.get(pgid) if pgid is not None else None
        doc["xid_events"] = list(self.events)
        doc["xid_error"] = self.xids.error if self.xids is not None else (
            self.telemetry.nvml_error and "no Xid events without NVML")
        doc["kmsg_error"] = self.kmsg.status_error
        doc["kmsg_skipped"] = {"count": self.kmsg.skipped, "last": self.kmsg.last_skipped}
        # the last P2P probe (check-host), beside the topology that explains it
        doc["p2p_probe"] = p2p.load_result(os.path.join(paths.home(), p2p.RESULT_FILE))
        return doc


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:  # gone, or in another PID namespace (a container's view)
        return None


def slot_pgids(pids: Dict[str, int | None]) -> Dict[str, int]:
    """Slot → its process group (each slot starts a session of its own)."""
    return {slot: pid for slot, pid in pids.items() if pid}


__all__: List[str] = ["GpuMonitor", "slot_pgids"]
