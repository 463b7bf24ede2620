"""How the pod's GPUs connect (the agent's NVML reading, ``pod_agent/topology.py``) and
the last P2P probe's evidence (``pod-agent check-host``): parsed defensively, immutable,
and told together, so a P2P verdict comes with its reason — NVLink or the PCIe path
between the GPUs, NVML's own P2P answer, and the transport NCCL chose."""

from __future__ import annotations

import re
from typing import Any

from msgspec import Struct

CELL = re.compile(r"X|NV\d{1,3}|PIX|PXB|PHB|NODE|SYS|\?")
"""The cells a matrix may hold; anything else from the pod reads ``?``."""


class GpuTopology(Struct, frozen=True):
    gpus: tuple[str, ...] = ()
    matrix: tuple[tuple[str, ...], ...] = ()
    nvlinks: tuple[tuple[int | None, int | None], ...] = ()
    """Per GPU: (links up, links); None where the GPU has no NVLink."""
    p2p: tuple[tuple[str, str, str], ...] = ()
    """(pair ``0-1``, capability, NVML's status word) where NVML did not say ok."""

    def cell(self, i: int, j: int) -> str:
        return self.matrix[i][j] if i < len(self.matrix) and j < len(self.matrix[i]) \
            else "?"


class P2pProbe(Struct, frozen=True):
    verdict: str
    detail: str = ""
    transports: tuple[str, ...] = ()
    fallback_transports: tuple[str, ...] = ()
    t: float | None = None


def _str(v: Any, limit: int = 200) -> str:
    # text from the pod is data: control characters go at the boundary
    return "".join(c for c in v if c.isprintable())[:limit] if isinstance(v, str) else ""


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def parse_topology(doc: Any) -> GpuTopology | None:
    if not isinstance(doc, dict) or not isinstance(doc.get("matrix"), list):
        return None
    gpus = tuple(_str(g, 8) for g in doc.get("gpus") or () if isinstance(g, str))
    matrix = tuple(tuple(c if isinstance(c, str) and CELL.fullmatch(c) else "?"
                         for c in row) for row in doc["matrix"] if isinstance(row, list))
    links = tuple((_int(x.get("up")), _int(x.get("links"))) for x in doc.get("nvlinks") or ()
                  if isinstance(x, dict))
    p2p: list[tuple[str, str, str]] = []
    raw = doc.get("p2p")
    for pair, caps in (raw.items() if isinstance(raw, dict) else ()):
        if isinstance(caps, dict):
            p2p.extend((_str(pair, 8), _str(cap, 12), _str(st, 40))
                       for cap, st in caps.items() if st != "ok")
    return GpuTopology(gpus, matrix, links, tuple(sorted(p2p)))


def parse_probe(doc: Any) -> P2pProbe | None:
    if not isinstance(doc, dict) or not isinstance(doc.get("verdict"), str):
        return None
    fb = doc.get("fallback") if isinstance(doc.get("fallback"), dict) else {}
    t = doc.get("t")
    return P2pProbe(_str(doc["verdict"], 12), _str(doc.get("detail"), 300),
                    tuple(_str(x, 40) for x in doc.get("transports") or ()
                          if isinstance(x, str)),
                    tuple(_str(x, 40) for x in (fb or {}).get("transports") or ()
                          if isinstance(x, str)),
                    float(t) if isinstance(t, int | float) and not isinstance(t, bool)
                    else None)


def p2p_story(top: GpuTopology | None, probe: P2pProbe | None,
              p2p_disabled: bool | None) -> tuple[tuple[str, str], ...]:
    """(severity ``ok``/``warn``/``info``, sentence) lines: the probe's verdict with the
    transport NCCL chose, the pod's P2P setting, and why — from the topology and NVML's
    P2P answers."""
    out: list[tuple[str, str]] = []
    if probe is None:
        out.append(("info", "no P2P probe on record (pod-agent check-host runs it)"))
    else:
        said = f"P2P probe: {probe.verdict}"
        if probe.transports:
            said += f" · NCCL chose {', '.join(probe.transports)}"
        if probe.fallback_transports:
            said += f" · without P2P: {', '.join(probe.fallback_transports)}"
        out.append(("ok" if probe.verdict == "ok" else "warn", said))
    if p2p_disabled:
        out.append(("warn", "NCCL_P2P_DISABLE=1 in the pod's .env: slots run without P2P"))
    if top is not None:
        out.extend(_why(top, probe))
    return tuple(out)


def _why(top: GpuTopology, probe: P2pProbe | None) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for i, (up, links) in enumerate(top.nvlinks):
        if links and up is not None and up < links:
            out.append(("warn", f"GPU{i} NVLink: {up} of {links} links up"))
    by_pair: dict[str, dict[str, list[str]]] = {}
    for pair, cap, status in top.p2p:
        a, _, b = pair.partition("-")
        nv = top.cell(int(a), int(b)).startswith("NV") if a.isdigit() and b.isdigit() \
            else False
        if cap == "nvlink" and not nv:
            continue  # no NVLink between them: NVLink P2P is not expected
        by_pair.setdefault(f"GPU{a}↔GPU{b}", {}).setdefault(status, []).append(cap)
    for pair, statuses in by_pair.items():
        out.append(("warn", f"NVML {pair}: " + "; ".join(
            f"{', '.join(caps)} {status}" for status, caps in statuses.items())))
    cells = sorted({top.cell(i, j) for i in range(len(top.matrix))
                    for j in range(len(top.matrix)) if i != j} - {"?"})
    broke = probe is not None and probe.verdict in ("hung", "broken")
    if broke and cells and all(c.startswith("NV") for c in cells) and not by_pair:
        out.append(("warn", "the wiring allows P2P (NVLink, NVML says ok): look at the "
                            "driver, IOMMU/ACS or the container"))
    elif "SYS" in cells:
        out.append(("warn" if broke else "info",
                    "SYS: across the CPUs' interconnect, where P2P is often unsupported"))
    return out
