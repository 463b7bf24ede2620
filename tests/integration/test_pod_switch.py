"""A pod switch against the real Prometheus: two pods (simulated vLLM engines on
loopback), each scraped with the labels ``profile render`` gives its targets, and a
console that moves from the old pod to the new one the way ``f`` moves it.

- fallback with Prometheus configured: after the switch the console reads the new pod's
  series (figures, and the plots' backfill), not the old pod's;
- a context switch keeps the plots when Prometheus can backfill them: the console
  reopened on that context (``reopen_on`` → ``full_context``) follows the pod the
  fallback moved it to, and its plots hold that pod's past at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from console.config.render import PodAddress, render_targets
from console.model.history import History
from console.sources.collect.http import HttpClient
from console.sources.collect.promql import PromClient, fetch_history
from pod_agent.profiles import load_profiles
from tests.conftest import REPO
from tests.support import procs, prometheus_server
from tests.support.emulated_pods import write_profiles

OLD, NEW = "pod-old", "pod-new"
PORT = 8881
"""The slot's port on either pod (``write_profiles``: kind-a serves model-0, kind-b
model-1)."""
WINDOW_S = 30


def _engine(d: Path, model: str, port: int, util: str, rate: str) -> object:
    env = dict(os.environ, PYTHONPATH=str(REPO), DEMO_STARTUP_S="0.1", DEMO_RATE=rate,
               DEMO_SEED=str(port))
    env.pop("DEMO_FAULTS", None)
    log = d / f"engine-{port}.log"
    proc = procs.start([sys.executable, "-m", "console.demo.fake_vllm", "serve", model,
                        "--served-model-name", model, "--port", str(port),
                        "--gpu-memory-utilization", util], log, env=env)
    procs.wait_http(f"http://127.0.0.1:{port}/health", 60, proc, log)
    return proc


@pytest.fixture(scope="module")
def pods(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    if not prometheus_server.available():
        if os.environ.get("CI"):
            pytest.fail("prometheus (Debian package) is missing")
        pytest.skip("prometheus is not installed")
    root = tmp_path_factory.mktemp("switch")
    profiles_dir = write_profiles(root / "profiles", [PORT])
    kinds = {lp.name: lp for lp in load_profiles(profiles_dir)}
    ports = {OLD: procs.free_port(), NEW: procs.free_port()}
    # the two pods told apart by their applied cache config (and their load)
    engines = [_engine(root, "model-0", ports[OLD], "0.5", "1"),
               _engine(root, "model-1", ports[NEW], "0.7", "4")]
    try:
        groups = []
        for pod, kind in ((OLD, "kind-a"), (NEW, "kind-b")):
            groups += json.loads(render_targets(kinds[kind].profile, kind, PodAddress(
                host="127.0.0.1", pod_id=pod, port_map={PORT: ports[pod]})))
        (root / "targets.json").write_text(json.dumps(groups))
        prom = prometheus_server.PrometheusServer(root / "prom", [], scrape_interval_s=1.0,
                                                  file_sd=root / "targets.json")
        prom.start()
        try:
            # a past to backfill, for both pods: more than a rate window of samples
            deadline = time.monotonic() + 180
            q = 'min(count_over_time(vllm:num_requests_running{pod=~"pod-.*"}[60s]))'
            while time.monotonic() < deadline:
                res = prom.query(q)
                if res and float(res[0]["value"][1]) >= WINDOW_S + 5 and len(
                        prom.query('vllm:cache_config_info{pod=~"pod-.*"}')) == 2:
                    break
                time.sleep(1)
            else:
                raise AssertionError("Prometheus did not gather both pods' series in time")
            yield SimpleNamespace(root=root, prom=prom, ports=ports, kinds=kinds,
                                  profiles_dir=profiles_dir)
        finally:
            prom.stop()
    finally:
        for p in engines:
            procs.stop(p)  # type: ignore[arg-type]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("POD_CONSOLE_CONTEXT", "POD_CONSOLE_STATE_DIR", "RUNPOD_API_KEY",
                 "POD_CONSOLE_POD__RUNPOD_ID", "POD_CONSOLE_POD__MACHINE_ID"):
        monkeypatch.delenv(name, raising=False)


def _fallback_result(pods: SimpleNamespace):  # type: ignore[no-untyped-def]
    """What the provisioner hands the console when ``f`` has brought the new pod up."""
    from console.operations.provision import ProvisionResult
    from console.sources.provider.base import Machine

    return ProvisionResult(Machine(NEW, status="RUNNING"), pods.kinds["kind-b"],
                           PodAddress("127.0.0.1", NEW, port_map={PORT: pods.ports[NEW]}), [])


async def _past(url: str, pod: str, span_s: float, step_s: float, end: float
                ) -> dict[tuple[str, str], list[tuple[float, float]]]:
    client = HttpClient()
    try:
        return await fetch_history(PromClient(url, client, 10.0), span_s, step_s, WINDOW_S,
                                   f'{{pod="{pod}"}}', end=end)
    finally:
        await client.aclose()


def _backfilled(history: History, slot: str, before: float
                ) -> dict[str, list[tuple[float, float]]]:
    """Each plotted series' points older than ``before`` (the console's first poll)."""
    from console.sources.collect.poller import PLOTTED

    return {k: [p for p in history.series(slot, k).points if p[0] < before] for k in PLOTTED}


async def test_fallback_with_prometheus_reads_the_new_pods_series(
        pods: SimpleNamespace, tmp_path: Path, clean_env: None) -> None:
    from console.config.settings import load_settings
    from console.session.context import make_context, switch_pod

    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {pods.profiles_dir}\nstate_dir: {tmp_path / 'state'}\n"
                   f"prometheus_url: {pods.prom.url}\nwindow_s: {WINDOW_S}\nrefresh_s: 1\n"
                   f"history_s: 120\n"
                   f"pod:\n  machine_id: {OLD}\n  host: 127.0.0.1\n"
                   f"  port_map: {{{PORT}: {pods.ports[OLD]}}}\n")
    now = time.time()
    ctx = make_context(load_settings(cfg), read_only=True, clock=lambda: now)
    dep = ctx.deployment
    assert dep is not None
    try:
        (slot,) = (await ctx.poller.poll()).slots
        assert (slot.source, slot.served_model_name) == ("prometheus", "model-0")
        assert slot.figures is not None and slot.figures.cache is not None
        assert slot.figures.cache.gpu_memory_utilization == 0.5

        switch_pod(dep, _fallback_result(pods))
        (slot,) = (await ctx.poller.poll()).slots
        assert (slot.source, slot.served_model_name, slot.health) == (
            "prometheus", "model-1", "up"), slot
        assert slot.figures is not None and slot.figures.cache is not None
        assert slot.figures.cache.gpu_memory_utilization == 0.7  # the new pod's series
        assert slot.figures.values["generation_tps"] is not None

        # the plots: the new pod's past, as Prometheus holds it
        step = dep.backfill_step_s
        assert await ctx.poller.backfill(step) > 0
        got = _backfilled(ctx.history, "MAIN", now)
        want = await _past(pods.prom.url, NEW, ctx.history.window_s, step, now)
        old = await _past(pods.prom.url, OLD, ctx.history.window_s, step, now)
        assert any(got.values())
        for key, pts in got.items():
            assert pts == [p for p in want.get(("model-1", key), []) if p[0] < now], key
        assert any(got[k] != [p for p in old.get(("model-0", k), []) if p[0] < now]
                   for k in got)
    finally:
        await ctx.poller.aclose()


async def test_a_context_switch_keeps_the_plots_when_prometheus_can_backfill_them(
        pods: SimpleNamespace, tmp_path: Path, clean_env: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from console.commands.tui_cmd import full_context
    from console.config import config_file
    from console.session.context import switch_pod

    state = tmp_path / "state"
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {pods.profiles_dir}\nstate_dir: {state}\n"
                   f"prometheus_url: {pods.prom.url}\nwindow_s: {WINDOW_S}\nrefresh_s: 1\n"
                   f"history_s: 120\ncontexts:\n"
                   f"  east:\n    pod: {{runpod_id: {OLD}, host: 127.0.0.1, "
                   f"port_map: {{{PORT}: {pods.ports[OLD]}}}}}\n"
                   f"  west:\n    pod: {{machine_id: pod-west, host: 127.0.0.1}}\n")

    async def console(context: str):  # type: ignore[no-untyped-def]
        """The console on ``context`` as a context switch reopens it."""
        monkeypatch.setenv("POD_CONSOLE_CONTEXT", context)
        ctx = await asyncio.to_thread(full_context, cfg, 1.0, True)
        assert ctx is not None and ctx.deployment is not None
        return ctx

    east = await console("east")
    try:
        assert east.deployment.machine_id == OLD
        # ``f`` on east: the provisioner adopts the new pod (the state directory names
        # it) and hands it to the console
        res = _fallback_result(pods)
        config_file.write_current_pod(east.settings.state_dir, NEW, "kind-b",
                                      "127.0.0.1", {PORT: pods.ports[NEW]})
        switch_pod(east.deployment, res)
        (slot,) = (await east.poller.poll()).slots
        assert slot.figures is not None and slot.figures.cache is not None
        assert slot.figures.cache.gpu_memory_utilization == 0.7  # the new pod, already
    finally:
        await east.poller.aclose()

    west = await console("west")  # another pod, nothing of it in Prometheus
    try:
        assert west.deployment.machine_id == "pod-west"
        assert await west.poller.backfill(west.deployment.backfill_step_s) == 0
    finally:
        await west.poller.aclose()

    back = await console("east")
    try:
        dep = back.deployment
        assert (dep.machine_id, dep.today.name) == (NEW, "kind-b")
        reopened = time.time()
        step = dep.backfill_step_s
        n = await back.poller.backfill(step)
        assert n > 0, "the plots start empty although Prometheus holds the pod's past"
        got = _backfilled(back.history, "MAIN", reopened)
        # the plots hold the minute before the reopen, not only what it polls from now
        assert min(t for pts in got.values() for t, _ in pts) < reopened - 30
        (slot,) = (await back.poller.poll()).slots
        assert slot.served_model_name == "model-1" and slot.figures is not None
        assert slot.figures.cache.gpu_memory_utilization == 0.7  # type: ignore[union-attr]
    finally:
        await back.poller.aclose()
