"""One poll for many viewers (issue 32, item 6): four web wall sessions — four pollers,
each with its own client, as four browser tabs' ``pod-console wall`` processes have —
polling a counting slot server through the wall's scrape relay cost each slot one scrape
per refresh; without the relay, four. A refused slot reads the same in every tab from
one refused connect; the relay answers to its token only."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from aiohttp import web

from console.sources.collect.http import RELAY_ENV, HttpClient, relay_from_env
from console.sources.collect.poller import DeploymentPoller
from console.sources.collect.targets import targets_for
from console.ui.web_relay import ScrapeRelay, max_age_for
from pod_agent.profiles import load_profile
from tests.conftest import FIXTURES, PROFILES

REFRESH_S = 2.0
TABS = 4
REFRESHES = 5
METRICS = (FIXTURES / "vllm-0.32.0-cpu" / "ngram" / "metrics-specdecode-idle.txt")


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


async def slot_server(hits: Counter[str], models: dict[int, str]) -> tuple[web.AppRunner,
                                                                           dict[str, int]]:
    """One loopback server answering as every slot (one port each), counting requests
    per (port, path)."""
    text = METRICS.read_text()

    def app_for(port_name: str, model: str) -> web.Application:
        async def metrics(request: web.Request) -> web.Response:
            hits[f"{port_name} /metrics"] += 1
            return web.Response(text=text.replace("tiny-main", model),
                                content_type="text/plain")

        async def health(request: web.Request) -> web.Response:
            hits[f"{port_name} /health"] += 1
            return web.Response(text="")

        async def v1_models(request: web.Request) -> web.Response:
            hits[f"{port_name} /v1/models"] += 1
            return web.json_response({"data": [{"id": model}]})

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/health", health)
        app.router.add_get("/v1/models", v1_models)
        return app

    runners = []
    ports: dict[str, int] = {}
    for port, model in models.items():
        runner = web.AppRunner(app_for(str(port), model), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        ports[str(port)] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        runners.append(runner)

    class All:
        async def cleanup(self) -> None:
            for r in runners:
                await r.cleanup()
    return All(), ports  # type: ignore[return-value]


async def tabs_polling(tmp_path: Path, relay: ScrapeRelay | None, clock: Clock,
                       down: str | None = None) -> tuple[Counter[str], list, dict[str, int]]:
    profile = load_profile(PROFILES / "10-rtx6000-2x.yaml")
    base = targets_for(profile, "127.0.0.1")
    hits: Counter[str] = Counter()
    server, ports = await slot_server(hits, {t.port: t.served_model_name for t in base
                                             if t.slot != down})
    # each slot at its own port of the counting server; the one ``down`` at a closed port
    port_map = {t.port: ports.get(str(t.port), 9) for t in base}
    targets = targets_for(profile, "127.0.0.1", port_map)
    pollers = [DeploymentPoller(profile.name, targets, timeout_s=2.0,
                                client=HttpClient(relay=(relay.url, relay.token)
                                                  if relay is not None else None))
               for _ in range(TABS)]
    snaps = []
    try:
        for _ in range(REFRESHES):
            # the tabs' timers fire within the same refresh, not at the same instant
            async def tab(p: DeploymentPoller, i: int) -> object:
                await asyncio.sleep(0.01 * i)
                return await p.poll()
            snaps.append(await asyncio.gather(*(tab(p, i) for i, p in enumerate(pollers))))
            clock.t += REFRESH_S
    finally:
        for p in pollers:
            await p.aclose()
            await p.client.aclose()
        await server.cleanup()
    return hits, snaps, {t.slot: t.port for t in base}


async def test_four_tabs_cost_each_slot_one_scrape_per_refresh(tmp_path: Path) -> None:
    clock = Clock()
    relay = ScrapeRelay(max_age_for(REFRESH_S), clock=clock)
    await relay.start()
    try:
        hits, snaps, ports = await tabs_polling(tmp_path, relay, clock)
    finally:
        await relay.aclose()
    for slot, port in ports.items():
        assert hits[f"{port} /metrics"] == REFRESHES, (slot, hits)
        assert hits[f"{port} /health"] == REFRESHES
    assert relay.asked >= TABS * REFRESHES * 2 * 3 - 1  # 3 GETs per slot per tab
    # every tab shows the same slots from the one scrape
    for round_ in snaps:
        seen = {tuple((s.slot, s.health, s.served_model_name) for s in snap.slots)
                for snap in round_}
        assert len(seen) == 1 and all(h == "up" for _, h, _ in next(iter(seen)))


async def test_without_the_relay_each_tab_scrapes(tmp_path: Path) -> None:
    hits, _, ports = await tabs_polling(tmp_path, None, Clock())
    for port in ports.values():
        assert hits[f"{port} /metrics"] == TABS * REFRESHES


async def test_a_refused_slot_reads_the_same_in_every_tab(tmp_path: Path) -> None:
    clock = Clock()
    relay = ScrapeRelay(max_age_for(REFRESH_S), clock=clock)
    await relay.start()
    try:
        _, snaps, _ = await tabs_polling(tmp_path, relay, clock, down="Q27")
    finally:
        await relay.aclose()
    for round_ in snaps:
        q27 = [next(s for s in snap.slots if s.slot == "Q27") for snap in round_]
        assert {(s.health, s.health_detail) for s in q27} == {("down", "connection refused")}
    # one connect per refresh per URL, not one per tab
    assert relay.upstream <= REFRESHES * 2 * 3


async def test_the_relay_answers_its_token_only() -> None:
    relay = ScrapeRelay(1.0)
    await relay.start()
    client = HttpClient(relay=None)
    try:
        r = await client.get(f"{relay.url}/get", params={"url": "http://127.0.0.1:9/x"},
                             timeout=5)
        assert r.status_code == 403
        r = await client.get(f"{relay.url}/get", params={"url": "file:///etc/passwd"},
                             timeout=5, headers={"X-Relay-Token": relay.token})
        assert r.status_code == 400
        assert relay.upstream == 0
    finally:
        await client.aclose()
        await relay.aclose()


def test_the_sessions_find_the_relay_in_their_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RELAY_ENV, "http://127.0.0.1:5555 sekrit")
    assert relay_from_env() == ("http://127.0.0.1:5555", "sekrit")
    assert HttpClient().relay == ("http://127.0.0.1:5555", "sekrit")
    assert HttpClient(relay=None).relay is None
    monkeypatch.delenv(RELAY_ENV)
    assert HttpClient().relay is None
