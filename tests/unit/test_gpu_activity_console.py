"""The console's side of GPM and the topology: what the agent serves (the NVML stand-in
replaying the H200 captures) parsed into the GPU model, the exporter's DCGM_FI_PROF_*
ratios read back as the agent's percent, and the P2P story the GPU screen tells."""

from __future__ import annotations

import json

import pytest

from console.model.gpu_state import Gpu, parse
from console.model.gpu_topology import GpuTopology, P2pProbe, p2p_story, parse_topology
from console.sources.collect.exposition import parse as parse_exposition
from console.sources.collect.gpu_metrics import report
from pod_agent.exporter import Exporter
from pod_agent.gpu_monitor import GpuMonitor
from tests.unit.test_gpm import CAPTURE, captured
from tests.unit.test_gpm import fake as fake

FIGURES = ("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct")


def _status(fake, tmp_path) -> dict:
    mon = GpuMonitor(lambda rec: None, nvml=fake, kmsg_path=str(tmp_path / "no-kmsg"))
    mon.sampler._latest = mon.telemetry.sample()  # the second sample: an interval
    return json.loads(json.dumps(mon.status({})))  # as it crosses the socket


def test_the_agents_gpm_figures_reach_the_model(fake, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("POD_AGENT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FAKE_NVML_GPM_PHASE", "memory")
    rep = parse(_status(fake, tmp_path))
    assert rep is not None
    (g,) = rep.gpus
    assert g.gpm_supported is True
    assert {f: getattr(g, f) for f in FIGURES} == captured("memory")[0]
    assert g.activity == "memory-bound"
    assert rep.topology is not None and rep.topology.matrix == (("X",),)
    assert rep.p2p_probe is None


def test_without_gpm_the_model_says_so(fake, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("POD_AGENT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FAKE_NVML_GPM", "none")
    rep = parse(_status(fake, tmp_path))
    assert rep is not None
    (g,) = rep.gpus
    assert g.gpm_supported is False and g.activity == ""
    assert [getattr(g, f) for f in FIGURES] == [None] * 4


@pytest.mark.parametrize("gpm", [str(CAPTURE), "none"])
def test_the_exporters_ratios_read_back_as_the_agents_percent(fake, monkeypatch,
                                                              gpm) -> None:
    monkeypatch.setenv("FAKE_NVML_GPM", gpm)
    monkeypatch.setenv("FAKE_NVML_GPM_PHASE", "tensor")
    ex = Exporter("127.0.0.1", 0, 60, None, nvml=fake)
    try:
        assert ex.sampler is not None and ex.telemetry is not None
        ex.sampler._latest = ex.telemetry.sample()
        agent = ex.sampler._latest.readings[0]
        exp = parse_exposition(ex.render().decode())
    finally:
        ex.close()
    samples = [(n, dict(lbl), v) for n in exp.samples for lbl, v in exp.samples[n].items()]
    (g,) = report(samples, "exporter", 0.0).gpus
    assert g.gpm_supported is agent.gpm_supported is (gpm != "none")
    for f in FIGURES:
        want = getattr(agent, f)
        assert getattr(g, f) == (None if want is None else pytest.approx(want, abs=1e-3))


def test_activity_words() -> None:
    def word(sm: float, tensor: float, dram: float) -> str:
        return Gpu(0, sm_active_pct=sm, tensor_active_pct=tensor, dram_active_pct=dram,
                   gpm_supported=True).activity

    t, m = captured("tensor")[0], captured("memory")[0]
    assert word(t["sm_active_pct"], t["tensor_active_pct"], t["dram_active_pct"]) \
        == "tensor-bound"
    assert word(m["sm_active_pct"], m["tensor_active_pct"], m["dram_active_pct"]) \
        == "memory-bound"
    assert word(0.0, 0.0, 0.0) == "idle"
    assert word(90, 60, 70) == "mixed"
    assert Gpu(0, gpm_supported=False).activity == ""


NV18 = GpuTopology(("GPU0", "GPU1"), (("X", "NV18"), ("NV18", "X")), ((18, 18), (18, 18)))


def test_the_p2p_story_says_the_verdict_nccls_transport_and_why() -> None:
    ok = P2pProbe("ok", transports=("P2P/CUMEM",))
    assert p2p_story(NV18, ok, False) == (("ok", "P2P probe: ok · NCCL chose P2P/CUMEM"),)
    # hung although the wiring and NVML allow P2P: the reason is elsewhere, said so
    hung = P2pProbe("hung", fallback_transports=("SHM/direct/direct",))
    lines = [s for _, s in p2p_story(NV18, hung, True)]
    assert lines[0] == "P2P probe: hung · without P2P: SHM/direct/direct"
    assert "NCCL_P2P_DISABLE=1" in lines[1]
    assert "the wiring allows P2P" in lines[2]
    # across the CPUs, with NVML refusing P2P read/write: that is the reason
    sys_top = parse_topology({"gpus": ["GPU0", "GPU1"], "matrix": [["X", "SYS"],
                                                                   ["SYS", "X"]],
                              "nvlinks": [{"up": None, "links": None}] * 2,
                              "p2p": {"0-1": {"read": "chipset not supported",
                                              "write": "chipset not supported",
                                              "nvlink": "not supported", "pci": "ok"}}})
    lines = [s for _, s in p2p_story(sys_top, hung, True)]
    assert "NVML GPU0↔GPU1: read, write chipset not supported" in lines
    assert not any("nvlink" in s for s in lines)  # no NVLink there: not expected
    assert any(s.startswith("SYS:") for s in lines)
    # a link down on an NVLink pair is said
    down = GpuTopology(NV18.gpus, NV18.matrix, ((18, 18), (11, 18)))
    assert ("warn", "GPU1 NVLink: 11 of 18 links up") in p2p_story(down, ok, False)
    assert p2p_story(None, None, None) == (
        ("info", "no P2P probe on record (pod-agent check-host runs it)"),)


def test_a_hostile_topology_is_data() -> None:
    top = parse_topology({"gpus": ["GPU0\x1b[2J"], "matrix": [["X", "NV18\x07", 5]],
                          "p2p": {"0-1": {"read": "bad\x1b]0;t\x07"}}})
    assert top is not None
    assert top.matrix == (("X", "?", "?"),) and top.gpus == ("GPU0[2J",)
    assert all(c.isprintable() for _, _, st in top.p2p for c in st)
    assert parse_topology({"matrix": "nope"}) is None and parse_topology(None) is None
