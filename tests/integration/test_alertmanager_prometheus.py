"""Issue 43, "Done when": a slot dies with the real Prometheus running the rendered rules
*and* three console sessions sending to the real Alertmanager, which notifies a loopback
receiver: one notification for the group, and one resolved when it recovers.

Prometheus scrapes the slot's ``/metrics`` (a loopback exposition, target labels as
``profile render`` gives them) and evaluates ``render_rules``' SlotDown; the sessions
(a console, a wall, a ``record``: ``tests/session/world.py``) judge the same slot down.
Both send the same label set (the rendered rule aggregates by the labels the console
sends), so Alertmanager holds one alert and tells it once; Prometheus's own counter
says it did send."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from console.config.settings import AlertTiming, Settings
from console.sources import alert_rules
from pod_agent.profiles import load_profile
from tests.conftest import PROFILES
from tests.integration.test_alertmanager_delivery import (
    am_alerts,
    notifications,
    on,
    poll_until,
)
from tests.support import alertmanager_server, prometheus_server
from tests.support.alertmanager_server import AlertmanagerServer, fast_config
from tests.support.exposition_server import ExpositionServer
from tests.support.hook_receiver import HookReceiver
from tests.support.prometheus_server import PrometheusServer

pytestmark = pytest.mark.realtime

UP = "vllm:num_requests_running{model_name=\"q\"} 0\n"
BROKEN = "vllm:num_requests_running{{{ not an exposition\n"
"""A scrape that fails: ``up`` 0, as for a slot whose server died."""


@pytest.fixture
def hook() -> Iterator[HookReceiver]:
    r = HookReceiver()
    yield r
    r.close()


def _sent(prom: PrometheusServer) -> float:
    """Alerts Prometheus sent to Alertmanager (its own counter)."""
    text = httpx.get(prom.url + "/metrics", timeout=10).text
    got = re.findall(r"^prometheus_notifications_sent_total\{[^}]*\} (\S+)$", text, re.M)
    return sum(float(v) for v in got)


def _firing(prom: PrometheusServer) -> bool:
    """Whether Prometheus's SlotDown fires (its ``ALERTS`` series)."""
    return any(r["metric"].get("alertstate") == "firing"
               for r in prom.query('ALERTS{alertname="SlotDown"}'))


async def test_prometheus_and_three_sessions_one_notification_and_one_resolved(
        tmp_path: Path, hook: HookReceiver) -> None:
    alertmanager_server.require()
    if not prometheus_server.available():
        pytest.skip("prometheus not installed")
    am = AlertmanagerServer(tmp_path / "am", fast_config(hook.url))
    am.start()
    slot = ExpositionServer(UP).start()
    settings = Settings(profiles_dir=PROFILES, state_dir=tmp_path / "rules-state",
                        alerts=AlertTiming(down_for_s=0, for_s=0, hold_s=0))
    rules = tmp_path / "rules.yml"
    rules.write_text(alert_rules.dump(alert_rules.render_rules(
        load_profile(PROFILES / "10-rtx6000-2x.yaml"), settings, "default")))
    prom = PrometheusServer(tmp_path / "prom", [f"127.0.0.1:{slot.port}"],
                            labels={"pod": "p1", "profile": "rtx6000-2x", "slot": "Q27"},
                            rules=rules, alertmanager=f"127.0.0.1:{am.port}")
    prom.start()
    sessions = [on(tmp_path, am) for _ in range(3)]  # pod p1, context default
    try:
        await asyncio.to_thread(prom.wait_scrapes, 2)
        slot.set(BROKEN)  # the slot dies: Prometheus's scrape fails...
        for w in sessions:
            w.slots.down = {"Q27"}  # ...and the consoles see it down
        await poll_until(sessions, lambda: bool(notifications(hook, "SlotDown"))
                         and _firing(prom), "the page, and Prometheus's SlotDown firing")
        # Prometheus sends its firing alerts (SlotDown and its Watchdog) every second:
        # a few more sent alerts and its SlotDown has surely reached Alertmanager
        sent = _sent(prom)
        await poll_until(sessions, lambda: _sent(prom) >= sent + 4, "Prometheus's sends")
        (alert,) = am_alerts(am, "SlotDown")  # four senders, one alert
        assert alert["labels"] == {"alertname": "SlotDown", "severity": "critical",
                                   "context": "default", "pod": "p1",
                                   "profile": "rtx6000-2x", "slot": "Q27"}
        assert _firing(prom)
        # it recovers: one resolved notification, and no second page before it
        slot.set(UP)
        for w in sessions:
            w.slots.down = set()
        await poll_until(sessions, lambda: any(n["status"] == "resolved" for n in
                                               notifications(hook, "SlotDown")),
                         "the resolved notification")
        assert [n["status"] for n in notifications(hook, "SlotDown")] == [
            "firing", "resolved"]
        assert all(len(n["alerts"]) == 1 for n in notifications(hook, "SlotDown"))
    finally:
        for w in sessions:
            await w.session.aclose()
        prom.stop()
        slot.stop()
        am.stop()


