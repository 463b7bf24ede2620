"""The shipped profiles are valid, ordered, and carry the field's numbers."""

from __future__ import annotations

import subprocess
import sys

from pod_agent.profile import MAX_GPU_UTIL_PER_GPU
from pod_agent.profiles import load_profiles
from tests.conftest import PROFILES


def test_profile_check_exits_0_on_shipped_profiles() -> None:
    files = sorted(str(p) for p in PROFILES.glob("*.yaml"))
    r = subprocess.run([sys.executable, "-m", "console.cli", "profile", "check", *files],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(": ok") == 3


def test_order_is_rtx_then_h100_then_a100() -> None:
    names = [lp.name for lp in load_profiles(PROFILES)]
    assert names == ["rtx6000-2x", "h100-2x", "a100-2x"]


def test_field_profile_numbers() -> None:
    first = load_profiles(PROFILES)[0].profile
    assert first.gpu_type_ids == ["NVIDIA RTX PRO 6000 Blackwell Server Edition",
                                  "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"]
    assert first.image == "vllm/vllm-openai:qwen38-flash-next"
    flash, q27 = first.slots["FLASH"], first.slots["Q27"]
    assert (flash.served_model_name, flash.port, flash.gpus, flash.gpu_util,
            flash.max_model_len) == ("qwen3.8-flash-next", 8881, [0, 1], 0.76, 131072)
    assert (q27.served_model_name, q27.port, q27.gpus, q27.gpu_util,
            q27.max_model_len) == ("qwen3.8-27b", 8882, [0, 1], 0.19, 65536)
    assert flash.speculative and flash.speculative.method == "mtp"
    assert flash.speculative.num_speculative_tokens == 3
    assert first.aliases == {"internal-default": "FLASH", "internal-sub": "Q27"}
    assert first.min_cuda == "13.0"
    assert flash.gpu_util + q27.gpu_util <= MAX_GPU_UTIL_PER_GPU


def test_explicit_priority_beats_file_prefix(tmp_path) -> None:
    for p in PROFILES.glob("*.yaml"):
        text = p.read_text()
        if p.name.startswith("30-"):
            text = "priority: 1\n" + text
        (tmp_path / p.name).write_text(text)
    assert next(lp.name for lp in load_profiles(tmp_path)) == "a100-2x"
