"""A gateway cooldown and what it explains reach the real Alertmanager as ONE alert
(issue 43, "Noise"): the cooldown, its fallbacks and 5xx listed in its description; no
``GatewayFallbacksRising``/``Gateway5xxHigh`` of their own; its per-alert
acknowledgement (enter in ``A``) is one silence on the cooldown's labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from console.config.settings import AlertTiming, GatewaySettings
from console.sources.collect.http import HttpClient
from tests.integration.test_alertmanager_delivery import (  # noqa: F401 (fixtures)
    am,
    am_alerts,
    hook,
    notifications,
    on,
    poll_until,
)
from tests.session.test_alert_groups_delivery import COOLDOWN, GROUP, bumped
from tests.session.test_gateway_session import CAPTURE, _gateway
from tests.support.alertmanager_server import AlertmanagerServer
from tests.support.hook_receiver import HookReceiver

pytestmark = pytest.mark.realtime


async def test_a_cooldown_is_one_alertmanager_alert_and_one_silence(
        tmp_path: Path, am: AlertmanagerServer, hook: HookReceiver,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GW_AM_GROUPS_KEY", "gw-key")
    pages: dict[str, Any] = {"metrics": CAPTURE}
    server, url = await _gateway(pages)
    w = on(tmp_path, am, gateway_url=url,
           gateway=GatewaySettings(key_env="GW_AM_GROUPS_KEY", cooldown_s=600,
                                   error_5xx_ratio=0.05),
           alerts=AlertTiming(down_for_s=1, for_s=1, hold_s=0))
    w.slots.client = HttpClient()  # type: ignore[attr-defined]
    try:
        await poll_until([w], lambda: w.session.state().gateway is not None, "a reading")
        pages["metrics"] = bumped(CAPTURE, **COOLDOWN)
        await poll_until([w], lambda: {a.key for a in w.session.alerts.firing()} >= GROUP,
                         "the cooldown and its consequences firing")
        await poll_until([w], lambda: bool(notifications(hook,
                                                         "GatewayDeploymentCooldown")),
                         "the cooldown's notification")
        # (named Gateway*: a planned stop's inhibit rule covers it, as every gateway alert)
        names = {a["labels"]["alertname"] for a in am.get("/api/v2/alerts")}
        assert names == {"GatewayDeploymentCooldown", "Watchdog"}, names
        (alert,) = am_alerts(am, "GatewayDeploymentCooldown")
        desc = alert["annotations"]["description"]
        assert "fallbacks rising" in desc and "5xx" in desc, desc
        # the acknowledgement of the group (its parent's row) is one silence, on it
        w.session.acknowledge("alice", "gw-cooldown:tiny-b")
        await w.session.settle()
        await poll_until([w], lambda: any(s["status"]["state"] == "active"
                                          for s in am.get("/api/v2/silences")), "a silence")
        (sil,) = [s for s in am.get("/api/v2/silences") if s["status"]["state"] == "active"]
        matchers = {m["name"]: m["value"] for m in sil["matchers"]}
        assert matchers["alertname"] == "GatewayDeploymentCooldown", matchers
        assert sil["createdBy"] == "alice"
        assert not notifications(hook, "GatewayFallbacksRising")
        assert not notifications(hook, "Gateway5xxHigh")
    finally:
        server.close()
        await server.wait_closed()
        await w.session.aclose()
