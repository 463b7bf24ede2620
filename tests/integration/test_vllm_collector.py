"""The poller against the real vLLM server: health, models, figures, stale data, restarts."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import httpx
import pytest

from console.model.history import History
from console.sources.collect.exposition import parse
from console.sources.collect.figures import compute
from console.sources.collect.poller import DeploymentPoller
from console.sources.collect.targets import SlotTarget
from tests.support.procs import free_port
from tests.support.vllm_server import load

pytestmark = [pytest.mark.vllm]


def _target(srv) -> SlotTarget:
    return SlotTarget("TINY", srv.name, srv.port, srv.url, (0,), 0.5)


async def test_direct_poll_reads_health_models_and_window_figures(real_vllm) -> None:
    # no completion probe here: its 4 tokens would be counted in the window
    poller = DeploymentPoller("test", (_target(real_vllm),), window_s=60, timeout_s=2,
                              probe_interval_s=1e9)
    try:
        first = await poller.poll()
        s = first.slots[0]
        assert s.health == "up" and s.served_models == (real_vllm.name,)
        assert s.source == "direct" and s.error is None
        assert await load(real_vllm.url, real_vllm.name, requests=6, max_tokens=24) == 6
        await asyncio.sleep(1.0)
        second = (await poller.poll()).slots[0]
        f = second.figures
        assert f is not None and f.window_s is not None and f.window_s > 0
        # vLLM counts the tokens of the last speculative step before cutting the output
        # to max_tokens, so each request may add up to num_speculative_tokens (3) more
        assert 6 * 24 <= f.generation_tokens <= 6 * (24 + 3)
        assert f.generation_tps is not None and f.generation_tps > 0
        assert f.spec_decode is not None and f.spec_decode.drafts > 0
        assert f.cache is not None and f.cache.num_gpu_blocks and f.cache.block_size
        assert poller.history.series("TINY", "kv_cache_usage").points
    finally:
        await poller.aclose()


async def test_completion_probe_catches_a_real_answer(real_vllm) -> None:
    poller = DeploymentPoller("test", (_target(real_vllm),), timeout_s=5, probe_interval_s=0)
    try:
        s = (await poller.poll()).slots[0]
        assert s.probe_ok is None  # probes run beside the poll: the figures never wait
        assert s.figures is not None
        await poller.probes_done()
        s = (await poller.poll()).slots[0]
        assert s.probe_ok is True and s.probe_at is not None
        bad = DeploymentPoller("test", (SlotTarget("TINY", "no-such-model", real_vllm.port,
                                                   real_vllm.url),), timeout_s=5,
                               probe_interval_s=0)
        await bad.poll()
        await bad.probes_done()
        s = (await bad.poll()).slots[0]  # one failure is retried, not yet said
        assert s.health == "up" and s.probe_ok is None and "404" in s.probe_detail
        await bad.probes_done()  # the retry, started by that poll: confirmed
        s = (await bad.poll()).slots[0]
        assert s.health == "up" and s.probe_ok is False and "404" in s.probe_detail
        await bad.aclose()
    finally:
        await poller.aclose()


async def test_polls_never_overlap(real_vllm) -> None:
    poller = DeploymentPoller("test", (_target(real_vllm),), timeout_s=2)
    try:
        a, b = await asyncio.gather(poller.poll(), poller.poll())
        assert poller.skipped == 1
        assert (a.slots and not b.slots) or (b.slots and not a.slots)
    finally:
        await poller.aclose()


async def test_prometheus_down_falls_back_to_direct_scrapes(real_vllm) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    poller = DeploymentPoller("test", (_target(real_vllm),), prometheus_url=dead, timeout_s=1)
    try:
        snap = await poller.poll()
        assert snap.prometheus_error == "connection refused"
        assert snap.slots[0].source == "direct" and snap.slots[0].figures is not None
    finally:
        await poller.aclose()


async def test_prometheus_path_and_backfill(real_vllm, real_prometheus) -> None:
    real_prometheus.wait_scrapes(2)
    poller = DeploymentPoller("test", (_target(real_vllm),),
                              prometheus_url=real_prometheus.url, window_s=60, timeout_s=3,
                              history=History(600, 1))
    try:
        n = await poller.backfill(step_s=1)
        assert n > 0
        assert len(poller.history.series("TINY", "kv_cache_usage")) > 1
        snap = await poller.poll()
        s = snap.slots[0]
        assert snap.prometheus_error is None and s.source == "prometheus"
        assert s.figures is not None and s.figures.cache is not None
        assert s.kv_p99 is not None
    finally:
        await poller.aclose()


def test_status_json_against_real_server(real_vllm, tmp_path) -> None:
    prof = tmp_path / "profiles"
    prof.mkdir()
    (prof / "10-test.yaml").write_text(f"""
gpu_type_ids: [cpu]
image: test
slots:
  TINY:
    served_model_name: {real_vllm.name}
    hf_repo_id: local/tiny
    port: {real_vllm.port}
    gpus: [0]
    gpu_util: 0.5
    max_model_len: 2048
""")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {prof}\nstate_dir: {tmp_path / 'state'}\n")
    r = subprocess.run([sys.executable, "-m", "console.cli", "status", "--json",
                        "--config", str(cfg), "--sample", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    (slot,) = out["slots"]
    assert slot["health"] == "up" and slot["served_models"] == [real_vllm.name]
    assert slot["rates"]["window_s"] > 0.5


async def test_slot_dies_goes_stale_then_counter_reset_after_restart(real_vllm) -> None:
    """Runs last in this module: it restarts the shared server."""
    poller = DeploymentPoller("test", (_target(real_vllm),), window_s=600, timeout_s=2)
    try:
        assert await load(real_vllm.url, real_vllm.name, requests=4, max_tokens=16) == 4
        good = await poller.poll()
        before = httpx.get(real_vllm.url + "/metrics").text
        real_vllm.stop()
        dead = (await poller.poll()).slots[0]
        assert dead.health == "down" and "connection refused" in (dead.error or "")
        assert dead.stale_since == good.fetched_at
        assert dead.figures is not None  # the last good figures stay on screen
        real_vllm.start()
        assert await load(real_vllm.url, real_vllm.name, requests=3, max_tokens=16) == 3
        after = httpx.get(real_vllm.url + "/metrics").text
        lifetime = compute(parse(after))[real_vllm.name]
        window = compute(parse(after), parse(before), window_s=10)[real_vllm.name]
        # counters restarted from zero: the increase is the new lifetime value, never negative
        assert window.generation_tokens == lifetime.generation_tokens
        assert 3 * 16 <= lifetime.generation_tokens <= 3 * (16 + 3)
        assert window.spec_decode and lifetime.spec_decode
        assert window.spec_decode.drafts == lifetime.spec_decode.drafts
        assert window.ttft_p95_s == lifetime.ttft_p95_s
        back = (await poller.poll()).slots[0]
        assert back.health == "up" and back.stale_since is None
        assert back.figures and back.figures.generation_tokens is not None
        assert back.figures.generation_tokens >= 0
    finally:
        await poller.aclose()
