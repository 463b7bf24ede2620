"""The topology behind P2P: the agent's NVML reading of how its GPUs connect, against
``nvidia-smi topo -m`` as printed on the captured hosts — the one-GPU H200 of
``tests/fixtures/gpm-h200`` (its NVML topology answers recorded by
``tools/gpm_capture.py``) and the two-H200 NVLink host of ``tests/fixtures/nccl-h200x2``
(NV18), through the NVML stand-in built from their captures."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from pod_agent import gpus, topology
from pod_agent.gpu_monitor import GpuMonitor
from tests.conftest import FIXTURES, REPO

FAKE_DIR = REPO / "console" / "demo" / "fakenvml"
NVML = FIXTURES / "nvml-h200x2" / "nvml-load.json"
GPM = FIXTURES / "gpm-h200" / "gpm.json"


def _fake(monkeypatch, capture: Path, faults: Path | None = None) -> Any:
    monkeypatch.setenv("FAKE_NVML_CAPTURE", str(capture))
    monkeypatch.setenv("FAKE_NVML_STEADY", "1")
    monkeypatch.delenv("FAKE_NVIDIA_SMI_GPUS", raising=False)
    if faults is not None:
        monkeypatch.setenv("FAKE_NVML_FAULTS", str(faults))
    else:
        monkeypatch.delenv("FAKE_NVML_FAULTS", raising=False)
    spec = importlib.util.spec_from_file_location("fake_pynvml_topo", FAKE_DIR / "pynvml.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.nvmlInit()
    return mod


def one_gpu_capture(tmp_path: Path) -> Path:
    """An NVML capture of the one-H200 host: its device answers (the H200's, from the
    two-H200 capture's GPU 0) with the topology it answered itself (gpm.json): no pairs,
    NvLink state Not Supported."""
    doc = json.loads(GPM.read_text())["topology"]
    calls = {k: v for k, v in json.loads(NVML.read_text()).items()
             if "(h1" not in k and not k.startswith("nvmlDeviceGetNvLinkState(")}
    calls["nvmlDeviceGetCount()"] = {"ok": 1}
    for gpu in doc["nvlink"]:
        for link, ans in gpu["nvlink_state"].items():
            calls[f"nvmlDeviceGetNvLinkState(h{gpu['gpu']},{link})"] = (
                {"error": ans["code"], "text": ans["text"]} if isinstance(ans, dict)
                else {"ok": ans})
    for pair in doc["pairs"]:  # none on this host; kept so a richer capture is read too
        a, b = pair["gpu"], pair["peer"]
        calls[f"nvmlDeviceGetTopologyCommonAncestor(h{a},h{b})"] = {"ok":
                                                                   pair["common_ancestor"]}
    path = tmp_path / "nvml-one-h200.json"
    path.write_text(json.dumps(calls))
    return path


def gpu_lines(smi: str, n: int) -> list[str]:
    """nvidia-smi's lines cut to its GPU columns (the CPU/NUMA affinity ones dropped)."""
    lines = [ln for ln in re.sub(r"\x1b\[[0-9;]*m", "", smi).splitlines() if ln.strip()]
    return ["\t".join(ln.split("\t")[:1 + n]) for ln in lines[:1 + n]]


def test_the_one_gpu_hosts_matrix_is_nvidia_smis(monkeypatch, tmp_path) -> None:
    fake = _fake(monkeypatch, one_gpu_capture(tmp_path))
    top = gpus.NvmlSource(fake).topology()
    smi = (FIXTURES / "gpm-h200" / "nvidia-smi-topo-m.txt").read_text()
    assert json.loads(GPM.read_text())["topology"]["nvidia_smi_topo_m"] == smi
    assert (top.gpus, top.matrix) == topology.parse_smi(smi) == (("GPU0",), (("X",),))
    assert top.render().splitlines() == gpu_lines(smi, 1)
    assert top.nvlinks == ((None, None),) and top.p2p == {}  # no NVLink, no pair


def test_two_h200s_over_nvlink_render_as_nvidia_smi(monkeypatch) -> None:
    fake = _fake(monkeypatch, NVML)
    top = gpus.NvmlSource(fake).topology()
    smi = (FIXTURES / "nccl-h200x2" / "nvidia-smi-topo-m.txt").read_text()
    assert (top.gpus, top.matrix) == topology.parse_smi(smi)
    assert top.matrix == (("X", "NV18"), ("NV18", "X"))
    assert top.render().splitlines() == gpu_lines(smi, 2)
    assert top.nvlinks == ((18, 18), (18, 18))
    assert top.p2p["0-1"]["nvlink"] == "ok" and top.p2p["0-1"]["read"] == "ok"


def test_links_down_show_the_pcie_path_and_nvmls_p2p_answer(monkeypatch, tmp_path) -> None:
    (tmp_path / "nvlink-down-1").touch()
    fake = _fake(monkeypatch, NVML, tmp_path)
    top = gpus.NvmlSource(fake).topology()
    assert top.matrix == (("X", "NODE"), ("NODE", "X"))
    assert top.nvlinks == ((18, 18), (0, 18))
    assert top.p2p["0-1"]["nvlink"] == "not supported"


def test_direct_links_between_gpus_count_per_pair(monkeypatch) -> None:
    """A board whose GPUs link to each other (no NVSwitch): NV# is the links to that GPU."""
    fake = _fake(monkeypatch, NVML)
    src = gpus.NvmlSource(fake)
    other = {0: src.static[1]["pci_bus_id"], 1: src.static[0]["pci_bus_id"]}
    monkeypatch.setattr(fake, "nvmlDeviceGetNvLinkRemoteDeviceType", lambda h, link: 0)
    monkeypatch.setattr(fake, "nvmlDeviceGetNvLinkRemotePciInfo",
                        lambda h, link: fake._Obj(busId=other[h.index]))
    state = fake.nvmlDeviceGetNvLinkState
    monkeypatch.setattr(fake, "nvmlDeviceGetNvLinkState",
                        lambda h, link: state(h, link) if link < 6 else 0)
    assert src.topology().matrix == (("X", "NV6"), ("NV6", "X"))


@pytest.mark.parametrize("level,word", [(10, "PIX"), (20, "PXB"), (30, "PHB"),
                                        (40, "NODE"), (50, "SYS")])
def test_pcie_levels_are_nvidia_smis_words(monkeypatch, tmp_path, level, word) -> None:
    (tmp_path / "nvlink-down-0").touch()
    fake = _fake(monkeypatch, NVML, tmp_path)
    monkeypatch.setattr(fake, "nvmlDeviceGetTopologyCommonAncestor", lambda a, b: level)
    assert gpus.NvmlSource(fake).topology().matrix[0][1] == word


def test_the_agents_status_carries_topology_and_the_last_probe(monkeypatch, tmp_path) -> None:
    from pod_agent import p2p

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("POD_AGENT_HOME", str(home))
    fake = _fake(monkeypatch, NVML)
    mon = GpuMonitor(lambda rec: None, nvml=fake, kmsg_path=str(tmp_path / "no-kmsg"))
    doc = mon.status({})
    assert doc["topology"]["matrix"] == [["X", "NV18"], ["NV18", "X"]]
    assert doc["p2p_probe"] is None  # never probed: said as such
    res = p2p.ProbeResult("unused", "all_reduce over 2 ranks gave 2 via SHM/direct/direct",
                          1.5, 2, ("SHM/direct/direct",), 24)
    p2p.save_result(res, str(home / p2p.RESULT_FILE))
    probe = mon.status({})["p2p_probe"]
    assert probe["verdict"] == "unused" and probe["transports"] == ["SHM/direct/direct"]
    assert probe["t"] > 0
    # and the sample crosses the socket whole (the exporter's feed parses it back)
    tel = gpus.GpuTelemetry.from_json(json.loads(json.dumps(doc)))
    assert tel.topology == doc["topology"]


def test_check_host_keeps_the_probes_evidence(tmp_path) -> None:
    """The verdict that set NCCL_P2P_DISABLE is kept with NCCL's own transports, for the
    GPU screen to show beside the matrix (the stand-in torch replays the H200s' NCCL)."""
    from tests.unit.test_p2p_probe import _check

    _check(tmp_path, "good")
    saved = json.loads((tmp_path / "home" / "p2p-probe.json").read_text())
    assert saved["verdict"] == "ok" and saved["transports"] == ["P2P/CUMEM"]
    _check(tmp_path, "hang")
    saved = json.loads((tmp_path / "home" / "p2p-probe.json").read_text())
    assert saved["verdict"] == "hung" and saved["fallback"]["transports"] == [
        "SHM/direct/direct"]


def test_pod_agent_gpus_prints_the_matrix_as_nvidia_smi(tmp_path) -> None:
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=f"{FAKE_DIR}:{REPO}", FAKE_NVML_STEADY="1",
               FAKE_NVML_CAPTURE=str(NVML))
    env.pop("FAKE_NVIDIA_SMI_GPUS", None)
    r = subprocess.run([sys.executable, "-m", "pod_agent", "gpus"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    smi = (FIXTURES / "nccl-h200x2" / "nvidia-smi-topo-m.txt").read_text()
    assert r.stdout.splitlines()[-3:] == gpu_lines(smi, 2)
    doc = json.loads(subprocess.run([sys.executable, "-m", "pod_agent", "gpus", "--json"],
                                    env=env, cwd=tmp_path, capture_output=True, text=True,
                                    timeout=60, check=True).stdout)
    assert doc["topology"]["matrix"] == [["X", "NV18"], ["NV18", "X"]]
