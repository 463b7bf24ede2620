"""The pod agent's own readings on a real H200 (``tests/fixtures/gpm-h200/agent-check``,
written by ``tools/gpm_agent_check.sh``): ``pod-agent gpus --json`` idle, under a bf16
matmul loop and under a device-to-device copy loop, beside ``nvidia-smi dmon``'s GPM
columns; the exporter's ``DCGM_FI_PROF_*`` during the matmul; and the agent's topology
beside ``nvidia-smi topo -m`` on the same host (issue 49's "Done when": tensor activity
above the copy loop's, DRAM the reverse; the matrix equals nvidia-smi's)."""

from __future__ import annotations

import json
from statistics import mean

from console.model.gpu_state import parse
from console.sources.collect.exposition import parse as parse_exposition
from pod_agent import topology
from tests.conftest import FIXTURES

CHECK = FIXTURES / "gpm-h200" / "agent-check"
FIGURES = ("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct")
DMON = ("smutil", "smocc", "mmaact", "dram")
"""``nvidia-smi dmon --gpm-metrics 2,3,5,10``'s columns for the same four figures."""


def _readings() -> dict[str, list[dict[str, float]]]:
    """Phase → the console's reading of each ``gpus --json`` the agent answered."""
    out: dict[str, list[dict[str, float]]] = {}
    for line in (CHECK / "agent.jsonl").read_text().splitlines():
        doc = json.loads(line)
        report = parse(doc)
        assert report is not None and len(report.gpus) == 1
        g = report.gpus[0]
        assert g.gpm_supported and g.name == "NVIDIA H200"
        out.setdefault(doc["phase"], []).append({f: getattr(g, f) for f in FIGURES})
    return out


def _dmon() -> dict[str, dict[str, float]]:
    """Phase → dmon's mean of each GPM column over the rows that have it."""
    out: dict[str, dict[str, float]] = {}
    phase, header = "", []
    for line in (CHECK / "dmon.txt").read_text().splitlines():
        if line.startswith("== "):
            phase = line[3:].strip()
        elif line.startswith("# gpu"):
            header = line[1:].split()
        elif line.strip() and not line.startswith("#"):
            row = dict(zip(header, line.split(), strict=True))
            for col in DMON:
                if row[col] != "-":
                    out.setdefault(phase, {}).setdefault(col, []).append(float(row[col]))
    return {p: {c: mean(v) for c, v in cols.items()} for p, cols in out.items()}


def test_a_tensor_loop_reads_tensor_bound_and_a_copy_loop_memory_bound() -> None:
    r = _readings()
    assert set(r) == {"idle", "tensor", "memory"}
    assert all(v == 0.0 for row in r["idle"] for v in row.values()), r["idle"]
    # every tensor-loop reading above every copy-loop reading, and the reverse for DRAM
    assert min(x["tensor_active_pct"] for x in r["tensor"]) > 80 > \
        max(x["tensor_active_pct"] for x in r["memory"])
    assert min(x["dram_active_pct"] for x in r["memory"]) > 80 > \
        max(x["dram_active_pct"] for x in r["tensor"])


def test_the_agents_figures_are_what_nvidia_smi_dmon_said() -> None:
    r, dmon = _readings(), _dmon()
    for phase in ("tensor", "memory"):
        for figure, col in zip(FIGURES, DMON, strict=True):
            agent = mean(x[figure] for x in r[phase])
            # dmon prints whole percents over its own one-second windows
            assert abs(agent - dmon[phase][col]) <= 2.0, (phase, figure, agent, dmon[phase])


def test_the_exporter_served_dcgm_exporters_ratios_under_the_matmul() -> None:
    fams = parse_exposition((CHECK / "exporter-tensor.prom").read_text())
    value = {name: next(iter(fams.samples[name].values()))
             for name in ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY",
                          "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE")}
    assert 0.85 < value["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"] <= 1.0  # a ratio, not a percent
    assert 0.85 < value["DCGM_FI_PROF_SM_ACTIVE"] <= 1.0
    assert value["DCGM_FI_PROF_DRAM_ACTIVE"] < 0.3


def test_the_agents_topology_is_nvidia_smis_on_that_host() -> None:
    smi = (CHECK / "nvidia-smi-topo-m.txt").read_text()
    for line in (CHECK / "agent.jsonl").read_text().splitlines():
        top = json.loads(line)["topology"]
        assert (tuple(top["gpus"]), tuple(map(tuple, top["matrix"]))) == \
            topology.parse_smi(smi) == (("GPU0",), (("X",),))
