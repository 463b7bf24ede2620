"""Headless commands against the running demo deployment (real HTTP, real RunPod emulator)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from tests.conftest import REPO


def _config(demo, tmp_path) -> str:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {demo.profiles_dir}\nstate_dir: {tmp_path / 'state'}\n"
                   f"window_s: 60\npod:\n  runpod_id: {demo.pod_id}\n  host: 127.0.0.1\n")
    return str(cfg)


def _env(demo) -> dict[str, str]:
    return dict(os.environ, RUNPOD_API_KEY="demo-runpod-key",
                RUNPOD_API_BASE=demo.emulator.base_url, PYTHONPATH=str(REPO))


def test_rebalance_plan_json(demo, tmp_path) -> None:
    time.sleep(2)
    r = subprocess.run([sys.executable, "-m", "console.cli", "rebalance", "--plan", "--json",
                        "--config", _config(demo, tmp_path), "--sample", "2"],
                       capture_output=True, text=True, timeout=120, env=_env(demo))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out["proposed"]) == {"FLASH", "Q27"}
    assert out["proposed"]["FLASH"] + out["proposed"]["Q27"] <= 0.95 + 1e-9
    assert len(out["explain"]) >= 2
    # one live (util, tokens) point per slot was observed from vllm:cache_config_info
    assert out["models"]["FLASH"]["points"] == [[0.76, 239000 // 16 * 16]]  # whole blocks


def test_status_json_on_the_demo(demo, tmp_path) -> None:
    r = subprocess.run([sys.executable, "-m", "console.cli", "status", "--json", "--config",
                        _config(demo, tmp_path), "--sample", "1"], capture_output=True,
                       text=True, timeout=60, env=_env(demo))
    assert r.returncode == 0, r.stderr
    slots = {s["slot"]: s for s in json.loads(r.stdout)["slots"]}
    assert slots["FLASH"]["health"] == "up"
    assert 0.0 <= slots["FLASH"]["figures"]["kv_cache_usage"] < 0.2
