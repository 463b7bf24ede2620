"""The fleet at scale (``console/session/fleet.py``): a bounded number of pods contacted
at once, and nothing per context that grows with the fleet (the config read once, one
HTTP client, one provider client, a shared profiles directory read once).

The pods here are fakes on loopback: one small HTTP server per context answering as its
vLLM slot, and one answering as RunPod's API for every pod. Each writes down which
context a request is for while it is being answered, so the most contexts in flight at
once is counted where the requests arrive. The fakes answer after a short pause, as a
real pod over a network does, so polls that are let run together do overlap.
(The wall time of ``pod-console fleet`` against the RunPod emulator: ``bench/fleet_bench.py``.)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from console.sources.provider.emulator import EmulatorState
from tests.support.emulated_pods import write_profiles

PORT = 8881
N = 24
CAP = 4
KEY = "rp-fleet-key"
ANSWER_AFTER_S = 0.03
"""How long a fake pod takes to answer (a network's round trip, not a wait for a condition)."""


@dataclass
class Pods:
    """In-flight bookkeeping of the fake pods, by context."""

    in_flight: dict[str, int] = field(default_factory=dict)
    most: int = 0
    requests: int = 0
    completions: int = 0
    """Chat completions the slots answered: the consoles' completion probes."""
    servers: list[asyncio.AbstractServer] = field(default_factory=list)

    async def serving(self, ctx: str, answer: Callable[[], Awaitable[bytes]]) -> bytes:
        self.requests += 1
        self.in_flight[ctx] = self.in_flight.get(ctx, 0) + 1
        self.most = max(self.most, sum(1 for v in self.in_flight.values() if v))
        try:
            await asyncio.sleep(ANSWER_AFTER_S)
            return await answer()
        finally:
            self.in_flight[ctx] -= 1


def _response(body: bytes, ctype: str = "application/json") -> bytes:
    return (f"HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}"
            f"\r\n\r\n").encode() + body


async def _serve(pods: Pods, route: Callable[[str], tuple[str, bytes]]) -> int:
    """A keep-alive HTTP/1.1 server; ``route(path)``: the context it is for and the answer."""

    async def on_conn(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await r.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.lower().split(b"\r\n"):
                    if line.startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                if length:
                    await r.readexactly(length)
                path = head.split(b" ", 2)[1].decode()
                ctx, body = route(path)
                pods.completions += path.startswith("/v1/chat/completions")

                async def answer(body: bytes = body) -> bytes:
                    return _response(body)

                w.write(await pods.serving(ctx, answer))
                await w.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            w.close()

    srv = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    pods.servers.append(srv)
    return int(srv.sockets[0].getsockname()[1])


def _slot(ctx: str) -> Callable[[str], tuple[str, bytes]]:
    def route(path: str) -> tuple[str, bytes]:
        if path.startswith("/v1/models"):
            return ctx, json.dumps({"object": "list", "data": [{"id": "model-0"}]}).encode()
        if path.startswith("/v1/chat/completions"):
            return ctx, json.dumps({"choices": [{"message": {"content": "OK"}}]}).encode()
        return ctx, b""  # /health, and an empty exposition

    return route


@pytest.fixture
async def fleet_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                      ) -> AsyncIterator[tuple[Path, Pods]]:
    for name in ("POD_CONSOLE_CONTEXT", "POD_CONSOLE_STATE_DIR", "POD_CONSOLE_CONFIG",
                 "POD_CONSOLE_PROMETHEUS_URL", "POD_CONSOLE_POD__MACHINE_ID"):
        monkeypatch.delenv(name, raising=False)
    pods = Pods()
    emu = EmulatorState()
    ids = {f"pod{i:03d}": f"c{i:02d}" for i in range(N)}
    records = {pid: emu._pod(pid, ctx, "vllm/vllm-openai:latest", "NVIDIA H100 NVL", 2,
                             "13.0") for pid, ctx in ids.items()}

    def api(path: str) -> tuple[str, bytes]:
        pid = path.rstrip("/").rsplit("/", 1)[-1]
        return ids.get(pid, "?"), json.dumps(records[pid]).encode()

    api_port = await _serve(pods, api)
    monkeypatch.setenv("RUNPOD_API_KEY", KEY)
    monkeypatch.setenv("RUNPOD_API_BASE", f"http://127.0.0.1:{api_port}/v2")
    profiles = write_profiles(tmp_path / "profiles", [PORT])
    lines = [f"profiles_dir: {profiles}", f"state_dir: {tmp_path / 'state'}", "refresh_s: 5",
             "contexts:"]
    for pid, ctx in ids.items():
        port = await _serve(pods, _slot(ctx))
        lines += [f"  {ctx}:", "    pod:", f"      machine_id: {pid}",
                  "      host: 127.0.0.1", f"      port_map: {{{PORT}: {port}}}"]
    cfg = tmp_path / "config.yaml"
    cfg.write_text("\n".join(lines) + "\n")
    try:
        yield cfg, pods
    finally:
        for srv in pods.servers:
            srv.close()


async def test_a_fleet_contacts_at_most_its_cap_of_pods_at_once(
        fleet_world: tuple[Path, Pods]) -> None:
    """Unbounded, every context's poll starts at once (24 pods in flight here) and, on a
    large fleet, their timeouts run out while they wait for the event loop."""
    from console.commands.fleet_cmd import _fleet
    from console.session.fleet import FleetCollector

    cfg, pods = fleet_world
    fleet = await asyncio.to_thread(FleetCollector, cfg, concurrency=CAP)
    try:
        snap = await fleet.poll()
        for m in fleet.members:  # the completion probes run beside the polls: bounded too
            await m.poller.probes_done()
        snap = await fleet.poll()
    finally:
        await fleet.aclose()
    assert [r.context for r in snap.rows] == [f"c{i:02d}" for i in range(N)]
    assert all(r.status == "RUNNING" and r.slots_up == 1 for r in snap.rows), snap.rows
    # per context and cycle: the pod's record, its slot's health, models and metrics
    assert pods.requests >= N * 2 * 4
    assert pods.most <= CAP, f"{pods.most} pods contacted at once, cap {CAP}"
    assert pods.most >= 2, "the polls ran one at a time: bounded, but not concurrent"

    # ``pod-console fleet`` goes through the same collector, at its default cap
    from console.session.fleet import CONCURRENCY

    pods.most = 0
    snap = await _fleet(cfg)
    assert all(r.slots_up == 1 for r in snap.rows)
    assert 2 <= pods.most <= CONCURRENCY < N


async def test_nothing_per_context_grows_with_the_fleet(fleet_world: tuple[Path, Pods],
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """N contexts: the config file read and parsed once (each context's settings built
    from that reading, not N parses of an N-context file), their shared profiles directory
    read once, one HTTP client for every slot and one API client for every pod."""
    import console.config.settings as settings_mod
    import console.session.deployment as deployment_mod
    from console.session.fleet import FleetCollector

    cfg, _ = fleet_world
    reads: list[Path] = []
    profile_reads: list[Path] = []
    real_read, real_profiles = settings_mod.read_config, deployment_mod.load_profiles

    def read_config(path: Path, explicit: bool):  # type: ignore[no-untyped-def]
        reads.append(path)
        return real_read(path, explicit)

    def load_profiles(d: Path):  # type: ignore[no-untyped-def]
        profile_reads.append(d)
        return real_profiles(d)

    monkeypatch.setattr(settings_mod, "read_config", read_config)
    monkeypatch.setattr(deployment_mod, "load_profiles", load_profiles)
    fleet = await asyncio.to_thread(FleetCollector, cfg)
    try:
        assert len(fleet.members) == N and all(m.deployment for m in fleet.members)
        assert len(reads) == 1 and len(profile_reads) == 1, (reads, profile_reads)
        assert len({id(m.poller.client) for m in fleet.members}) == 1
        assert len({id(m.provider) for m in fleet.members}) == 1
        assert fleet.members[0].provider is not None
        # each context still its own: its pod, its state directory
        assert len({m.settings.state_dir for m in fleet.members}) == N
        assert len({m.deployment.machine_id for m in fleet.members}) == N
        await fleet.poll()
    finally:
        await fleet.aclose()
    # the shared clients are closed once, by the fleet (not by the first poller)
    assert fleet.members[0].poller._client is not None


async def test_an_idle_pod_of_the_fleet_is_not_probed(fleet_world: tuple[Path, Pods],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A completion probe is a request: on pods that count idle time toward their stop,
    the fleet's would keep every pod nobody uses running (``pod_stop.probe_hold``)."""
    from msgspec.structs import replace

    from console.model.snapshot import StopPlan
    from console.session.fleet import FleetCollector
    from console.sources.collect.pod import PodCollector

    cfg, pods = fleet_world
    idle = StopPlan(next_reason="idle", idle_s=600.0, idle_after_s=1800.0, busy=False)
    busy: set[str] = set()
    real_poll = PodCollector.poll

    async def poll(self: PodCollector):  # type: ignore[no-untyped-def]
        snap = await real_poll(self)
        return replace(snap, stop_plan=replace(idle, busy=snap.pod_id in busy))

    monkeypatch.setattr(PodCollector, "poll", poll)
    fleet = await asyncio.to_thread(FleetCollector, cfg, concurrency=CAP)
    try:
        for _ in range(2):
            snap = await fleet.poll()
            for m in fleet.members:
                await m.poller.probes_done()
        assert all(r.status == "RUNNING" and r.slots_up == 1 for r in snap.rows)
        assert pods.completions == 0
        busy.add(fleet.members[0].deployment.machine_id)  # one pod is in use
        for _ in range(2):
            await fleet.poll()
            for m in fleet.members:
                await m.poller.probes_done()
        assert pods.completions == 1
    finally:
        await fleet.aclose()
