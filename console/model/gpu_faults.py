"""GPU hardware faults and how long they last (issue 30, findings 4 and 5).

An Xid 79 (the GPU fell off the bus), a double-bit ECC error or a failed row remap is a
fact about one GPU of one pod. It does not end because the numbers stop coming (the pod
stopped, the agent went quiet): nothing was repaired. It ends only when

* the hardware that had it is seen healthy: the GPU is reported again with no
  double-bit errors (ECC), with its remapping not failed (remap), or by a later run of
  the pod (an Xid: only a reset brings a GPU back on the bus); or
* its pod is gone: terminated, or no longer the console's pod (a fallback moved it to a
  new one). Then it "ended with pod X", which is not "cleared".

A fault is keyed by the pod and the GPU, so the old pod's faults never land on a new
pod's GPU of the same index. :class:`FaultBook` is owned by the session and updated
with every pod reading; the alert rules read its faults (``alerts.evaluate``), and the
screens mark the GPUs and slots they are on (:func:`gpu_marks`).
"""

from __future__ import annotations

from msgspec import Struct, field
from msgspec.structs import replace

from console.model.conditions import Condition
from console.model.gpu_state import GpuReport

HARDWARE = ("xid:", "ecc:", "remapfail:")
"""Condition keys (``gpu_state.conditions``) of hardware faults (an Xid only when
critical: a warning Xid, an application's MMU fault, stays the event it is)."""


def is_hardware(c: Condition) -> bool:
    """Whether a GPU condition is a hardware fault, kept here until it ends."""
    if c.key.startswith("xid:"):
        return c.severity == "crit"
    return c.key.startswith(HARDWARE)
GONE = ("TERMINATED",)
"""Provider statuses of a pod that is gone (its faults end with it)."""


class Fault(Struct, frozen=True):
    pod_id: str | None
    gpu: int
    key: str
    """The condition's own key (``xid:0:79:<t>``, ``ecc:1``, ``remapfail:0``)."""
    condition: Condition
    since: float
    """When this console first saw it (our clock)."""
    last_seen: float

    @property
    def kind(self) -> str:
        return self.key.split(":", 1)[0]

    @property
    def alert_key(self) -> str:
        """Its alert's key: the pod is part of it (a new pod's fault is a new alert)."""
        return f"{self.key}@{self.pod_id or '-'}"

    @property
    def mark(self) -> str:
        """What its GPU's row and slots say: ``XID 79``, ``ECC``, ``REMAP``."""
        if self.kind == "xid":
            return f"XID {self.key.split(':')[2]}"
        return "ECC" if self.kind == "ecc" else "REMAP"


def _gpu_of(key: str) -> int | None:
    try:
        return int(key.split(":")[1])
    except (IndexError, ValueError):
        return None


class FaultBook(Struct):
    """The hardware faults seen, per (pod, GPU), until they end (module docstring)."""

    faults: dict[tuple[str | None, str], Fault] = field(default_factory=dict)

    def observe(self, pod_id: str | None, status: str | None, started_at: float | None,
                report: GpuReport | None, now_conditions: list[Condition], now: float
                ) -> dict[str, str]:
        """One pod reading: new faults kept, ended ones dropped. Returns the alert keys
        of those that ended because their pod is gone → "ended with pod X"."""
        ended: dict[str, str] = {}
        for k, f in list(self.faults.items()):
            if f.pod_id != pod_id or status in GONE:
                ended[f.alert_key] = f"ended with pod {f.pod_id or '?'}"
                del self.faults[k]
        for c in now_conditions:
            if not is_hardware(c) or (gpu := _gpu_of(c.key)) is None:
                continue
            old = self.faults.get((pod_id, c.key))
            self.faults[(pod_id, c.key)] = (
                Fault(pod_id, gpu, c.key, c, now, now) if old is None
                else replace(old, condition=c, last_seen=now))
        if report is None or status != "RUNNING":
            return ended  # no readings: no verdict on the hardware
        seen = {c.key for c in now_conditions}
        gpus = {g.index: g for g in report.gpus}
        for k, f in list(self.faults.items()):
            g = gpus.get(f.gpu)
            if f.pod_id != pod_id or f.key in seen or g is None:
                continue
            healthy = (
                (f.kind == "ecc" and g.ecc_dbe_volatile == 0)
                or (f.kind == "remapfail" and g.remap_failed is False)
                # only a reset brings a GPU back on the bus: a later run of the pod
                or (f.kind == "xid" and started_at is not None and started_at > f.since))
            if healthy:
                del self.faults[k]
        return ended

    def end_run(self, pod_id: str | None, began: float, why: str) -> dict[str, str]:
        """A new run of the pod began at ``began`` (a resume: the machine, maybe its
        GPUs, are new; issue 42): the faults seen before end with the run that had them
        (alert key → ``why``). A fault the new run has is seen again, as its own."""
        ended: dict[str, str] = {}
        for k, f in list(self.faults.items()):
            if f.pod_id == pod_id and f.last_seen < began:
                ended[f.alert_key] = why
                del self.faults[k]
        return ended

    def conditions(self, pod_id: str | None) -> list[Condition]:
        """The alerts of the faults of this pod, whether or not its GPUs report now."""
        return [replace(f.condition, key=f.alert_key) for f in self.faults.values()
                if f.pod_id == pod_id]

    def of(self, pod_id: str | None) -> list[Fault]:
        return [f for f in self.faults.values() if f.pod_id == pod_id]


def gpu_marks(faults: list[Fault], report: GpuReport | None) -> dict[int, str]:
    """GPU index → what its row says is wrong (``XID 79``, ``ECC``, ``REMAP``, ``HOT``);
    a GPU with nothing wrong is not in it. A hardware fault outranks heat."""
    out: dict[int, str] = {}
    for g in report.gpus if report is not None else ():
        if g.hot:
            out[g.index] = "HOT"
    order = {"xid": 0, "ecc": 1, "remapfail": 2}
    for f in sorted(faults, key=lambda f: (order.get(f.kind, 9), f.since), reverse=True):
        out[f.gpu] = f.mark  # the most serious last: it stays
    return out
