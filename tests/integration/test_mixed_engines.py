"""A profile with one vLLM slot and one SGLang slot, through the whole path: it
validates (a wrong engine is refused with file, line and field), renders (commands,
LiteLLM, Prometheus targets), each slot starts with its engine's command line (the
demo's simulated servers, started exactly as the agent starts them), the console's
direct poll reads each with its engine's figures, rebalancing moves SGLang's
``--mem-fraction-static``, and smoke and bench pass against both."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from console.config.render import PodAddress, render_litellm, render_slots, render_targets
from console.operations.benchmark.measure import BenchPlan, run_bench
from console.operations.smoke import SmokePlan, run_smoke
from console.sources.collect.http import HttpClient
from console.sources.collect.slot import ScrapeWindow, probe_slot
from console.sources.collect.targets import targets_for
from pod_agent.launch import slot_command
from pod_agent.profiles import check_file
from tests.conftest import FIXTURES, REPO
from tests.support import procs

PROFILE = FIXTURES / "profiles-engines" / "mixed.yaml"
BIN = REPO / "console" / "demo" / "bin"


def test_the_profile_validates_and_a_wrong_engine_is_refused_where_it_stands(
        tmp_path: Path) -> None:
    prof, problems = check_file(PROFILE)
    assert prof is not None and not problems
    assert prof.slots["VL"].engine == "vllm" and prof.slots["SG"].engine == "sglang"
    bad = tmp_path / "bad.yaml"
    bad.write_text(PROFILE.read_text().replace("engine: sglang", "engine: tgi"))
    _, problems = check_file(bad)
    [p] = problems
    line = PROFILE.read_text().split("\n").index("    engine: sglang") + 1
    assert (p.line, p.field) == (line, "slots.SG.engine")
    assert "'vllm' or 'sglang'" in p.message


def test_each_slot_renders_with_its_engines_command_line() -> None:
    prof, _ = check_file(PROFILE)
    assert prof is not None
    sg = slot_command(prof, "SG", p2p_disabled=True).argv
    assert sg[:3] == ("python3", "-m", "sglang.launch_server")
    flags = {f: sg[sg.index(f) + 1] for f in sg if f.startswith("--") and f != "--enable-metrics"
             and f != "--disable-custom-all-reduce"}
    assert flags["--model-path"] == "example/tiny-sglang"
    assert flags["--served-model-name"] == "tiny-sglang"
    assert flags["--port"] == "8892" and flags["--tp-size"] == "1"
    assert flags["--mem-fraction-static"] == "0.6" and flags["--context-length"] == "4096"
    assert "--enable-metrics" in sg and "--gpu-memory-utilization" not in sg
    assert flags["--speculative-algorithm"] == "EAGLE"
    vl = slot_command(prof, "VL").argv
    assert vl[:3] == ("vllm", "serve", "example/tiny-vllm")
    assert "--gpu-memory-utilization" in vl and "--enable-metrics" not in vl
    # rebalancing gives a slot another gpu_util: SGLang's flag moves with it
    moved = prof.model_copy(update={"slots": {**prof.slots, "SG": prof.slots["SG"].model_copy(
        update={"gpu_util": 0.55})}})
    assert "0.55" in slot_command(moved, "SG").argv
    files = render_slots(prof)
    assert json.loads(files["slots/SG.json"])["argv"][2] == "sglang.launch_server"
    addr = PodAddress(pod_id="pod1", host="10.0.0.1")
    lite = yaml.safe_load(render_litellm(prof, addr))
    models = {m["model_name"]: m["litellm_params"] for m in lite["model_list"]}
    assert models["tiny-sglang"]["model"] == "openai/tiny-sglang"
    assert models["tiny-sglang"]["api_base"].endswith(":8892/v1")
    assert models["tiny-vllm"]["model"] == "hosted_vllm/tiny-vllm"
    targets = json.loads(render_targets(prof, "mixed", addr))
    assert sorted(t["labels"]["slot"] for t in targets) == ["SG", "VL"]


@pytest.fixture(scope="module")
def slots(tmp_path_factory) -> Iterator[dict[str, str]]:
    """Both slots running: the demo's simulated servers, from the agent's own commands
    (``console/demo/bin/vllm`` for vLLM, ``console/demo/bin/sglang-python`` for SGLang)."""
    prof, _ = check_file(PROFILE)
    assert prof is not None
    work = tmp_path_factory.mktemp("mixed")
    ports = {"VL": procs.free_port(), "SG": procs.free_port()}
    slots_ = dict(prof.slots)
    for name, port in ports.items():
        slots_[name] = slots_[name].model_copy(update={"port": port})
    prof = prof.model_copy(update={"slots": slots_})
    started = []
    try:
        for name in ports:
            cmd = slot_command(prof, name, host="127.0.0.1", vllm=str(BIN / "vllm"),
                               sglang=str(BIN / "sglang-python"))
            env = {**os.environ, **cmd.env, "DEMO_STARTUP_S": "0.3", "DEMO_RATE": "4",
                   "PYTHONPATH": str(REPO), "DEMO_KV": "200000@0.5/1000000"}
            log = work / f"{name}.log"
            started.append(procs.start(list(cmd.argv), log, env=env, cwd=REPO))
            procs.wait_http(f"http://127.0.0.1:{ports[name]}/health", 60, started[-1], log)
        yield {"prof": prof, "work": str(work),  # type: ignore[dict-item]
               **{n: f"http://127.0.0.1:{p}" for n, p in ports.items()}}
    finally:
        for p in started:
            procs.stop(p)


async def test_the_poll_reads_each_slot_with_its_engines_figures(slots) -> None:
    prof = slots["prof"]
    targets = {t.slot: t for t in targets_for(prof, "127.0.0.1")}
    assert targets["SG"].engine == "sglang" and targets["VL"].engine == "vllm"
    client = HttpClient()
    try:
        figs = {}
        for name, t in targets.items():
            win = ScrapeWindow(60.0, engine_name=t.engine)
            first = await probe_slot(client, t, 5.0, memo=win.memo)
            assert first.health == "up" and first.error is None, first.error
            assert first.exposition is not None
            win.add(first.t, first.exposition, t.served_model_name)
            await asyncio.sleep(1.2)  # the window's shortest span (MIN_WINDOW_S)
            second = await probe_slot(client, t, 5.0, memo=win.memo)
            assert second.exposition is not None
            figs[name] = win.figures(second.t, second.exposition, t.served_model_name)
    finally:
        await client.aclose()
    sg, vl = figs["SG"], figs["VL"]
    assert sg is not None and vl is not None
    assert (sg.engine, vl.engine) == ("sglang", "vllm")
    assert sg.kv_cache_usage is not None and sg.kv_available_tokens is not None
    assert sg.generation_total and sg.generation_total > 0
    # acceptance length from SGLang's counters; per position not exported (never 0)
    assert sg.mean_acceptance_length is not None and sg.mean_acceptance_length > 1
    assert sg.acceptance_rate is None and sg.per_position == ()
    assert vl.acceptance_rate is not None and len(vl.per_position) == 2
    assert vl.kv_available_tokens is None  # not a vLLM figure


async def test_smoke_and_bench_pass_against_both(slots) -> None:
    plan = SmokePlan(served={"tiny-vllm": slots["VL"], "tiny-sglang": slots["SG"]},
                     slots={"VL": "tiny-vllm", "SG": "tiny-sglang"}, timeout_s=20.0)
    client = HttpClient()
    try:
        report = await run_smoke(plan, client)
        got = {c.name: (c.ok, c.evidence) for c in report.checks}
        for check in ("models listed", "chat", "streaming", "unknown model"):
            assert got[check][0] is True, (check, got[check])
        for name, served in (("SG", "tiny-sglang"), ("VL", "tiny-vllm")):
            res = await run_bench(BenchPlan(
                profile="mixed", slot=name, served_model_name=served, url=slots[name],
                slot_url=slots[name], via="direct", runs=1, warmup=0, concurrency=(1,),
                lengths=("short",), long_tokens=200, max_tokens=16, task_max_tokens=8,
                tasks=(), timeout_s=30.0), client)
            assert res.failed_requests == 0, name
            [cfg] = res.configs
            assert cfg.runs[0].tok_s and cfg.runs[0].tok_s > 0
            # the window's speculative figures come from each engine's own counters
            assert cfg.window.spec is not None, (name, cfg.window)
            assert cfg.window.spec.mean_acceptance_length is not None
    finally:
        await client.aclose()
