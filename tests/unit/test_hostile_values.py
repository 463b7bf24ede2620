"""Hostile values on the console's side, refused where they enter: a NaN or absurd $/h
from the provider or the spend book, numbers in the config and on the command line,
context names that are paths, an empty state directory, the environment the simulated
pod gets, and YAML nested past what a composer can take."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from console.config.settings import ConfigError, load_settings
from console.model.snapshot import PodSnapshot
from console.session import boot
from console.session.spend import SpendBook
from console.sources.provider.base import Machine
from console.sources.provider.emulator import EmulatorState, make_app
from console.sources.provider.runpod import RunPodClient
from pod_agent import sourcemap
from pod_agent.sourcemap import SourceError
from tests.conftest import PROFILES, REPO

# -- 18: a cost that is not a price ------------------------------------------------------


@pytest.mark.parametrize("cost", ["NaN", "Infinity", "-Infinity", "-3.5", "1e400", "1e12",
                                  '"lots"'])
async def test_a_broken_cost_from_the_api_is_unknown(cost: str) -> None:
    state = EmulatorState(api_key="k")
    pid = state.add_stopped_pod("p", "NVIDIA H100 80GB HBM3")
    state.set_status(state.pods[pid], "RUNNING")
    state.cost_text = cost
    client = RunPodClient("k", "http://rp/v2",
                          transport=httpx.ASGITransport(app=make_app(state)))
    try:
        pod = await client.get(pid)
        [listed] = await client.list()
    finally:
        await client.aclose()
    assert pod.status == "RUNNING" and pod.cost_per_hr is None and listed.cost is None
    state.cost_text = "6.58"  # a real price still passes
    client = RunPodClient("k", "http://rp/v2",
                          transport=httpx.ASGITransport(app=make_app(state)))
    try:
        assert (await client.get(pid)).cost_per_hr == 6.58
    finally:
        await client.aclose()


def test_no_machine_record_holds_a_cost_that_is_not_a_price() -> None:
    for bad in (math.nan, math.inf, -1.0, 1e308):
        assert Machine("p", cost_per_hr=bad).cost is None
    assert Machine("p", cost_per_hr=4.18).cost == 4.18


def test_a_spend_book_with_a_nan_run_keeps_its_good_runs(tmp_path: Path) -> None:
    path = tmp_path / "spend.json"
    good = {"pod_id": "p1", "started_at": 1_000_000.0, "cost_per_hr": 4.0,
            "last_running": 1_003_600.0}
    path.write_text("[" + ", ".join([
        json.dumps(good),
        '{"pod_id": "p2", "started_at": 1000000.0, "cost_per_hr": NaN, '
        '"last_running": 1003600.0}',
        '{"pod_id": "p3", "started_at": 1000000.0, "cost_per_hr": -4, '
        '"last_running": 1003600.0}',
        '{"pod_id": "p4", "started_at": 1000000.0, "cost_per_hr": 1e300, '
        '"last_running": 1003600.0}',
        '{"pod_id": "p5", "started_at": Infinity, "cost_per_hr": 2, '
        '"last_running": 1003600.0}',
        '"not a run"']) + "]")
    book = SpendBook(path)
    assert [r.pod_id for r in book.runs.values()] == ["p1"]
    total = book.earlier_since(0.0, None, 1_010_000.0)
    assert total == pytest.approx(4.0)
    # a NaN that reached the book in memory is not observed, and never saved
    book.observe(PodSnapshot(pod_id="p9", status="RUNNING", cost_per_hr=math.nan,
                             started_at=1_005_000.0), 1_006_000.0)
    book.save(1_006_000.0)
    assert "NaN" not in path.read_text()
    json.loads(path.read_text())  # strict JSON: status --json and fleet --json read it


# -- 20: numbers at the edge --------------------------------------------------------------

@pytest.mark.parametrize("value", ["nan", "inf", "-5", "1e308", "0"])
def test_a_refresh_interval_that_is_no_interval_is_refused_with_its_line(
        tmp_path: Path, value: str) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"state_dir: {tmp_path / 's'}\nrefresh_s: {value}\n")
    with pytest.raises(ConfigError, match=r"config.yaml:2: refresh_s: "):
        load_settings(cfg)
    # the first frame does not draw with it either: the validated path says what is wrong
    assert boot.plan(cfg) is None
    assert boot.plan(None, refresh_s=float(value)) is None


def test_a_refresh_below_the_floor_is_still_the_floor(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"state_dir: {tmp_path / 's'}\nrefresh_s: 0.2\n")
    assert load_settings(cfg).refresh_s == 1.0


@pytest.mark.parametrize("key,value", [("window_s", ".inf"), ("pod", "{ssh_port: 0}"),
                                       ("pod", "{port_map: {8000: 70000}}"),
                                       ("thresholds", "{default: {ttft_p95_s: .nan}}"),
                                       ("alerts", "{for_s: .nan}")])
def test_other_numbers_of_the_config_are_checked_too(tmp_path: Path, key: str,
                                                     value: str) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"state_dir: {tmp_path / 's'}\n{key}: {value}\n")
    with pytest.raises(ConfigError, match=rf"config.yaml:2: {key}"):
        load_settings(cfg)


@pytest.mark.parametrize("argv,says", [
    (["up", "--rounds", "-3"], "--rounds: '-3': from 1 to 1000"),
    (["up", "--rounds", "0"], "--rounds: '0'"),
    (["up", "--ssh-wait", "nan"], "--ssh-wait: 'nan'"),
    (["up", "--health-wait", "inf"], "--health-wait: 'inf'"),
    (["up", "--round-wait", "-1"], "--round-wait: '-1'"),
    (["up", "--cleanup-wait", "0"], "--cleanup-wait: '0'"),
    (["up", "--cleanup-wait", "inf"], "--cleanup-wait: 'inf'"),
    (["metrics", "x.txt", "--timeout", "inf"], "--timeout: 'inf'"),
    (["metrics", "x.txt", "--timeout", "0"], "--timeout: '0'"),
    (["status", "--sample", "nan"], "--sample: 'nan'"),
    (["watch", "--refresh", "nan"], "--refresh: 'nan'"),
    (["wall", "--rotate", "-5"], "--rotate: '-5'"),
])
def test_numbers_on_the_command_line_are_checked_before_anything_runs(
        tmp_path: Path, argv: list[str], says: str) -> None:
    # no RunPod key, no config: a run that got past the parser would fail otherwise
    r = subprocess.run([sys.executable, "-m", "console.cli", *argv], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
                            "HOME": str(tmp_path)})
    assert r.returncode == 2 and says in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


# -- 21: context names and the state directory --------------------------------------------

@pytest.mark.parametrize("name", ["../../../escape", "/abs/olute", "..", ".hidden",
                                  "a/b", "x\x1b]0;t\x07"])
def test_a_context_name_is_never_a_path(tmp_path: Path, name: str) -> None:
    cfg = tmp_path / "config.yaml"
    state = tmp_path / "state"
    cfg.write_text(yaml.safe_dump({"state_dir": str(state), "current_context": "ok",
                                   "contexts": {"ok": {}, name: {"refresh_s": 3}}}))
    with pytest.raises(ConfigError, match=r"config.yaml:\d+: context name"):
        load_settings(cfg)
    with pytest.raises(ConfigError, match=r"context name"):
        load_settings(cfg, context=name)
    assert not (tmp_path / "escape").exists() and sorted(tmp_path.iterdir()) == [cfg]


def test_a_plain_context_name_keeps_its_state_under_the_state_dir(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"state_dir": str(tmp_path / "state"),
                                   "contexts": {"eu-west_2.prod": {}}}))
    s = load_settings(cfg, context="eu-west_2.prod")
    assert s.state_dir == tmp_path / "state" / "contexts" / "eu-west_2.prod"


def test_an_empty_state_dir_is_never_the_current_directory(tmp_path: Path,
                                                          monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POD_CONSOLE_STATE_DIR", "")
    with pytest.raises(ConfigError, match=r"state_dir: .*empty"):
        load_settings(None)
    cfg = tmp_path / "config.yaml"
    cfg.write_text("state_dir: ''\n")
    monkeypatch.delenv("POD_CONSOLE_STATE_DIR")
    with pytest.raises(ConfigError, match=r"config.yaml:1: state_dir: .*empty"):
        load_settings(cfg)
    assert boot.plan(cfg) is None


# -- 23: the simulated pod's environment ----------------------------------------------------

def test_no_variable_of_the_consoles_environment_reaches_the_simulated_pod_unless_allowed(
        tmp_path: Path, monkeypatch) -> None:
    from console.demo.deployment import DemoDeployment

    canaries = {"LITELLM_MASTER_KEY": "sk-canary-1", "LANGFUSE_PUBLIC_KEY": "pk-canary-2",
                "LANGFUSE_SECRET_KEY": "sk-canary-3", "DATABASE_URL": "postgres://u:canary4@h",
                "AWS_ACCESS_KEY_ID": "AKIACANARY5", "HF_TOKEN": "hf_canary6",
                "OPENAI_API_KEY": "sk-canary7", "GPU_METRICS_TOKEN": "canary8",
                "POD_CONSOLE_WEBHOOK_URL": "https://hooks.example/canary9",
                "MY_CREDENTIALS": "canary10"}
    for k, v in canaries.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("LC_TIME", "C")
    demo = DemoDeployment(tmp_path)
    monkeypatch.setattr(demo, "hf_home", lambda: tmp_path / "hf")
    env = demo.agent_env("emu0001", tmp_path / "agent", "NVIDIA H100 80GB HBM3",
                         str(tmp_path / "pkg"))
    leaked = [k for k, v in env.items() if "canary" in v.lower()]
    assert leaked == []
    assert env["LC_TIME"] == "C" and "PATH" in env  # what a process needs still goes
    assert env["RUNPOD_API_KEY"] == "demo-runpod-key"  # the emulator's own key only


# -- 25: nesting past what a composer can take ------------------------------------------

def test_deep_nesting_has_a_line_whatever_the_composer_does(monkeypatch) -> None:
    # PyYAML with libyaml on some machines: the composer runs out of stack (a
    # RecursionError, or worse), and the problem had no line
    def exhausted(*_a, **_k):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(sourcemap.yaml, "compose_all", exhausted)
    with pytest.raises(SourceError) as exc:
        sourcemap.load_text("slots:\n  A: " + "[" * 1000 + "]" * 1000 + "\n")
    assert exc.value.line == 2 and "deeper than 200" in exc.value.message
    block = "a:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(300))
    with pytest.raises(SourceError) as exc:
        sourcemap.load_text(block)
    assert exc.value.line == 201


def test_the_depth_check_leaves_real_profiles_alone() -> None:
    for path in sorted(PROFILES.glob("*.yaml")):
        sourcemap.load_text(path.read_text())
