"""The demo's simulated LiteLLM (``console/demo/fake_litellm.py``) speaks the real proxy's
exposition: every family the gateway source reads carries the label names of the real
LiteLLM 1.100 capture (``tests/fixtures/litellm_metrics.txt``), and the collector reads
its deployments, cooldown and users as it reads the real proxy's."""

from __future__ import annotations

import datetime as dt
import time

from console.config.settings import GatewaySettings
from console.demo.fake_litellm import COOLDOWN_S, Deployment, Gateway
from console.sources.collect.exposition import parse
from console.sources.collect.gateway import FAMILIES, GatewayCollector
from tests.conftest import FIXTURES

CAPTURE = parse((FIXTURES / "litellm_metrics.txt").read_text(), FAMILIES)
SKIP = {"client_ip", "user_agent", "service_tier", "route", "status_code"}
"""Labels of the real proxy that say how a request came (its client, its route): the
demo's requests have none to tell, and the console reads none of them."""


def _labels(exp, name: str) -> set[frozenset[str]]:  # type: ignore[no-untyped-def]
    return {frozenset(k for k, _ in labels) - SKIP for labels in exp.series(name)}


def _gateway() -> Gateway:
    gw = Gateway([Deployment("FLASH", "qwen3.8-flash-next", 9),
                  Deployment("Q27", "qwen3.8-27b", 10)], {"internal-sub": "qwen3.8-27b"},
                 None, seed=3, rate=1.0)
    now = time.time()
    for who in ("alice", "bob"):
        gw._count(gw.deps["FLASH"], who, 300, 0.8)
        gw._count(gw.deps["Q27"], who, 200, 0.5)
    gw.deps["Q27"].cooled_until = now + COOLDOWN_S
    gw._fail(gw.deps["Q27"], "bob", "500", now)
    return gw


def test_every_family_read_has_the_real_proxys_labels() -> None:
    ours = parse(_gateway().exposition(), FAMILIES)
    compared = 0
    for name in sorted(FAMILIES):
        real = _labels(CAPTURE, name)
        if not real or name == "process_start_time_seconds":
            continue
        assert name in ours.names(), name
        assert _labels(ours, name) <= real, (name, _labels(ours, name), real)
        compared += 1
    assert compared >= 10


def test_the_collector_reads_the_demo_gateway() -> None:
    gw = _gateway()
    col = GatewayCollector("http://127.0.0.1:1", GatewaySettings(cooldown_s=10), 60.0, 1.0,
                           zone=dt.UTC)
    now = time.time()
    col.read(parse(gw.exposition(), FAMILIES), now - 2)
    gw._fail(gw.deps["Q27"], "alice", "500", now + 5)  # a cooldown again, a second on
    gw._count(gw.deps["FLASH"], "alice", 100, 0.4)
    snap = col.read(parse(gw.exposition(), FAMILIES), now)
    dep = {d.model_id: d for d in snap.deployments}
    assert dep["Q27"].status == "cooldown" and dep["Q27"].group == "qwen3.8-27b"
    assert dep["FLASH"].status == "healthy" and dep["FLASH"].api_base == "http://127.0.0.1:9/v1"
    assert dep["Q27"].figure("errors_5xx") == 1.0
    assert (snap.total.get("fallbacks_ok") or 0) >= 1
    assert {u.name for u in snap.users} == {"alice", "bob"}
    assert gw.route("internal-sub") is gw.deps["Q27"] and gw.route("nope") is None
