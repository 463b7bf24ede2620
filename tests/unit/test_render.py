"""profile render: the four outputs, their structure, byte stability, and the P2P rule."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pod_agent.launch import slot_command
from pod_agent.profiles import load_profile
from tests.conftest import PROFILES

FIELD = PROFILES / "10-rtx6000-2x.yaml"


def _render(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console.cli", "profile", "render", str(FIELD), "--out", str(out),
         "--pod-host", "203.0.113.7", "--pod-id", "abc123", *extra],
        capture_output=True, text=True, timeout=60)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_render_writes_the_four_outputs_byte_stable(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert _render(a).returncode == 0
    assert _render(b).returncode == 0
    tree = _tree(a)
    assert {"slots/FLASH.json", "slots/Q27.json", "litellm.yaml", "prometheus/targets.json",
            "gatus.yaml"} <= set(tree)
    assert tree == _tree(b)
    # re-rendering over an existing directory changes nothing either
    assert _render(a).returncode == 0
    assert _tree(a) == tree


def test_slot_json_is_the_exact_vllm_command(tmp_path: Path) -> None:
    _render(tmp_path)
    flash = json.loads((tmp_path / "slots/FLASH.json").read_text())
    assert flash["argv"] == [
        "vllm", "serve", "RadixArk/Qwen3.8-Flash-Next-NVFP4",
        "--served-model-name", "qwen3.8-flash-next", "--host", "0.0.0.0", "--port", "8881",
        "--tensor-parallel-size", "2", "--gpu-memory-utilization", "0.76",
        "--max-model-len", "131072",
        "--speculative-config", '{"method":"mtp","num_speculative_tokens":3}',
    ]
    assert flash["env"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert flash["env"]["NCCL_P2P_DISABLE"] == "0"
    assert flash["secret_env"] == ["VLLM_API_KEY"]
    assert not any("key" in a.lower() for a in flash["argv"])


def test_p2p_disabled_adds_disable_custom_all_reduce_for_tp2_only() -> None:
    prof = load_profile(FIELD)
    cmd = slot_command(prof, "FLASH", p2p_disabled=True)
    assert "--disable-custom-all-reduce" in cmd.argv
    assert cmd.env["NCCL_P2P_DISABLE"] == "1"
    single = prof.model_copy(update={"slots": {
        "ONE": prof.slots["Q27"].model_copy(update={"gpus": [0]})}, "aliases": {}})
    assert "--disable-custom-all-reduce" not in slot_command(single, "ONE",
                                                             p2p_disabled=True).argv


def test_api_key_never_reaches_argv_or_files(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "sk-very-secret-123")
    r = subprocess.run(
        [sys.executable, "-m", "console.cli", "profile", "render", str(FIELD),
         "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    for content in _tree(tmp_path).values():
        assert b"sk-very-secret-123" not in content


def test_litellm_routes_every_served_name_and_alias(tmp_path: Path) -> None:
    _render(tmp_path)
    doc = yaml.safe_load((tmp_path / "litellm.yaml").read_text())
    by_name = {m["model_name"]: m for m in doc["model_list"]}
    assert set(by_name) == {"qwen3.8-flash-next", "qwen3.8-27b"}
    assert by_name["qwen3.8-27b"]["litellm_params"] == {
        "model": "hosted_vllm/qwen3.8-27b", "api_base": "http://203.0.113.7:8882/v1",
        "api_key": "os.environ/VLLM_API_KEY", "timeout": 600, "stream_timeout": 120}
    assert doc["router_settings"]["model_group_alias"] == {
        "internal-default": "qwen3.8-flash-next", "internal-sub": "qwen3.8-27b"}


def test_port_map_for_direct_tcp(tmp_path: Path) -> None:
    _render(tmp_path, "--port-map", "8881=40123")
    targets = json.loads((tmp_path / "prometheus/targets.json").read_text())
    assert targets[0]["targets"] == ["203.0.113.7:40123"]
    assert targets[1]["targets"] == ["203.0.113.7:8882"]


def test_gatus_posts_a_real_completion_every_5_minutes(tmp_path: Path) -> None:
    _render(tmp_path)
    doc = yaml.safe_load((tmp_path / "gatus.yaml").read_text())
    chats = [e for e in doc["endpoints"] if e["name"].endswith("chat")]
    assert len(chats) == 2
    for e in chats:
        assert e["method"] == "POST" and e["interval"] == "5m"
        assert e["url"].endswith("/v1/chat/completions")
        body = json.loads(e["body"])
        assert body["model"] in ("qwen3.8-flash-next", "qwen3.8-27b")
        assert "[STATUS] == 200" in e["conditions"]
        assert any("choices[0].message.content" in c for c in e["conditions"])


@pytest.mark.skipif(shutil.which("promtool") is None and not __import__("os").environ.get("CI"),
                    reason="promtool (Debian package prometheus) not installed")
def test_targets_pass_real_promtool(tmp_path: Path) -> None:
    _render(tmp_path)
    r = subprocess.run(["promtool", "check", "config",
                        str(tmp_path / "prometheus" / "prometheus.yml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    # promtool really reads the SD file: a broken one must fail the same check
    (tmp_path / "prometheus" / "targets.json").write_text('[{"targets": "not-a-list"}]')
    r = subprocess.run(["promtool", "check", "config",
                        str(tmp_path / "prometheus" / "prometheus.yml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0


def test_render_refuses_a_broken_profile(tmp_path: Path) -> None:
    bad = Path(__file__).resolve().parent.parent / "profiles_broken" / "dangling-alias.yaml"
    r = subprocess.run([sys.executable, "-m", "console.cli", "profile", "render", str(bad),
                        "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "aliases.internal-sub" in r.stderr
    assert not (tmp_path / "o").exists()


def _with_exporter(tmp_path: Path, port: int = 9400) -> Path:
    prof = tmp_path / "10-rtx6000-2x.yaml"
    prof.write_text(FIELD.read_text() + f"gpu_metrics_port: {port}\n")
    return prof


def test_an_exporter_port_becomes_a_gpu_job_labelled_by_pod(tmp_path: Path) -> None:
    prof = _with_exporter(tmp_path)
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "console.cli", "profile", "render", str(prof), "--out", str(out),
         "--pod-host", "203.0.113.7", "--pod-id", "abc123", "--port-map", "9400=40194"],
        capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    targets = json.loads((out / "prometheus/gpu-targets.json").read_text())
    assert targets == [{"targets": ["203.0.113.7:40194"],
                        "labels": {"profile": "rtx6000-2x", "pod": "abc123"}}]
    jobs = yaml.safe_load((out / "prometheus/prometheus.yml").read_text())["scrape_configs"]
    assert [j["job_name"] for j in jobs] == ["vllm", "gpu"]
    assert jobs[1]["file_sd_configs"][0]["files"] == ["gpu-targets.json"]
    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "check", "config", str(out / "prometheus/prometheus.yml")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
    # without the port: no GPU job (the field profile)
    _render(tmp_path / "plain")
    assert not (tmp_path / "plain/prometheus/gpu-targets.json").exists()


def test_an_exporter_port_that_a_slot_uses_is_refused_with_its_line(tmp_path: Path) -> None:
    prof = _with_exporter(tmp_path, 8881)
    r = subprocess.run([sys.executable, "-m", "console.cli", "profile", "check", str(prof)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "gpu_metrics_port" in r.stdout + r.stderr
    assert "already used by slot FLASH" in r.stdout + r.stderr
