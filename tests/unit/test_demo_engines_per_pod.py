"""The demo's NVML stand-in lists on a pod's GPUs only that pod's engines (issue 42: after
a fallback the old pod's processes showed on the new pod's GPUs, `pid … no slot 72.7 GiB`,
memory at 190 %). The simulated vLLM registers with the pod it runs on; the agent's NVML
reading, on the new pod, skips the other pod's."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES, REPO

FAKE = REPO / "console" / "demo" / "fakenvml" / "pynvml.py"
CAPTURE = FIXTURES / "nvml-h200x2" / "nvml-idle.json"


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    faults = tmp_path / "faults"
    faults.mkdir()
    monkeypatch.setenv("FAKE_NVML_FAULTS", str(faults))
    monkeypatch.setenv("FAKE_NVML_ENGINES", "1")
    monkeypatch.setenv("FAKE_NVML_CAPTURE", str(CAPTURE))
    monkeypatch.setenv("FAKE_NVML_STEADY", "1")
    spec = importlib.util.spec_from_file_location("fake_pynvml_pods", FAKE)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.nvmlInit()
    yield mod, faults
    mod.nvmlShutdown()


def _register(faults: Path, pod: str) -> subprocess.Popen[bytes]:
    """A live process registered as the simulated vLLM registers (its own pid's file)."""
    code = ("import os, sys, time; sys.path.insert(0, sys.argv[1]);"
            "from console.demo.fake_vllm import register_on_gpus; register_on_gpus(0.76);"
            "print('up', flush=True); time.sleep(60)")
    env = {**os.environ, "DEMO_FAULTS": str(faults), "RUNPOD_POD_ID": pod,
           "CUDA_VISIBLE_DEVICES": "0"}
    p = subprocess.Popen([sys.executable, "-c", code, str(REPO)], env=env,
                         stdout=subprocess.PIPE)
    assert p.stdout is not None and p.stdout.readline().strip() == b"up"
    return p


def test_a_pods_gpus_list_only_its_own_engines(nvml: Any, monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    mod, faults = nvml
    old, new = _register(faults, "old-pod"), _register(faults, "new-pod")
    try:
        docs = {json.loads(f.read_text())["pod"] for f in faults.glob("nvml-proc-*")}
        assert docs == {"old-pod", "new-pod"}
        h = mod.nvmlDeviceGetHandleByIndex(0)
        monkeypatch.setenv("RUNPOD_POD_ID", "new-pod")
        assert [pid for pid, _ in mod._engines(h)] == [new.pid]
        monkeypatch.setenv("RUNPOD_POD_ID", "old-pod")
        assert [pid for pid, _ in mod._engines(h)] == [old.pid]
    finally:
        for p in (old, new):
            p.terminate()
            p.wait(timeout=10)
