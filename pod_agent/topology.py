"""How the pod's GPUs are connected, read through NVML's topology calls: the matrix
``nvidia-smi topo -m`` prints (``NV#`` for a bonded set of NVLinks, else the PCIe path:
``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``), each GPU's NVLinks and NVML's own P2P
answer per pair — the reason behind a P2P verdict (``pod_agent.p2p``).

NVML answers the PCIe relation of two GPUs (``nvmlDeviceGetTopologyCommonAncestor``)
even when NVLink joins them; nvidia-smi shows NVLink first, and so does this: links up
from one GPU to the other count directly, links up to an NVSwitch count for every pair
of GPUs that both reach the switches (an HGX board: every pair ``NV18`` on H200).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Tuple

LEVELS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
"""nvmlGpuTopologyLevel_t → nvidia-smi's words. INTERNAL (0: two GPUs of one board)
has no word of its own in nvidia-smi's legend; it is at most one bridge, as PIX."""

P2P_CAPS = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3, "pci": 4}
"""nvmlGpuP2PCapsIndex_t by value: nvidia-ml-py's NVML_P2P_CAPS_INDEX_READ is a tuple
(a trailing comma in the binding), so its constants are not used."""

P2P_STATUS = {0: "ok", 1: "chipset not supported", 2: "GPU not supported",
              3: "IOH topology not supported", 4: "disabled by regkey", 5: "not supported",
              6: "unknown"}
"""nvmlGpuP2PStatus_t, as nvml.h names them."""

NVLINK_SWITCH = 2
"""NVML_NVLINK_DEVICE_TYPE_SWITCH: the far end of the link is an NVSwitch."""


@dataclass(frozen=True)
class Topology:
    gpus: Tuple[str, ...] = ()
    """``GPU0`` … in index order."""
    matrix: Tuple[Tuple[str, ...], ...] = ()
    """``matrix[i][j]``: ``X`` on the diagonal, ``NV18``, ``PIX`` … ``SYS``, or ``?``
    where NVML did not say."""
    nvlinks: Tuple[Tuple[int | None, int | None], ...] = ()
    """Per GPU: (links up, links) — None where the GPU has no NVLink."""
    p2p: Dict[str, Dict[str, str]] = field(default_factory=dict)
    """``"0-1"`` → capability (read, write, nvlink, atomics, pci) → NVML's status word."""
    error: str | None = None

    def to_json(self) -> Dict[str, Any]:
        return {"gpus": list(self.gpus), "matrix": [list(r) for r in self.matrix],
                "nvlinks": [{"up": u, "links": n} for u, n in self.nvlinks],
                "p2p": self.p2p, "error": self.error}

    def render(self) -> str:
        """The GPU part of ``nvidia-smi topo -m``: the same tabs and cells."""
        return render(self.gpus, self.matrix)


def render(gpus: Tuple[str, ...] | List[str], matrix: Any) -> str:
    lines = ["\t" + "\t".join(gpus)]
    for name, row in zip(gpus, matrix, strict=False):
        lines.append(name + "\t" + "\t".join(" X " if c == "X" else c for c in row))
    return "\n".join(lines)


def read(nvml: Any, handles: List[Any], bus_ids: List[str],
         nvlink_links: List[int | None]) -> Topology:
    """The topology of ``handles`` (index order); ``bus_ids`` and ``nvlink_links`` as the
    agent's static readings have them. Every failure of one call leaves its cell ``?``;
    nothing here raises."""
    n = nvml

    def call(fn_name: str, *args: Any) -> Any:
        fn: Callable[..., Any] | None = getattr(n, fn_name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except n.NVMLError:
            return None

    count = len(handles)
    key = [_bus(b) for b in bus_ids]
    direct = [[0] * count for _ in range(count)]
    to_switch = [0] * count
    nvlinks: List[Tuple[int | None, int | None]] = []
    for i, h in enumerate(handles):
        links = nvlink_links[i] or 0
        up = 0
        for link in range(links):
            if call("nvmlDeviceGetNvLinkState", h, link) != 1:
                continue
            up += 1
            kind = call("nvmlDeviceGetNvLinkRemoteDeviceType", h, link)
            pci = call("nvmlDeviceGetNvLinkRemotePciInfo", h, link)
            far = _bus(getattr(pci, "busId", "") if pci is not None else "")
            if kind != NVLINK_SWITCH and far in key and key.index(far) != i:
                direct[i][key.index(far)] += 1
            elif kind == NVLINK_SWITCH or far:  # an NVSwitch (or a far end no GPU here)
                to_switch[i] += 1
        nvlinks.append((up, links) if links else (None, None))
    matrix: List[Tuple[str, ...]] = []
    p2p: Dict[str, Dict[str, str]] = {}
    for i, a in enumerate(handles):
        row = []
        for j, b in enumerate(handles):
            if i == j:
                row.append("X")
                continue
            nv = direct[i][j] + (min(to_switch[i], to_switch[j])
                                 if to_switch[i] and to_switch[j] else 0)
            if nv:
                row.append(f"NV{nv}")
            else:
                level = call("nvmlDeviceGetTopologyCommonAncestor", a, b)
                row.append(LEVELS.get(level, "?") if isinstance(level, int) else "?")
            if i < j:
                caps = {}
                for name, idx in P2P_CAPS.items():
                    st = call("nvmlDeviceGetP2PStatus", a, b, idx)
                    caps[name] = P2P_STATUS.get(st, "unknown") if isinstance(st, int) \
                        else "unknown"
                p2p[f"{i}-{j}"] = caps
        matrix.append(tuple(row))
    return Topology(tuple(f"GPU{i}" for i in range(count)), tuple(matrix), tuple(nvlinks),
                    p2p)


def _bus(bus_id: Any) -> str:
    """``00000000:19:00.0`` and ``0000:19:00.0`` alike: the bus, device and function."""
    text = bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id or "")
    parts = text.lower().split(":")
    return ":".join(parts[-2:]) if len(parts) >= 2 else ""


def parse_smi(text: str) -> Tuple[Tuple[str, ...], Tuple[Tuple[str, ...], ...]]:
    """The GPU names and GPU-to-GPU cells of ``nvidia-smi topo -m`` (colour codes
    removed; CPU and NUMA affinity columns left out)."""
    import re

    clean = re.sub(r"\x1b\[[0-9;]*m", "", text)
    lines = [ln for ln in clean.splitlines() if ln.strip()]
    head = lines[0].split("\t")
    gpus = tuple(h for h in head if re.fullmatch(r"GPU\d+", h.strip()))
    rows = []
    for ln in lines[1:]:
        cells = ln.split("\t")
        if cells[0] in gpus:
            rows.append(tuple(c.strip() for c in cells[1:1 + len(gpus)]))
    return gpus, tuple(rows)
