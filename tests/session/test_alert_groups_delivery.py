"""One gateway cooldown is one notification (issue 43, "Noise"): a session reading a
gateway (the real LiteLLM capture served on loopback, as in ``test_gateway_session``)
whose deployment cools down while its fallbacks and 5xx rise posts ONE raise to the
webhook, the consequences in its text; the alert book still shows all four, under
their parent; a per-alert acknowledgement of the parent covers the group."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from console.config.settings import AlertTiming, GatewaySettings
from console.model.alerts import grouped
from console.session.session import POD_POLL_S
from console.sources.collect.http import HttpClient
from tests.session.test_gateway_session import CAPTURE, _gateway
from tests.session.world import World, world
from tests.support.hook_receiver import HookReceiver

T0 = 1_800_000_000.0
LIMIT_S = 30.0
GROUP = {"gw-cooldown:tiny-b", "gw-fallbacks", "gw-5xx:tiny", "gw-5xx:the gateway"}


@pytest.fixture
def hook() -> Iterator[HookReceiver]:
    r = HookReceiver()
    yield r
    r.close()


def bumped(page: str, **by: float) -> str:
    """The capture with counters moved: ``{name: +n}`` for tiny-b's series of each."""
    for name, n in by.items():
        page = re.sub(rf'^({name}\{{[^}}]*\}}) (\S+)$',
                      lambda m, n=n, every="fallback" in name: (
                          f"{m.group(1)} {float(m.group(2)) + n}"
                          if every or 'model_id="tiny-b"' in m.group(1) else m.group(0)),
                      page, flags=re.M)
    return page


COOLDOWN = {"litellm_deployment_cooled_down_total": 1,
            "litellm_deployment_failure_responses_total": 6,
            "litellm_deployment_total_requests_total": 6,
            "litellm_deployment_successful_fallbacks_total": 6}


async def until(w: World, cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + LIMIT_S
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        w.clock.advance(1)
        assert await w.session.poll()
        await w.session.settle()
        await asyncio.sleep(0.05)  # this loop's cadence (a console's refresh), not a wait


def raises(hook: HookReceiver) -> list[str]:
    with hook.cond:
        return [str(b.get("text")) for _, b in hook.posts
                if isinstance(b, dict) and "cleared" not in str(b.get("text"))]


async def test_one_cooldown_one_notification_its_consequences_in_it(
        tmp_path: Path, hook: HookReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GW_GROUPS_KEY", "gw-key")
    pages: dict[str, Any] = {"metrics": CAPTURE}
    server, url = await _gateway(pages)
    w = world(tmp_path, T0, gateway_url=url, run_blocking=asyncio.to_thread,
              webhook_url=SecretStr(hook.url),
              gateway=GatewaySettings(key_env="GW_GROUPS_KEY", cooldown_s=600,
                                      error_5xx_ratio=0.05),
              alerts=AlertTiming(down_for_s=2, for_s=2, hold_s=0))
    w.slots.client = HttpClient()  # type: ignore[attr-defined]
    try:
        assert await w.session.poll()
        pages["metrics"] = bumped(CAPTURE, **COOLDOWN)
        await until(w, lambda: {a.key for a in w.session.alerts.firing()} >= GROUP,
                    "the cooldown and its consequences firing")
        await until(w, lambda: bool(raises(hook)), "the webhook's raise")
        # a few polls more: nothing else is posted for the group
        for _ in range(3):
            w.clock.advance(POD_POLL_S)
            assert await w.session.poll()
            await w.session.settle()
        (text,) = raises(hook)
        assert "tiny/tiny-b COOLDOWN" in text and "fallbacks rising" in text, text
        assert "5xx" in text, text
        # on screen: the four, one group
        st = w.session.state()
        ((parent, kids),) = [(p, k) for p, k in grouped(st.alerts) if p.state == "firing"
                             and p.key.startswith("gw-")]
        assert parent.key == "gw-cooldown:tiny-b" and {k.key for k in kids} == GROUP - {
            parent.key}
        # the parent's acknowledgement (enter on its row in A) covers the group alone
        titles = w.session.acknowledge("alice", "gw-cooldown:tiny-b")
        assert len(titles) == 4
        assert all(a.acked_by == "alice" for a in w.session.alerts.firing()
                   if a.key in GROUP)
    finally:
        server.close()
        await server.wait_closed()
