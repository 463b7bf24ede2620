"""A restart in flight inhibits its slot's alerts in Alertmanager too (issue 43, item 3).

The console holds a slot's alerts while its own operation takes it down (``inhibit``);
Prometheus, running the rendered rules, knows nothing of that and says ``SlotDown`` once
its ``for`` has passed. Here the rendered ``alertmanager.yml`` runs in the real
Alertmanager (its Slack receiver swapped for a loopback hook), a console restarts Q27
through the real registry, and a ``SlotDown`` as Prometheus sends it is posted for Q27
and FLASH: Q27's is muted by the console's ``SlotRestarting`` while the restart runs,
FLASH's pages; once Q27 is up again ``SlotRestarting`` resolves and a new ``SlotDown``
of Q27 pages."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from console.sources.alert_rules import render_alertmanager
from tests.integration.test_alertmanager_delivery import (  # noqa: F401 (fixtures)
    am_alerts,
    hook,
    notifications,
    on,
    poll_until,
)
from tests.session.test_operation_inhibit import start, with_ops
from tests.support import alertmanager_server
from tests.support.alertmanager_server import AlertmanagerServer
from tests.support.hook_receiver import HookReceiver

pytestmark = pytest.mark.realtime


@pytest.fixture
def rendered(tmp_path: Path, hook: HookReceiver) -> Iterator[AlertmanagerServer]:  # noqa: F811
    alertmanager_server.require()
    cfg = render_alertmanager()
    for r in cfg["receivers"]:
        if r["name"] == "team":
            r.pop("slack_configs")
            r["webhook_configs"] = [{"url": hook.url, "send_resolved": True}]
    cfg["route"] |= {"group_wait": "1s", "group_interval": "2s"}
    for rt in cfg["route"]["routes"]:
        rt.pop("group_wait", None)
    srv = AlertmanagerServer(tmp_path / "am", cfg)
    srv.start()
    yield srv
    srv.stop()


def prometheus_slot_down(srv: AlertmanagerServer, pod: str, *slots: str) -> None:
    """``SlotDown`` as the rendered rules label it (Prometheus re-sends it each
    evaluation; once is enough here: its endsAt is Alertmanager's resolve_timeout)."""
    at = datetime.datetime.fromtimestamp(time.time(), datetime.UTC).isoformat()
    httpx.post(srv.url + "/api/v2/alerts", json=[
        {"labels": {"alertname": "SlotDown", "severity": "critical", "slot": slot,
                    "pod": pod, "context": "default", "profile": "rtx6000-2x"},
         "startsAt": at} for slot in slots], timeout=10).raise_for_status()


def paged(hook: HookReceiver) -> list[tuple[str, str]]:  # noqa: F811
    return [(a["labels"]["slot"], a["status"]) for n in notifications(hook, "SlotDown")
            for a in n["alerts"]]


async def test_a_restart_in_flight_mutes_prometheus_slot_down_of_its_slot(
        tmp_path: Path, rendered: AlertmanagerServer, hook: HookReceiver) -> None:  # noqa: F811
    w = on(tmp_path, rendered)
    gates = with_ops(w)
    try:
        await poll_until([w], lambda: bool(am_alerts(rendered, "Watchdog")), "a first send")
        task = await start(w, "restart", {"slot": "Q27"})
        w.slots.down = {"Q27"}  # the restart takes it down
        await poll_until([w], lambda: bool(am_alerts(rendered, "SlotRestarting")),
                         "SlotRestarting")
        (restarting,) = am_alerts(rendered, "SlotRestarting")
        labels: dict[str, Any] = restarting["labels"]
        assert (labels["slot"], labels["severity"]) == ("Q27", "info"), labels
        assert [r["name"] for r in restarting["receivers"]] == ["null"]  # no page itself
        pod = labels["pod"]
        prometheus_slot_down(rendered, pod, "Q27", "FLASH")
        await poll_until([w], lambda: len(am_alerts(rendered, "SlotDown")) == 2,
                         "both SlotDown")
        by_slot = {a["labels"]["slot"]: a for a in am_alerts(rendered, "SlotDown")}
        assert by_slot["Q27"]["status"]["state"] == "suppressed", by_slot["Q27"]
        assert by_slot["Q27"]["status"]["inhibitedBy"] == [restarting["fingerprint"]]
        assert by_slot["FLASH"]["status"]["state"] == "active"
        # another slot's outage pages; the restarted one's does not
        await poll_until([w], lambda: bool(paged(hook)), "FLASH's page")
        assert paged(hook) == [("FLASH", "firing")], paged(hook)
        # the restart ends and Q27 is up: SlotRestarting resolves at once (endsAt now)
        gates["restart"].go.set()
        assert (await task).ok
        w.slots.down = set()
        await poll_until([w], lambda: not [a for a in am_alerts(rendered, "SlotRestarting")
                                           if a["status"]["state"] == "active"],
                         "SlotRestarting resolved")
        # a SlotDown of Q27 from now on is an outage: it pages
        prometheus_slot_down(rendered, pod, "Q27")
        await poll_until([w], lambda: ("Q27", "firing") in paged(hook), "Q27's page")
    finally:
        await w.session.aclose()
