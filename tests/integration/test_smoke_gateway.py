"""The smoke test and the benchmark through a real LiteLLM proxy running the
``litellm.yaml`` that ``profile render`` wrote, in front of the real vLLM CPU server
(n-gram speculative decoding), with a real Prometheus scraping the ``targets.json`` it
wrote: the rendered gateway config works, each broken part fails its own check, and the
benchmark's acceptance is the live formula on the server's own counters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from msgspec.structs import replace
from pydantic import SecretStr

from console.config.render import PodAddress, render_litellm, render_targets
from console.operations.smoke import SmokePlan, plan_for, run_smoke
from console.sources.collect.http import HttpClient
from console.sources.collect.targets import targets_for
from pod_agent.profiles import load_profile
from tests.conftest import REPO
from tests.support import litellm_proxy, prometheus_server
from tests.support.procs import free_port

pytestmark = [pytest.mark.vllm]
POD = "pod-smoke"


def _profile(d: Path, vllm_port: int, dead_port: int | None) -> Path:
    down = "" if dead_port is None else f"""
  DOWN:
    served_model_name: tiny-down
    hf_repo_id: local/tiny
    port: {dead_port}
    gpus: [0]
    gpu_util: 0.1
    max_model_len: 2048
"""
    path = d / ("10-smoke.yaml" if dead_port is None else "20-smoke-down.yaml")
    path.write_text(f"""
name: smoke
gpu_type_ids: [cpu]
image: local
aliases: {{tiny-latest: TINY}}
slots:
  TINY:
    served_model_name: tiny
    hf_repo_id: local/tiny
    port: {vllm_port}
    gpus: [0]
    gpu_util: 0.1
    max_model_len: 2048
{down}""")
    return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory, real_vllm) -> Iterator[SimpleNamespace]:
    if not litellm_proxy.available():
        if os.environ.get("CI"):
            pytest.fail("the LiteLLM venv is missing (tests/support/litellm_venv.sh)")
        pytest.skip("the LiteLLM venv is missing")
    if not prometheus_server.available():
        if os.environ.get("CI"):
            pytest.fail("prometheus (Debian package) is missing")
        pytest.skip("prometheus is not installed")
    root = tmp_path_factory.mktemp("smoke")
    profiles = root / "profiles"
    profiles.mkdir()
    dead = free_port()  # a slot that is stopped: nothing listens there
    good = load_profile(_profile(profiles, real_vllm.port, None))
    both_path = _profile(root, real_vllm.port, dead)  # not in profiles/: the broken one
    both = load_profile(both_path)
    addr = PodAddress(host="127.0.0.1", pod_id=POD)
    (root / "targets.json").write_text(render_targets(both, "smoke", addr))
    prom = prometheus_server.PrometheusServer(root / "prom", [],
                                              file_sd=root / "targets.json")
    proxy = litellm_proxy.LiteLLMProxy(root / "litellm", render_litellm(both, addr))
    prom.start()
    try:
        proxy.start()
        try:
            yield SimpleNamespace(root=root, profiles=profiles, good=good, both=both,
                                  addr=addr, prom=prom, proxy=proxy, vllm=real_vllm)
        finally:
            proxy.stop()
    finally:
        prom.stop()


def _settings(s: SimpleNamespace, gateway: bool = True) -> SimpleNamespace:
    return SimpleNamespace(
        gateway_url=s.proxy.url if gateway else None,
        gateway_key=SecretStr(litellm_proxy.MASTER_KEY), vllm_api_key=None,
        prometheus_url=s.prom.url, pod=SimpleNamespace(machine_id=POD), smoke_timeout_s=120)


async def _smoke(plan: SmokePlan) -> dict[str, tuple[bool | None, str]]:
    client = HttpClient()
    try:
        report = await run_smoke(plan, client)
    finally:
        await client.aclose()
    return {c.name: (c.ok, c.evidence) for c in report.checks}


def _wait_targets(s: SimpleNamespace) -> None:
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        res = s.prom.query(f'up{{pod="{POD}"}}')
        if len(res) == 2:
            return
        time.sleep(0.5)
    raise AssertionError(f"Prometheus never scraped both rendered targets: {res}")


def test_the_cli_passes_through_the_rendered_gateway(stack) -> None:
    """``pod-console smoke --json`` as docs/smoke-and-bench.md runs it: a config naming the gateway
    and Prometheus, the key in the environment."""
    _wait_targets(stack)
    cfg = stack.root / "config.yaml"
    cfg.write_text(f"profiles_dir: {stack.profiles}\nstate_dir: {stack.root / 'state'}\n"
                   f"prometheus_url: {stack.prom.url}\ngateway_url: {stack.proxy.url}\n"
                   f"pod:\n  runpod_id: {POD}\n  host: 127.0.0.1\n")
    env = dict(os.environ, PYTHONPATH=str(REPO), LITELLM_MASTER_KEY=litellm_proxy.MASTER_KEY)
    env.pop("POD_CONSOLE_STATE_DIR", None)
    r = subprocess.run([sys.executable, "-m", "console.cli", "smoke", "--json", "--config",
                        str(cfg)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    verdicts = {c["name"]: c["verdict"] for c in doc["checks"]}
    assert doc["via"] == f"gateway {stack.proxy.url}"
    assert verdicts == {"models listed": "pass", "aliases listed": "pass", "chat": "pass",
                        "streaming": "pass", "aliases answer": "pass",
                        "unknown model": "pass", "targets up": "pass",
                        "trace sink": "skipped"}, doc
    ev = {c["name"]: c["evidence"] for c in doc["checks"]}
    assert ev["unknown model"].startswith("gateway: HTTP 4")
    assert "chunks" in ev["streaming"] and all(c["duration_s"] >= 0 for c in doc["checks"])
    assert litellm_proxy.MASTER_KEY not in r.stdout + r.stderr  # no secret printed
    # the human form, exit 0 too
    r = subprocess.run([sys.executable, "-m", "console.cli", "smoke", "--config", str(cfg)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "all passed" in r.stdout and "skipped" in r.stdout


async def test_direct_to_the_slot_without_a_gateway(stack) -> None:
    targets = targets_for(stack.good, "127.0.0.1")
    got = await _smoke(plan_for(stack.good, targets, _settings(stack, gateway=False)))
    assert got["aliases listed"][0] is None and "no gateway_url" in got["aliases listed"][1]
    assert got["chat"][0] and got["streaming"][0], got
    ok, ev = got["unknown model"]  # vLLM's own answer, named by its slot
    assert ok is True and ev.endswith(" (tiny): HTTP 404"), ev


async def test_a_stopped_slot_fails_chat_streaming_and_its_target(stack) -> None:
    _wait_targets(stack)
    targets = targets_for(stack.both, "127.0.0.1")
    got = await _smoke(plan_for(stack.both, targets, _settings(stack)))
    assert got["models listed"][0] is True  # the gateway lists what it was told
    assert got["chat"][0] is False and "tiny-down: HTTP" in got["chat"][1]
    assert "tiny: '" in got["chat"][1]  # the live slot still answers, with content
    assert got["streaming"][0] is False and "tiny-down" in got["streaming"][1]
    assert got["targets up"] == (False, "DOWN DOWN")
    assert got["aliases answer"][0] is True and got["unknown model"][0] is True


async def test_a_removed_alias_fails_its_checks(stack) -> None:
    targets = targets_for(stack.good, "127.0.0.1")
    plan = plan_for(stack.good, targets, _settings(stack))
    plan = replace(plan, aliases={**plan.aliases, "tiny-gone": "tiny"})
    got = await _smoke(plan)
    assert got["aliases listed"] == (False, "missing from /v1/models: tiny-gone")
    assert got["aliases answer"][0] is False and "tiny-gone: HTTP 400" in \
        got["aliases answer"][1]
    assert got["chat"][0] is True and got["targets up"][0] is True, got


# -- the benchmark through the same gateway --------------------------------------------------

BENCH_ARGS = ["--runs", "2", "--max-tokens", "24", "--long-tokens", "300",
              "--task-max-tokens", "16"]


def _spec_counters(url: str) -> dict[str, float]:
    import httpx

    from console.sources.collect.exposition import parse
    from console.sources.collect.figures import compute

    f = compute(parse(httpx.get(url + "/metrics", timeout=30).text), only="tiny")["tiny"]
    return {"drafts": f.value("spec_drafts"), "draft_tokens": f.value("spec_draft_tokens"),
            "accepted_tokens": f.value("spec_accepted")}


def _bench_cli(stack: SimpleNamespace, *extra: str) -> subprocess.CompletedProcess[str]:
    cfg = stack.root / "bench-config.yaml"
    # greedy: the random-weight model then repeats itself, so the n-gram drafts are
    # accepted (with the server's sampling its text never repeats and nothing is drafted)
    cfg.write_text(f"profiles_dir: {stack.profiles}\nstate_dir: {stack.root / 'bstate'}\n"
                   f"prometheus_url: {stack.prom.url}\ngateway_url: {stack.proxy.url}\n"
                   f"pod:\n  runpod_id: {POD}\n  host: 127.0.0.1\n"
                   f"bench:\n  temperature: 0\n")
    env = dict(os.environ, PYTHONPATH=str(REPO), LITELLM_MASTER_KEY=litellm_proxy.MASTER_KEY)
    env.pop("POD_CONSOLE_STATE_DIR", None)
    return subprocess.run([sys.executable, "-m", "console.cli", "bench", "TINY", "--config",
                           str(cfg), *BENCH_ARGS, *extra], env=env, capture_output=True,
                          text=True, timeout=900)


def test_bench_through_the_gateway_measures_and_keeps_every_field(stack) -> None:
    r = _bench_cli(stack, "--json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert litellm_proxy.MASTER_KEY not in r.stdout + r.stderr
    rec = json.loads(r.stdout)
    assert (rec["profile"], rec["slot"], rec["served_model_name"]) == ("smoke", "TINY", "tiny")
    assert rec["via"] == f"gateway {stack.proxy.url}" and rec["vllm_version"] == "0.32.0"
    assert rec["pod"]["id"] == POD and rec["failed_requests"] == 0 and rec["errors"] == []
    assert rec["knobs"]["runs"] == 2 and rec["knobs"]["temperature"] == 0
    assert [c["name"] for c in rec["configs"]] == ["short-c1", "short-c4", "long-c1",
                                                   "long-c4"]
    short, long_ = rec["configs"][0], rec["configs"][2]
    assert long_["prompt_tokens"] > 4 * short["prompt_tokens"]
    for c in rec["configs"]:
        assert len(c["runs"]) == 2 and len(c["warmup_runs"]) == 1
        assert all(len(run["requests"]) == c["concurrency"] for run in c["runs"])
        for m in ("ttft_s", "tpot_s", "tok_s", "tok_s_per_request", "decode_tok_s"):
            assert c["summary"][m]["mean"] > 0 and c["summary"][m]["n"] == 2, (c["name"], m)
        req = c["runs"][0]["requests"][0]
        assert req["tokens_from"] == "usage" and req["completion_tokens"] > 0
        sp = c["spec"]
        assert sp is not None and sp["acceptance_rate"] > 0, c
        # the live figures' formula, on the counters the record kept
        b, a = sp["counters_before"], sp["counters_after"]
        d_acc = a["accepted_tokens"] - b["accepted_tokens"]
        assert sp["acceptance_rate"] == pytest.approx(
            d_acc / (a["draft_tokens"] - b["draft_tokens"]), abs=1e-6)
        assert sp["mean_acceptance_length"] == pytest.approx(
            1 + d_acc / (a["drafts"] - b["drafts"]), abs=1e-6)
        assert len(sp["per_position"]) == 3
    assert [t["task"] for t in rec["tasks"]] == ["json", "code", "summarisation", "ko_qa",
                                                 "en_qa", "translation", "tool_call"]
    assert all(t["spec"] is not None and t["completion_tokens"] > 0 for t in rec["tasks"])
    # the counters were the server's own: they only grew since
    now = _spec_counters(stack.vllm.url)
    last = rec["tasks"][-1]["spec"]["counters_after"]
    assert all(now[k] >= last[k] for k in now)
    # kept, as printed
    kept = json.loads((stack.root / "bstate" / "bench" / f"{rec['id']}.json").read_text())
    assert kept == rec
    audit = [json.loads(x) for x in (stack.root / "bstate" / "audit.jsonl").read_text()
             .splitlines() if '"bench"' in x]
    assert [a["result"] for a in audit][-2:] == ["started", "ok"]


def test_bench_flags_a_drop_against_the_previous_run(stack) -> None:
    bench = stack.root / "bstate" / "bench"
    if not any(bench.glob("*.json")):
        assert _bench_cli(stack).returncode == 0
    # the last run, as if it had been ten times faster
    last = sorted(bench.glob("*.json"))[-1]
    rec = json.loads(last.read_text())
    for c in rec["configs"]:
        c["summary"]["tok_s"]["mean"] *= 10
    last.write_text(json.dumps(rec))
    r = _bench_cli(stack)
    assert r.returncode == 4, r.stdout[-3000:] + r.stderr[-3000:]
    assert "REGRESSION short-c1: tok/s" in r.stdout and "check P2P" in r.stdout
    assert "1 warm-up + 2 measured runs" in r.stdout and "kept: " in r.stdout
    assert "acceptance by task type" in r.stdout and "█" in r.stdout
    r = subprocess.run([sys.executable, "-m", "console.cli", "bench", "--history",
                        "--config", str(stack.root / "bench-config.yaml")],
                       env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.count(" TINY ") >= 2, r.stdout
