"""The smoke test through a real LiteLLM proxy running the ``litellm.yaml`` that
``profile render`` wrote, in front of the real vLLM CPU server, with a real Prometheus
scraping the ``targets.json`` it wrote: the rendered gateway config works, and each
broken part fails its own check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import SecretStr

from console.collect.http import HttpClient
from console.collect.targets import targets_for
from console.render import PodAddress, render_litellm, render_targets
from console.smoke import SmokePlan, plan_for, run_smoke
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
        prometheus_url=s.prom.url, pod=SimpleNamespace(runpod_id=POD), smoke_timeout_s=120)


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
    """``pod-console smoke --json`` as the README runs it: a config naming the gateway
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
    assert ev["unknown model"].startswith("HTTP 4")
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
    assert got["unknown model"] == (True, "HTTP 404")  # vLLM's own answer


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
    plan = SmokePlan(**{**plan.__dict__, "aliases": {**plan.aliases, "tiny-gone": "tiny"}})
    got = await _smoke(plan)
    assert got["aliases listed"] == (False, "missing from /v1/models: tiny-gone")
    assert got["aliases answer"][0] is False and "tiny-gone: HTTP 400" in \
        got["aliases answer"][1]
    assert got["chat"][0] is True and got["targets up"][0] is True
