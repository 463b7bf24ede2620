"""Prometheus as the way to scale: two pods of two slots each behind a per-site
Prometheus (scraping the targets ``profile render`` writes), and a global Prometheus
federating it. The console's figures for every slot of every pod come from one fixed set
of queries, and read the same through the global server as through the site's — and as
the one-pod queries through the site."""

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
from msgspec import field

from console.config.render import PodAddress, render_targets
from console.sources.collect.http import HttpClient
from console.sources.collect.promql import (
    PromClient,
    fetch_figures,
    fetch_fleet,
    figure_queries,
)
from pod_agent.profiles import load_profile
from tests.conftest import REPO
from tests.support import procs, prometheus_server

PODS = ("pod-east", "pod-west")
SLOTS = {"FLASH": "flash", "Q27": "q27"}


def _profile(d: Path) -> Path:
    path = d / "10-fleet.yaml"
    path.write_text("""
gpu_type_ids: [NVIDIA H200]
image: vllm/vllm-openai:v0.32.0
slots:
  FLASH:
    served_model_name: flash
    hf_repo_id: org/flash
    port: 8881
    gpus: [0]
    gpu_util: 0.5
    max_model_len: 8192
    speculative: {method: mtp, num_speculative_tokens: 3}
  Q27:
    served_model_name: q27
    hf_repo_id: org/q27
    port: 8882
    gpus: [0]
    gpu_util: 0.3
    max_model_len: 8192
""")
    return path


def _engine(d: Path, name: str, port: int, seed: int, spec: bool) -> object:
    env = dict(os.environ, PYTHONPATH=str(REPO), DEMO_STARTUP_S="0.1", DEMO_RATE="4",
               DEMO_SEED=str(seed))
    env.pop("DEMO_FAULTS", None)
    argv = [sys.executable, "-m", "console.demo.fake_vllm", "serve", name,
            "--served-model-name", name, "--port", str(port)]
    if spec:
        argv += ["--speculative-config", json.dumps({"method": "mtp",
                                                     "num_speculative_tokens": 3})]
    proc = procs.start(argv, d / f"engine-{port}.log", env=env)
    procs.wait_http(f"http://127.0.0.1:{port}/health", 60, proc, d / f"engine-{port}.log")
    return proc


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Iterator[SimpleNamespace]:
    if not prometheus_server.available():
        if os.environ.get("CI"):
            pytest.fail("prometheus (Debian package) is missing")
        pytest.skip("prometheus is not installed")
    root = tmp_path_factory.mktemp("fleet")
    prof = load_profile(_profile(root))
    engines, groups = [], []
    try:
        for i, pod in enumerate(PODS):
            # each pod's slots on ports of their own here (on RunPod: the same pod ports
            # behind each pod's own address)
            ports = {8881: procs.free_port(), 8882: procs.free_port()}
            for j, (slot, name) in enumerate(SLOTS.items()):
                port = ports[prof.slots[slot].port]
                engines.append(_engine(root, name, port, 10 * i + j, slot == "FLASH"))
            groups += json.loads(render_targets(prof, "fleet", PodAddress(
                host="127.0.0.1", pod_id=pod, port_map=ports)))
        (root / "targets.json").write_text(json.dumps(groups))
        site = prometheus_server.PrometheusServer(root / "site", [], scrape_interval_s=1.0,
                                                  file_sd=root / "targets.json")
        # federating four times per site scrape: every site sample reaches the global
        # server, with its timestamp, so both hold the same points
        glob = prometheus_server.PrometheusServer(root / "global", [],
                                                  scrape_interval_s=0.25,
                                                  federate=f"127.0.0.1:{site.port}")
        site.start()
        try:
            glob.start()
            try:
                yield SimpleNamespace(root=root, site=site, glob=glob)
            finally:
                glob.stop()
        finally:
            site.stop()
    finally:
        for p in engines:
            procs.stop(p)  # type: ignore[arg-type]


def _wait_for_history(s: SimpleNamespace, seconds: int) -> None:
    """Until the global server holds ``seconds`` of every slot's samples (a window's
    worth, and then some: the figures are read a few seconds in the past)."""
    deadline = time.monotonic() + 180
    q = f'min(count_over_time(vllm:num_requests_running{{pod!=""}}[{seconds}s]))'
    n = 0
    while time.monotonic() < deadline:
        res = s.glob.query(q)
        n = int(float(res[0]["value"][1])) if res else 0
        if n >= seconds - 2 and len(s.glob.query('vllm:num_requests_running{pod!=""}')) == 4:
            return
        time.sleep(1)
    raise AssertionError(f"the global Prometheus holds {n} samples, not {seconds} s worth")


class Counting(PromClient, frozen=True):
    queries: list[str] = field(default_factory=list)

    async def query(self, expr, at=None):  # type: ignore[no-untyped-def]
        self.queries.append(expr)
        return await super().query(expr, at)


async def _fleet(url: str, at: float, pods=None):
    client = HttpClient()
    try:
        prom = Counting(url, client, 10.0)
        figs, kv = await fetch_fleet(prom, 30.0, pods, at)
        return figs, kv, prom.queries
    finally:
        await client.aclose()


def test_every_slot_of_every_pod_reads_the_same_through_the_global_server(fleet) -> None:
    _wait_for_history(fleet, 40)
    at = time.time() - 4  # a moment both servers hold whole (federation lags < 1 s)
    site, kv_site, q_site = asyncio.run(_fleet(fleet.site.url, at))
    glob, kv_glob, q_glob = asyncio.run(_fleet(fleet.glob.url, at))
    want = {(p, s) for p in PODS for s in SLOTS}
    assert set(site) == want and set(glob) == want
    # one fixed set of queries for the whole fleet, whatever its size
    assert len(q_site) == len(q_glob) == len(figure_queries(30.0))
    for key in sorted(want):
        a, b = site[key], glob[key]
        assert a.model_name == b.model_name == SLOTS[key[1]]
        assert a.values == b.values, key
        assert a.per_position == b.per_position and a.requests_by_reason == \
            b.requests_by_reason
        assert a.cache == b.cache and a.cache is not None
        assert kv_site[key] == kv_glob[key]
        # real figures, not empty ones
        assert a.values["ttft_p95_s"] is not None and a.values["generation_tps"] > 0
    assert site[("pod-east", "FLASH")].values["acceptance_rate"] > 0
    assert site[("pod-east", "Q27")].spec is False
    # the one-pod queries the console makes today read the same numbers
    for pod in PODS:
        one, _ = asyncio.run(_one_pod(fleet.site.url, pod, at))
        for slot, model in SLOTS.items():
            assert one[model].values == site[(pod, slot)].values, (pod, slot)
    # naming pods narrows the same queries
    some, _, q_some = asyncio.run(_fleet(fleet.glob.url, at, ["pod-west"]))
    assert set(some) == {("pod-west", s) for s in SLOTS} and len(q_some) == len(q_glob)
    assert all(some[k].values == glob[k].values for k in some)


async def _one_pod(url: str, pod: str, at: float):
    client = HttpClient()
    try:
        return await fetch_figures(PromClient(url, client, 10.0), 30.0, f'{{pod="{pod}"}}',
                                   at)
    finally:
        await client.aclose()
