"""One composition root per deployment (``console/session/deployment.py``): where the
deployment runs has one owner, a pod switch is one call, and every part follows it.

Prometheus here is an in-process PromQL HTTP server on loopback that answers each query
with the series of the pod its selector names, and writes every query down: a query
that still asks for the old pod after a switch is seen, and would read the old pod's
numbers. (The same transitions against the real Prometheus: ``tests/integration/
test_pod_switch.py``.)"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from console.config.settings import ConfigError, Settings, load_settings
from console.sources.collect.pod import PodCollector
from tests.support import procs
from tests.support.emulated_pods import write_profiles

OLD, NEW = "pod-old", "pod-new"
PORT = 8881
"""The slot's port on the pod (both profiles of ``write_profiles``)."""


@dataclass(frozen=True)
class PodSeries:
    model: str
    """The model its slot serves (the old pod runs kind-a, the new one kind-b)."""
    util: str
    """``gpu_memory_utilization`` on its ``vllm:cache_config_info``: tells the pods apart."""
    past: float
    """The value of every point of its range queries (the plots' backfill)."""


PODS = {OLD: PodSeries("model-0", "0.5", 0.11), NEW: PodSeries("model-1", "0.7", 0.77)}


@dataclass
class FakePrometheus:
    """Prometheus's HTTP API, answering from ``PODS`` by the query's ``pod="…"``."""

    queries: list[str] = field(default_factory=list)
    url: str = ""
    server: asyncio.AbstractServer | None = None

    def answer(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        q = params.get("query", "")
        self.queries.append(q)
        pod = re.findall(r'pod="([^"]*)"', q)
        series = PODS.get(pod[0]) if pod else None
        result: list[dict[str, Any]] = []
        if series is not None and path.endswith("/query_range"):
            start, end = float(params["start"]), float(params["end"])
            result = [{"metric": {"model_name": series.model},
                       "values": [[start, str(series.past)], [end, str(series.past)]]}]
        elif series is not None and "DCGM_FI_DEV" in q:
            result = [{"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0",
                                  "modelName": f"GPU of {pod[0]}", "pod": pod[0]},
                       "value": [0, "42"]}]
        elif series is not None and q.startswith("vllm:cache_config_info"):
            result = [{"metric": {"model_name": series.model, "num_gpu_blocks": "100",
                                  "block_size": "16", "gpu_memory_utilization": series.util},
                       "value": [0, "1"]}]
        elif series is not None:
            result = [{"metric": {"model_name": series.model}, "value": [0, "0.25"]}]
        kind = "matrix" if path.endswith("/query_range") else "vector"
        return {"status": "success", "data": {"resultType": kind, "result": result}}

    async def _conn(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await r.readuntil(b"\r\n\r\n")
                target = head.split(b"\r\n", 1)[0].split(b" ")[1].decode()
                url = urlsplit(target)
                params = {k: v[0] for k, v in parse_qs(url.query).items()}
                body = json.dumps(self.answer(url.path, params)).encode()
                w.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                await w.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            w.close()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    def asked_for(self, since: int = 0) -> set[str]:
        """The pods the queries from ``since`` on named."""
        return {p for q in self.queries[since:] for p in re.findall(r'pod="([^"]*)"', q)}


@pytest.fixture
async def prom() -> AsyncIterator[FakePrometheus]:
    srv = FakePrometheus()
    await srv.start()
    try:
        yield srv
    finally:
        assert srv.server is not None
        srv.server.close()


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("POD_CONSOLE_CONTEXT", "POD_CONSOLE_STATE_DIR", "RUNPOD_API_KEY",
                 "POD_CONSOLE_POD__RUNPOD_ID", "POD_CONSOLE_POD__MACHINE_ID"):
        monkeypatch.delenv(name, raising=False)


def _config(tmp_path: Path, body: str) -> Path:
    # refresh 5 s: each request may take up to 4 s (``defaults.request_timeout_s``). These
    # tests are about which pod a query names, not about time; at 1 s (0.8 s a request) a
    # loaded CI machine once let a Prometheus answer from this process's own server time
    # out, and the slot fell back to its (closed) direct port
    profiles = write_profiles(tmp_path / "profiles", [PORT])
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {profiles}\nstate_dir: {tmp_path / 'state'}\n"
                   f"refresh_s: 5\n{body}")
    return cfg


def _closed_port() -> int:
    return procs.free_port()  # nothing listens there: the slots' probes fail at once


def _settings(tmp_path: Path, prom: FakePrometheus, extra: str = "") -> Settings:
    return load_settings(_config(tmp_path, (
        f"prometheus_url: {prom.url}\n"
        f"pod:\n  machine_id: {OLD}\n  host: 127.0.0.1\n"
        f"  port_map: {{{PORT}: {_closed_port()}}}\n{extra}")))


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


# -- the transition: fallback with Prometheus configured ---------------------------------
async def test_after_a_pod_switch_every_promql_query_asks_for_the_new_pod(
        tmp_path: Path, prom: FakePrometheus, env: None) -> None:
    from console.config.render import PodAddress
    from console.operations.provision import ProvisionResult
    from console.session.context import make_context, switch_pod
    from console.sources.provider.base import Machine

    clock = Clock(1_000_000.0)
    # a wall: no agent, so the GPU line comes through Prometheus too
    ctx = make_context(_settings(tmp_path, prom), read_only=True, clock=clock)
    dep = ctx.deployment
    assert dep is not None and ctx.pod_collector is not None
    poller, pods = ctx.poller, ctx.pod_collector
    snap = await poller.poll()
    (slot,) = snap.slots
    assert slot.source == "prometheus" and slot.served_model_name == "model-0"
    assert slot.figures is not None and slot.figures.cache is not None
    assert slot.figures.cache.gpu_memory_utilization == 0.5
    assert (await pods.poll()).gpus.gpus[0].name == f"GPU of {OLD}"  # type: ignore[union-attr]
    assert prom.asked_for() == {OLD}

    # ``f`` brought up the new pod on the next profile: what the provisioner hands over
    new_port = _closed_port()
    kind_b = next(lp for lp in dep.profiles if lp.name == "kind-b")
    res = ProvisionResult(Machine(NEW, status="RUNNING"), kind_b,
                          PodAddress("127.0.0.1", NEW, port_map={PORT: new_port}), [])
    mark = len(prom.queries)
    clock.t += 30
    switch_pod(dep, res)
    snap = await poller.poll()
    (slot,) = snap.slots
    assert prom.asked_for(mark) == {NEW}, prom.queries[mark:]
    assert slot.served_model_name == "model-1" and slot.url.endswith(f":{new_port}")
    assert slot.figures is not None and slot.figures.cache is not None
    assert slot.figures.cache.gpu_memory_utilization == 0.7  # the new pod's series
    assert snap.fetched_at == clock.t
    pod = await pods.poll()
    assert pod.pod_id == NEW and pod.gpus is not None
    assert pod.gpus.gpus[0].name == f"GPU of {NEW}"
    # the console's own words follow the same call: one poller, one collector, all moved
    assert ctx.poller is poller and ctx.profile_name == "kind-b"
    assert ctx.settings.pod.machine_id == NEW and ctx.settings.profile == "kind-b"

    # the plots fill from the new pod's past, up to the injected clock
    mark = len(prom.queries)
    assert await poller.backfill(step_s=dep.backfill_step_s) > 0
    assert prom.asked_for(mark) == {NEW}
    points = list(ctx.history.series("MAIN", "kv_cache_usage").points)
    past = [v for t, v in points if t < 1_000_000.0]  # before the console's first poll
    assert past and set(past) == {PODS[NEW].past}, points
    assert points[-1][0] <= clock.t


async def test_a_poll_in_flight_at_the_switch_leaves_nothing_of_the_old_pod(
        tmp_path: Path, prom: FakePrometheus, env: None) -> None:
    from console.session.context import make_context

    ctx = make_context(_settings(tmp_path, prom), read_only=True, clock=Clock(5000.0))
    dep = ctx.deployment
    assert dep is not None
    kind_b = next(lp for lp in dep.profiles if lp.name == "kind-b")
    polling = asyncio.ensure_future(ctx.poller.poll())
    await asyncio.sleep(0)  # its queries are on their way, for the old pod
    dep.switch_pod(NEW, "127.0.0.1", {PORT: _closed_port()}, kind_b)
    await polling
    assert ctx.poller.last is None  # not the new pod's snapshot
    assert not ctx.history.series("MAIN", "kv_cache_usage").points
    snap = await ctx.poller.poll()
    assert snap.slots[0].figures is not None
    assert snap.slots[0].figures.cache.gpu_memory_utilization == 0.7  # type: ignore[union-attr]


async def test_the_gpu_source_reads_the_pod_its_settings_name_now(
        tmp_path: Path, prom: FakePrometheus, env: None) -> None:
    from console.sources.collect.gpu_metrics import from_settings
    from console.sources.collect.http import HttpClient

    settings = _settings(tmp_path, prom)
    client = HttpClient()
    try:
        gpu = from_settings(settings, client)
        assert gpu is not None
        assert (await gpu.fetch()).gpus[0].name == f"GPU of {OLD}"
        settings.pod.machine_id = NEW  # what a switch writes
        assert (await gpu.fetch()).gpus[0].name == f"GPU of {NEW}"
    finally:
        await client.aclose()


# -- the four call sites: one wiring ------------------------------------------------------
def _recording(monkeypatch: pytest.MonkeyPatch) -> list[PodCollector]:
    """Every pod collector that polls, as it was wired (the poll itself answers nothing:
    what is checked is what the call site built)."""
    from console.model.snapshot import PodSnapshot

    seen: list[PodCollector] = []

    async def poll(self: PodCollector) -> PodSnapshot:
        seen.append(self)
        return PodSnapshot(pod_id=self.pod_id)

    monkeypatch.setattr(PodCollector, "poll", poll)
    return seen


async def _context_site(cfg: Path) -> PodCollector:
    from console.commands.tui_cmd import load_validated
    from console.session.context import make_context

    ctx = make_context(load_validated(cfg, None))
    try:
        assert ctx.pod_collector is not None
        return ctx.pod_collector
    finally:
        await ctx.poller.aclose()


async def _status_site(cfg: Path, seen: list[PodCollector]) -> PodCollector:
    from console.commands.status_cmd import _snapshot

    await _snapshot(argparse.Namespace(config=cfg, sample=0.0, json=True))
    return seen[-1]


async def _bench_site(cfg: Path, seen: list[PodCollector]) -> PodCollector:
    from console.commands.tui_cmd import load_validated
    from console.commands.verify_cmd import _pod_facts

    await _pod_facts(load_validated(cfg, None))
    return seen[-1]


async def _fleet_site(cfg: Path, seen: list[PodCollector]) -> PodCollector:
    from console.session.fleet import FleetCollector

    fleet = await asyncio.to_thread(FleetCollector, cfg)
    try:
        await fleet.poll()
    finally:
        await fleet.aclose()
    return seen[-1]


@pytest.mark.parametrize("site", ["console", "status", "bench", "fleet"])
async def test_every_call_site_wires_the_same_parts(site: str, tmp_path: Path, env: None,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _recording(monkeypatch)
    agent_dir = "/workspace/agent-here"
    cfg = _config(tmp_path, (
        f"gpu_metrics_url: http://127.0.0.1:{_closed_port()}/metrics\n"
        f"pod:\n  machine_id: {OLD}\n  host: 127.0.0.1\n"
        f"  port_map: {{{PORT}: {_closed_port()}}}\n"
        f"  ssh_host: 127.0.0.1\n  ssh_port: {_closed_port()}\n  agent_dir: {agent_dir}\n"))
    sites: dict[str, Callable[[], Any]] = {
        "console": lambda: _context_site(cfg), "status": lambda: _status_site(cfg, seen),
        "bench": lambda: _bench_site(cfg, seen), "fleet": lambda: _fleet_site(cfg, seen)}
    pods: PodCollector = await sites[site]()
    assert pods.pod_id == OLD
    assert pods.gpu_metrics is not None and pods.gpu_metrics.configured, site
    assert pods.gpu_metrics.url is not None and pods.gpu_metrics.url.endswith("/metrics")
    assert pods.agent is not None and pods.agent.configured, site
    # today's profile as the agent on the pod reads it (check-host --profile)
    assert pods.agent.remote_profile == f"{agent_dir}/pkg/profiles/10-kind-a.yaml", site


# -- the fleet follows a pod that moved ---------------------------------------------------
async def test_the_fleet_follows_the_current_pod_a_switch_wrote(tmp_path: Path, env: None,
                                                               monkeypatch) -> None:
    from console.session.fleet import FleetCollector

    _recording(monkeypatch)
    cfg = _config(tmp_path, f"pod:\n  machine_id: {OLD}\n  host: 127.0.0.1\n"
                            f"  port_map: {{{PORT}: {_closed_port()}}}\n")
    fleet = await asyncio.to_thread(FleetCollector, cfg)
    try:
        assert [r.pod_id for r in (await fleet.poll()).rows] == [OLD]
        # what ``up``, or ``f`` in a console, writes when it adopts a pod
        state = tmp_path / "state"
        state.mkdir(exist_ok=True)
        (state / "current_pod.json").write_text(json.dumps({
            "pod_id": NEW, "profile": "kind-b", "host": "127.0.0.1",
            "port_map": {str(PORT): _closed_port()}}))
        (row,) = (await fleet.poll()).rows
        assert (row.pod_id, row.profile) == (NEW, "kind-b")
        member = fleet.members[0]
        assert member.poller.targets[0].served_model_name == "model-1"
        assert member.deployment.prom_selector == f'{{pod="{NEW}"}}'
    finally:
        await fleet.aclose()


# -- runpod_id → machine_id ---------------------------------------------------------------
def test_machine_id_and_its_old_name_runpod_id_both_work(tmp_path: Path, env: None,
                                                        monkeypatch) -> None:
    new = tmp_path / "new.yaml"
    new.write_text("pod:\n  machine_id: m-1\n  host: 10.0.0.1\n")
    old = tmp_path / "old.yaml"
    old.write_text("pod:\n  runpod_id: r-1\n")
    assert load_settings(new).pod.machine_id == "m-1"
    s = load_settings(old)
    assert s.pod.machine_id == "r-1"
    # the old name is accepted where a config is read, and nowhere else
    assert not hasattr(s.pod, "runpod_id")
    ctx = tmp_path / "ctx.yaml"
    ctx.write_text("pod: {runpod_id: top}\ncontexts:\n  a: {pod: {machine_id: ctx-a}}\n"
                   "  b: {pod: {runpod_id: ctx-b}}\n  c: {}\n")
    assert [load_settings(ctx, context=c).pod.machine_id for c in "abc"] == [
        "ctx-a", "ctx-b", "top"]

    # the environment: old and new names, and over the file's either way
    monkeypatch.setenv("POD_CONSOLE_POD__RUNPOD_ID", "env-old")
    assert load_settings(new).pod.machine_id == "env-old"
    assert load_settings(new).pod.host == "10.0.0.1"  # the rest of the section kept
    monkeypatch.delenv("POD_CONSOLE_POD__RUNPOD_ID")
    monkeypatch.setenv("POD_CONSOLE_POD__MACHINE_ID", "env-new")
    assert load_settings(old).pod.machine_id == "env-new"
    monkeypatch.setenv("POD_CONSOLE_POD__RUNPOD_ID", "env-other")
    with pytest.raises(ConfigError, match="POD_CONSOLE_POD__RUNPOD_ID is the old name of "
                                          "POD_CONSOLE_POD__MACHINE_ID"):
        load_settings(old)
    monkeypatch.delenv("POD_CONSOLE_POD__RUNPOD_ID")
    monkeypatch.delenv("POD_CONSOLE_POD__MACHINE_ID")

    # both names at once, disagreeing: which one was meant cannot be told
    both = tmp_path / "both.yaml"
    both.write_text("pod:\n  machine_id: m-1\n  runpod_id: r-1\n")
    with pytest.raises(ConfigError, match=r"both.yaml:3: pod: runpod_id is the old name "
                                          r"of machine_id"):
        load_settings(both)
    # a bad value under the old name is reported where the file says it
    bad = tmp_path / "bad.yaml"
    bad.write_text("refresh_s: 2\npod:\n  runpod_id: [1]\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:3: pod.runpod_id: "):
        load_settings(bad)
    # what a program writes back (the demo's config) uses the new name
    from console.config.settings import PodSettings

    assert PodSettings(runpod_id="p").model_dump(exclude_defaults=True) == {"machine_id": "p"}


def test_the_first_frames_reading_takes_either_name(tmp_path: Path, env: None) -> None:
    from console.session.boot import plan

    for key in ("machine_id", "runpod_id"):
        cfg = _config(tmp_path, f"pod:\n  {key}: abc\n")
        boot = plan(cfg)
        assert boot is not None and boot.prom_selector == '{pod="abc"}', key
        assert load_settings(cfg).pod.machine_id == "abc"
