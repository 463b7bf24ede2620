"""The pod agent's GPM reader (SM activity, SM occupancy, tensor pipe, DRAM bandwidth)
against what a real H200 answered (``tests/fixtures/gpm-h200``, ``tools/gpm_capture.py``):
the NVML stand-in replays the captured intervals, metric by metric, return codes
included; ``nvidia-smi dmon --gpm-metrics`` printed at the same time is the reference."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pod_agent import gpm, gpus
from pod_agent.exporter import Exporter
from tests.conftest import FIXTURES, REPO

CAPTURE = FIXTURES / "gpm-h200" / "gpm.json"
NVML = FIXTURES / "nvml-h200x2" / "nvml-load.json"
FAKE_DIR = REPO / "console" / "demo" / "fakenvml"
DOC = json.loads(CAPTURE.read_text())
NAMES = {"sm_active_pct": "SM_UTIL", "sm_occupancy_pct": "SM_OCCUPANCY",
         "tensor_active_pct": "ANY_TENSOR_UTIL", "dram_active_pct": "DRAM_BW_UTIL"}
DMON_COLS = {"sm_active_pct": "smutil", "sm_occupancy_pct": "smocc",
             "tensor_active_pct": "mmaact", "dram_active_pct": "dram"}


def _load_fake() -> Any:
    spec = importlib.util.spec_from_file_location("fake_pynvml_gpm", FAKE_DIR / "pynvml.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv("FAKE_NVML_CAPTURE", str(NVML))
    monkeypatch.setenv("FAKE_NVML_STEADY", "1")
    monkeypatch.setenv("FAKE_NVML_GPM", str(CAPTURE))
    monkeypatch.setenv("FAKE_NVIDIA_SMI_GPUS", "1")  # the GPM capture's host: one H200
    monkeypatch.delenv("FAKE_NVML_FAULTS", raising=False)
    mod = _load_fake()
    mod.nvmlInit()
    yield mod
    mod.nvmlShutdown()


def captured(phase: str) -> list[dict[str, float]]:
    """Each captured interval's four figures, as NVML answered them."""
    out = []
    for iv in DOC["phases"][phase]["nvml"]:
        out.append({f: round(iv["metrics"][m]["value"], 3) for f, m in NAMES.items()})
    return out


def dmon(phase: str) -> list[dict[str, int]]:
    """The rows of ``nvidia-smi dmon --gpm-metrics 2,3,5,10`` that had GPM figures."""
    lines = DOC["phases"][phase]["nvidia_smi_dmon"]["stdout"].splitlines()
    head = lines[0].lstrip("# ").split()
    rows = []
    for line in lines[2:]:
        cells = dict(zip(head, line.split(), strict=True))
        if cells.get("smutil", "-") != "-":
            rows.append({f: int(cells[c]) for f, c in DMON_COLS.items()})
    return rows


@pytest.mark.parametrize("phase", ["idle", "tensor", "memory"])
def test_the_readings_are_the_captured_intervals(fake, monkeypatch, phase) -> None:
    monkeypatch.setenv("FAKE_NVML_GPM_PHASE", phase)
    src = gpus.NvmlSource(fake)
    first = src.sample().readings[0]
    # one sample is no interval: supported, but no figure yet (and none invented)
    assert first.gpm_supported is True
    assert all(getattr(first, f) is None for f in NAMES)
    want = captured(phase)
    got = []
    for _ in want:
        r = src.sample().readings[0]
        got.append({f: getattr(r, f) for f in NAMES})
    assert got == want
    # and they say what nvidia-smi said over the same seconds (dmon prints whole percent,
    # cut, and samples on its own clock: within 2 points)
    for row in dmon(phase):
        for f, v in row.items():
            assert all(abs(g[f] - v) <= 2 for g in got), (f, v, [g[f] for g in got])


def test_tensor_bound_and_memory_bound_are_told_apart(fake, monkeypatch) -> None:
    """What the figures are for: a matmul loop's tensor pipe is busy and its DRAM is not,
    a copy loop the reverse — while NVML's util reads ~100 % in both."""
    def steady(phase: str) -> gpus.GpuReading:
        monkeypatch.setenv("FAKE_NVML_GPM_PHASE", phase)
        fake.nvmlInit()
        src = gpus.NvmlSource(fake)
        src.sample()
        return src.sample().readings[0]

    tensor, memory = steady("tensor"), steady("memory")
    assert tensor.tensor_active_pct > 90 > 1 > memory.tensor_active_pct  # type: ignore[operator]
    assert memory.dram_active_pct > 85 > 20 > tensor.dram_active_pct  # type: ignore[operator]
    assert memory.sm_occupancy_pct > 5 * tensor.sm_occupancy_pct  # type: ignore[operator]


def test_without_gpm_the_figures_are_absent_never_zero(fake, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_NVML_GPM", "none")  # NotSupported: a GPU before Hopper
    src = gpus.NvmlSource(fake)
    for _ in range(3):
        d = src.sample().readings[0].to_json()
        assert d["gpm_supported"] is False
        assert [d[f] for f in NAMES] == [None] * 4
    ex = Exporter("127.0.0.1", 0, 60, None, nvml=fake)
    try:
        text = ex.render().decode()
    finally:
        ex.close()
    assert "DCGM_FI_DEV_GPU_UTIL{" in text and "DCGM_FI_PROF_" not in text


def test_a_binding_without_gpm_is_no_gpm(fake) -> None:
    """nvidia-ml-py before GPM (no nvmlGpm* functions): no figures, no exception."""
    class Old:
        def __getattr__(self, name: str) -> Any:
            if name.startswith(("nvmlGpm", "c_nvmlGpm")):
                raise AttributeError(name)
            return getattr(fake, name)

    r = gpus.NvmlSource(Old()).sample().readings[0]
    assert r.gpm_supported is False and r.sm_active_pct is None


def test_a_metric_nvml_refused_is_absent_the_others_stand(fake, monkeypatch,
                                                         tmp_path: Path) -> None:
    doc = json.loads(CAPTURE.read_text())
    for iv in doc["phases"]["tensor"]["nvml"]:
        iv["metrics"]["DRAM_BW_UTIL"].update(nvmlReturn=3, value=0.0)
    path = tmp_path / "gpm.json"
    path.write_text(json.dumps(doc))
    monkeypatch.setenv("FAKE_NVML_GPM", str(path))
    monkeypatch.setenv("FAKE_NVML_GPM_PHASE", "tensor")
    src = gpus.NvmlSource(fake)
    src.sample()
    r = src.sample().readings[0]
    assert r.dram_active_pct is None  # not 0.0, which NVML put in the refused slot
    assert r.tensor_active_pct == captured("tensor")[0]["tensor_active_pct"]


def test_every_sample_is_freed_once(fake, monkeypatch) -> None:
    """Each interval frees the older sample; closing frees the last: NVML's samples are
    the driver's memory, and a reader that leaked one a second would grow without end."""
    allocated: list[Any] = []
    real = fake.nvmlGpmSampleAlloc

    def alloc() -> Any:
        allocated.append(real())
        return allocated[-1]

    monkeypatch.setattr(fake, "nvmlGpmSampleAlloc", alloc)
    src = gpus.NvmlSource(fake)
    for _ in range(5):
        src.sample()
    assert sum(not s.freed for s in allocated) == 1  # the newest, for the next interval
    src.gpm.close()
    assert all(s.freed for s in allocated) and len(allocated) == 5


def test_the_exporter_serves_dcgm_exporters_ratios(fake, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_NVML_GPM_PHASE", "tensor")
    ex = Exporter("127.0.0.1", 0, 60, None, nvml=fake)  # one sample at start; no thread
    try:
        assert ex.sampler is not None
        ex.sampler._latest = ex.telemetry.sample()  # type: ignore[union-attr]
        text = ex.render().decode()
    finally:
        ex.close()
    want = captured("tensor")[0]
    from console.sources.collect.exposition import parse

    samples = parse(text).samples
    for name, field in (("DCGM_FI_PROF_SM_ACTIVE", "sm_active_pct"),
                        ("DCGM_FI_PROF_SM_OCCUPANCY", "sm_occupancy_pct"),
                        ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_active_pct"),
                        ("DCGM_FI_PROF_DRAM_ACTIVE", "dram_active_pct")):
        (value,) = samples[name].values()
        assert value == pytest.approx(want[field] / 100)  # a ratio 0..1, as DCGM's
        assert 0 <= value <= 1


def test_pod_agent_gpus_json_says_gpm(tmp_path) -> None:
    """The one-shot command reads GPM over a second, as ``nvidia-smi dmon`` does."""
    env = dict(os.environ, PYTHONPATH=f"{FAKE_DIR}:{REPO}", FAKE_NVML_STEADY="1",
               FAKE_NVIDIA_SMI_GPUS="1", FAKE_NVML_CAPTURE=str(NVML),
               FAKE_NVML_GPM=str(CAPTURE), FAKE_NVML_GPM_PHASE="memory")
    r = subprocess.run([sys.executable, "-m", "pod_agent", "gpus", "--json"], env=env,
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (g,) = json.loads(r.stdout)["gpus"]
    assert g["gpm_supported"] is True
    assert {f: g[f] for f in NAMES} == captured("memory")[0]
    r = subprocess.run([sys.executable, "-m", "pod_agent", "gpus"],
                       env=dict(env, FAKE_NVML_GPM="none"), capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)
    assert "GPM: not on this GPU" in r.stdout, r.stdout


def test_metric_ids_are_nvmls() -> None:
    """The ids asked are nvml.h's, the ones the capture recorded under those names."""
    ids = {m["id"]: name for name, m in DOC["phases"]["idle"]["nvml"][0]["metrics"].items()}
    assert {mid: ids[mid] for mid in gpm.METRICS} == {
        2: "SM_UTIL", 3: "SM_OCCUPANCY", 5: "ANY_TENSOR_UTIL", 10: "DRAM_BW_UTIL"}


def test_samples_that_say_not_supported_mean_no_gpm(fake, monkeypatch) -> None:
    """A GPU whose support query says yes but whose samples are refused (MIG mode, say)
    reads as no GPM, not as "one sample so far" for ever."""
    def refused(h: Any, s: Any) -> None:
        raise fake.NVMLError(fake.NVML_ERROR_NOT_SUPPORTED)

    monkeypatch.setattr(fake, "nvmlGpmSampleGet", refused)
    src = gpus.NvmlSource(fake)
    for _ in range(2):
        r = src.sample().readings[0]
    assert r.gpm_supported is False and r.sm_active_pct is None
