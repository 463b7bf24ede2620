"""GPU memory as nvidia-smi and dcgm-exporter report it (issue 29, finding 14).

``tests/fixtures/nvml-h200-memory`` was captured on a real H200 (``tools/nvml_capture.py
--memory``): at each instant NVML's v1 and v2 memory answers, read before and after
``nvidia-smi --query-gpu=memory.used,memory.reserved,memory.free,memory.total``, and the
pod agent's own reading. v1 counts the driver's reservation (615 MiB) as used; nvidia-smi
and DCGM use v2, where ``used`` leaves it out and ``reserved`` says it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pod_agent import gpus
from pod_agent.exporter import Collector
from tests.conftest import FIXTURES, REPO

MEMORY = FIXTURES / "nvml-h200-memory"
PHASES = ("idle", "context", "alloc", "two-contexts", "load")
BASE = FIXTURES / "nvml-h200x2" / "nvml-idle.json"
FAKE_DIR = REPO / "console" / "demo" / "fakenvml"
MIB = 1 << 20
V1, V2 = "nvmlDeviceGetMemoryInfo(h0)", "nvmlDeviceGetMemoryInfo(h0,33554472)"


def instant(phase: str) -> dict[str, Any]:
    return json.loads((MEMORY / f"memory-{phase}.json").read_text())


def smi_row(doc: dict[str, Any]) -> dict[str, int]:
    used, reserved, free, total = (int(x) for x in doc["smi_csv"].strip().split(","))
    return {"used": used, "reserved": reserved, "free": free, "total": total}


def replay(tmp_path: Path, phase: str, *, drop_v2: bool = False) -> Path:
    """A capture for the NVML stand-in: the H200 host's answers, one GPU, memory as the
    H200 answered at this phase's instant."""
    calls = json.loads(BASE.read_text())
    calls["nvmlDeviceGetCount()"] = {"ok": 1}
    calls.update(instant(phase)["before"])
    if drop_v2:  # a driver before R510: no v2 call at all
        calls.pop(V2)
    path = tmp_path / f"capture-{phase}.json"
    path.write_text(json.dumps(calls))
    return path


@pytest.fixture
def fake(monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_NVML_STEADY", "1")
    monkeypatch.delenv("FAKE_NVML_FAULTS", raising=False)
    monkeypatch.delenv("FAKE_NVIDIA_SMI_GPUS", raising=False)
    monkeypatch.delenv("FAKE_NVIDIA_SMI_MIB", raising=False)
    spec = importlib.util.spec_from_file_location("fake_pynvml_mem", FAKE_DIR / "pynvml.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def load(phase: str, **kw: bool) -> Any:
        monkeypatch.setenv("FAKE_NVML_CAPTURE", str(replay(tmp_path, phase, **kw)))
        mod.nvmlInit()
        return mod

    yield load
    mod.nvmlShutdown()


@pytest.mark.parametrize("phase", PHASES)
def test_the_capture_is_one_instant_and_tells_v1_from_v2(phase) -> None:
    """Premise: nvidia-smi saw what the NVML answers say, and the two calls differ by the
    reservation, so a v1 reading cannot pass the tests below."""
    doc = instant(phase)
    assert doc["steady"] is True
    v1, v2 = doc["before"][V1]["ok"], doc["before"][V2]["ok"]
    assert v1["used"] == v2["used"] + v2["reserved"] and v1["free"] == v2["free"]
    assert gpus.smi_mib(v1["used"]) != smi_row(doc)["used"]


@pytest.mark.parametrize("phase", PHASES)
def test_agent_memory_equals_nvidia_smi_on_the_h200(fake, phase) -> None:
    doc = instant(phase)
    r = gpus.NvmlSource(fake(phase)).read(0)
    assert r.memory_mib() == smi_row(doc)
    assert r.to_json()["mem_mib"] == smi_row(doc)
    # and the same reading the real driver gave the agent on the H200 at that instant
    on_h200 = doc["agent"][0]
    assert (r.mem_used_bytes, r.mem_reserved_bytes, r.mem_free_bytes, r.mem_total_bytes) == \
        (on_h200["mem_used_bytes"], on_h200["mem_reserved_bytes"],
         on_h200["mem_free_bytes"], on_h200["mem_total_bytes"])


@pytest.mark.parametrize("phase", PHASES)
def test_exporter_serves_dcgms_fb_fields(fake, phase) -> None:
    """DCGM_FI_DEV_FB_USED/FREE/RESERVED/TOTAL: NVML's v2 figures in whole MiB, rounded
    down as DCGM divides them; and what the agent served on the H200 at that instant."""
    doc = instant(phase)
    v2 = doc["before"][V2]["ok"]
    tel = gpus.NvmlSource(fake(phase)).sample()
    got = {s.name: s.value for fam in Collector(lambda: tel, None, "h").collect()
           for s in fam.samples if s.name.startswith("DCGM_FI_DEV_FB_")}
    assert got == {"DCGM_FI_DEV_FB_USED": v2["used"] // MIB,
                   "DCGM_FI_DEV_FB_FREE": v2["free"] // MIB,
                   "DCGM_FI_DEV_FB_RESERVED": v2["reserved"] // MIB,
                   "DCGM_FI_DEV_FB_TOTAL": v2["total"] // MIB}
    on_h200 = {line.split("{")[0]: float(line.rsplit(" ", 1)[1])
               for line in doc["exposition"]}
    assert got == on_h200
    # dcgm rounds down where nvidia-smi rounds up: 615.06 MiB reserved is 615 and 616
    assert got["DCGM_FI_DEV_FB_RESERVED"] == 615 and smi_row(doc)["reserved"] == 616


def test_a_driver_without_the_v2_call_falls_back_to_v1(fake) -> None:
    nvml = fake("alloc", drop_v2=True)
    calls: list[Any] = []
    real = nvml.nvmlDeviceGetMemoryInfo

    def counted(h: Any, version: Any = None) -> Any:
        calls.append(version)
        return real(h, version=version)

    nvml.nvmlDeviceGetMemoryInfo = counted
    src = gpus.NvmlSource(nvml)
    v1 = instant("alloc")["before"][V1]["ok"]
    for _ in range(3):
        r = src.read(0)
        assert (r.mem_used_bytes, r.mem_free_bytes, r.mem_reserved_bytes) == \
            (v1["used"], v1["free"], None)
    # v2 is asked once: "Function Not Found" does not change while the driver runs
    assert calls == [nvml.nvmlMemory_v2, None, None, None]
    tel = src.sample()
    names = {s.name for fam in Collector(lambda: tel, None, "h").collect()
             for s in fam.samples}
    assert "DCGM_FI_DEV_FB_RESERVED" not in names  # unknown, not 0
    assert r.memory_mib()["reserved"] is None


def test_a_binding_without_the_version_argument_falls_back_to_v1(fake) -> None:
    nvml = fake("context")
    real = nvml.nvmlDeviceGetMemoryInfo

    def old_binding(h: Any) -> Any:  # nvidia-ml-py before the v2 call
        return real(h)

    nvml.nvmlDeviceGetMemoryInfo = old_binding
    r = gpus.NvmlSource(nvml).read(0)
    assert r.mem_used_bytes == instant("context")["before"][V1]["ok"]["used"]
    assert r.mem_reserved_bytes is None


def test_pod_agent_gpus_prints_nvidia_smis_figures(tmp_path) -> None:
    doc = instant("two-contexts")
    env = dict(os.environ, PYTHONPATH=f"{FAKE_DIR}:{REPO}", FAKE_NVML_STEADY="1",
               FAKE_NVML_CAPTURE=str(replay(tmp_path, "two-contexts")))
    env.pop("FAKE_NVIDIA_SMI_GPUS", None)
    env.pop("FAKE_NVIDIA_SMI_MIB", None)
    out = {}
    for flag in ("--json", None):
        r = subprocess.run([sys.executable, "-m", "pod_agent", "gpus",
                            *([flag] if flag else [])], env=env, capture_output=True,
                           text=True, timeout=60, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        out[flag] = r.stdout
    row = smi_row(doc)
    assert json.loads(out["--json"])["gpus"][0]["mem_mib"] == row
    assert f"mem {row['used']}/{row['total']} MiB (+{row['reserved']} reserved)" in out[None]
