"""Alertmanager as the console's receiver (issue 43, items 1, 2, 5), against the real
Alertmanager (Debian's ``prometheus-alertmanager``) on loopback notifying a loopback
webhook: many sessions sending one alert make one notification, a recovery one resolved
notification; ``a`` is a silence; a silence made elsewhere shows as an acknowledgement;
the heartbeat reaches it and goes to the null receiver."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from msgspec.structs import replace

from console.commands.status_cmd import delivery_json
from console.model.snapshot import StopPlan
from console.session.alertmanager import labels_of, silence
from console.session.delivery import AM_RESEND_FLOOR_S
from tests.session.world import World, world
from tests.support import alertmanager_server
from tests.support.alertmanager_server import AlertmanagerServer, fast_config
from tests.support.hook_receiver import HookReceiver

pytestmark = pytest.mark.realtime
LIMIT_S = 60.0


@pytest.fixture
def hook() -> Iterator[HookReceiver]:
    r = HookReceiver()
    yield r
    r.close()


@pytest.fixture
def am(tmp_path: Path, hook: HookReceiver) -> Iterator[AlertmanagerServer]:
    alertmanager_server.require()
    srv = AlertmanagerServer(tmp_path / "am", fast_config(hook.url))
    srv.start()
    yield srv
    srv.stop()


def on(tmp: Path, am: AlertmanagerServer, **kw: Any) -> World:
    # the session's clock is the real one here: Alertmanager judges endsAt by its own
    w = world(tmp, time.time(), alertmanager_url=am.url, run_blocking=asyncio.to_thread,
              **kw)
    # ...and so the hour of day is CI's: the pod's working hours are made to hold now
    # (noon in a fixed-offset zone, every day), or a night run adds "outside working
    # hours" to every test's alerts (CI ran at 03:00 in Seoul)
    offset = 12 - datetime.datetime.now(datetime.UTC).hour
    zone = f"Etc/GMT{'-' if offset >= 0 else '+'}{abs(offset)}"
    sched = w.ctx.profile.schedule.model_copy(update={
        "timezone": zone, "days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]})
    w.ctx.profile = w.ctx.profile.model_copy(update={"schedule": sched})
    return w


async def poll(*worlds: World) -> None:
    for w in worlds:
        w.clock.t = max(w.clock.t + 0.001, time.time())
        assert await w.session.poll()
        await w.session.settle()


async def poll_until(worlds: list[World], cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + LIMIT_S
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await poll(*worlds)
        await asyncio.sleep(0.1)  # this loop's cadence (a console's refresh), not a wait


def notifications(hook: HookReceiver, alertname: str) -> list[dict[str, Any]]:
    with hook.cond:
        return [b for _, b in hook.posts if isinstance(b, dict)
                and b.get("groupLabels", {}).get("alertname") == alertname]


def slot_down_silences(am: AlertmanagerServer) -> list[dict[str, Any]]:
    return [s for s in am.get("/api/v2/silences")
            if {"name": "alertname", "value": "SlotDown", "isRegex": False,
                "isEqual": True} in s["matchers"]]


def am_alerts(am: AlertmanagerServer, alertname: str) -> list[dict[str, Any]]:
    return [a for a in am.get("/api/v2/alerts") if a["labels"]["alertname"] == alertname]


async def test_many_sessions_one_notification_and_one_resolved(
        tmp_path: Path, am: AlertmanagerServer, hook: HookReceiver) -> None:
    sessions = [on(tmp_path, am) for _ in range(3)]  # a console, a wall, a record
    for w in sessions:
        w.slots.down = {"Q27"}
    await poll_until(sessions, lambda: bool(notifications(hook, "SlotDown")),
                     "the SlotDown notification")
    (alert,) = am_alerts(am, "SlotDown")  # three senders, one alert
    labels = alert["labels"]
    assert labels["slot"] == "Q27" and labels["severity"] == "critical"
    assert labels["profile"] == "rtx6000-2x" and "pod" in labels and "context" in labels
    assert alert["annotations"]["summary"] == "Q27 down"
    (note,) = notifications(hook, "SlotDown")
    assert note["status"] == "firing" and len(note["alerts"]) == 1
    # it recovers: one resolved notification, and no other
    for w in sessions:
        w.slots.down = set()
    await poll_until(sessions, lambda: any(n["status"] == "resolved"
                                           for n in notifications(hook, "SlotDown")),
                     "the resolved notification")
    assert [n["status"] for n in notifications(hook, "SlotDown")] == ["firing", "resolved"]
    # the heartbeat fired there all along, routed to the null receiver (never notified)
    (dog,) = am_alerts(am, "Watchdog")
    assert dog["status"]["state"] == "active" and [r["name"] for r in dog["receivers"]] == [
        "null"]
    assert not notifications(hook, "Watchdog")
    # a heartbeat, not a standing alert: it lapses within a minute of the last send, so a
    # killed console's stops (a dead-man's-switch receiver notices)
    ends = datetime.datetime.fromisoformat(dog["endsAt"].replace("Z", "+00:00")).timestamp()
    assert ends <= time.time() + 4 * AM_RESEND_FLOOR_S + 1
    sent = delivery_json(sessions[0].settings, time.time())["watchdog_sent_at"]
    assert isinstance(sent, float) and sent > time.time() - LIMIT_S


async def test_an_acknowledgement_is_a_silence_and_a_silence_an_acknowledgement(
        tmp_path: Path, am: AlertmanagerServer, hook: HookReceiver) -> None:
    console, wall = on(tmp_path, am), on(tmp_path, am, wall=True)
    for w in (console, wall):
        w.slots.down = {"Q27"}
    await poll_until([console, wall], lambda: bool(am_alerts(am, "SlotDown")), "SlotDown")
    console.session.acknowledge("alice")
    await console.session.settle()
    # every alert firing is acknowledged (at night UTC a Seoul pod is also outside its
    # working hours): the SlotDown's silence is the one this test follows
    (sil,) = [s for s in slot_down_silences(am) if s["status"]["state"] == "active"]
    assert sil["createdBy"] == "alice" and "acknowledgement" in sil["comment"]
    (alert,) = am_alerts(am, "SlotDown")
    assert alert["status"]["state"] == "suppressed" and alert["status"]["silencedBy"] == [
        sil["id"]]
    # the wall shows alice's acknowledgement
    await poll_until([wall], lambda: any(a.acked_by == "alice" for a in
                                         wall.session.state().alerts if a.key == "down:Q27"),
                     "the acknowledgement on the wall")
    # the alert clears: its silence ends with it (an ack never outlives its run)
    for w in (console, wall):
        w.slots.down = set()
    await poll_until([console, wall], lambda: all(
        s["status"]["state"] == "expired" for s in slot_down_silences(am)),
        "the silence expired")
    # a silence made elsewhere (amtool, the UI) is shown as an acknowledgement
    for w in (console, wall):
        w.slots.down = {"FLASH"}
    await poll_until([console, wall], lambda: bool(
        [a for a in am_alerts(am, "SlotDown") if a["labels"]["slot"] == "FLASH"]), "FLASH")
    (flash,) = [a for a in console.session.state().alerts if a.key == "down:FLASH"]
    body = silence(labels_of(flash, console.session.delivery.where()), "bob", time.time(),
                   time.time() + 3600)
    body["comment"] = "maintenance"
    httpx.post(am.url + "/api/v2/silences", json=body, timeout=10).raise_for_status()
    await poll_until([console, wall], lambda: all(
        a.acked_by == "bob" for w in (console, wall) for a in w.session.state().alerts
        if a.key == "down:FLASH"), "bob's silence shown as acknowledged")
    for w in (console, wall):
        await w.session.aclose()


async def test_an_alertmanager_down_gets_the_alert_once_it_is_back(
        tmp_path: Path, hook: HookReceiver) -> None:
    alertmanager_server.require()
    srv = AlertmanagerServer(tmp_path / "am", fast_config(hook.url))  # not started yet
    w = on(tmp_path, srv)
    w.slots.down = {"Q27"}
    await poll(w)
    await poll(w)
    assert [t for t, _ in w.notes if "Alertmanager" in t] == [
        "Alertmanager: ConnectError (sent again at the next poll)"]  # said once
    srv.start()
    try:
        await poll_until([w], lambda: bool(notifications(hook, "SlotDown")),
                         "the notification once Alertmanager is up")
        w.slots.down = set()
        await poll_until([w], lambda: [n["status"] for n in notifications(hook, "SlotDown")]
                         == ["firing", "resolved"], "the resolved notification")
        assert any(t == "Alertmanager answers again" for t, _ in w.notes)
    finally:
        srv.stop()
        await w.session.aclose()


OUTAGE_S = 120.0
"""The receiver's outage (the issue's "down for 2 minutes")."""


def told(hook: HookReceiver, since: int) -> set[tuple[str, str]]:
    """(slot, status) of every SlotDown alert in the notifications after the first
    ``since`` (each notification lists its group's alerts, resolved ones too)."""
    with hook.cond:
        posts = list(hook.posts[since:])
    return {(a["labels"].get("slot", ""), a["status"]) for _, b in posts
            if isinstance(b, dict) and b.get("groupLabels", {}).get("alertname") == "SlotDown"
            for a in b.get("alerts", [])}


async def test_the_receiver_down_for_two_minutes_gets_everything_after(
        tmp_path: Path, am: AlertmanagerServer, hook: HookReceiver) -> None:
    """The receiver (Slack, here the loopback hook) answers 503 for two minutes while one
    slot recovers and another dies; once it answers again, both are told: the first's
    resolution and the second's alert (Alertmanager's retries; the console only kept
    sending)."""
    w = on(tmp_path, am)
    w.slots.down = {"Q27"}
    await poll_until([w], lambda: ("Q27", "firing") in told(hook, 0), "Q27's notification")
    with hook.cond:
        hook.answers = [503] * 1_000_000  # the receiver goes down
        before = len(hook.posts)
    w.slots.down = {"FLASH"}  # Q27 recovers and FLASH dies while nobody can be told
    down_at = time.monotonic()
    while time.monotonic() - down_at < OUTAGE_S:  # the outage's length, not a wait
        await poll(w)
        await asyncio.sleep(0.5)  # a console's refresh
    with hook.cond:
        refused = len(hook.tries) - len(hook.posts)
        assert len(hook.posts) == before and refused >= 2, (refused, len(hook.posts))
        hook.answers = []  # it answers again
    await poll_until([w], lambda: {("Q27", "resolved"), ("FLASH", "firing")}
                     <= told(hook, before), "both told after the outage")
    print(f"{refused} notifications refused in {OUTAGE_S:g} s; all told after")
    await w.session.aclose()


async def test_the_rendered_config_pages_nobody_for_a_planned_stop(
        tmp_path: Path, hook: HookReceiver) -> None:
    """The rendered ``alertmanager.yml`` in the real Alertmanager (its Slack receiver
    swapped for the loopback hook): a stopped pod is routed to nobody and inhibits the
    slot alerts of its pod, while a slot down elsewhere pages."""
    alertmanager_server.require()
    from console.sources.alert_rules import render_alertmanager

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
    w = on(tmp_path, srv)
    try:
        # stopped on purpose: the agent's last reading says its watchdog stops it (idle),
        # then the provider says EXITED (a stop nobody here made is a WARN, to the team)
        now = time.time()
        doc = {"armed": True, "now": now, "clock_speed": 1.0, "busy": False,
               "idle_s": 1800.0, "idle_stop_after_s": 1800.0, "next_stop_reason": "idle",
               "stop_in_s": 0.0, "last_stop_reason": "idle",
               "last_stop": {"reason": "idle", "at": now, "by": "watchdog", "ok": None}}
        w.pod.pod = replace(w.pod.pod, agent_error=None, watchdog_armed=True,
                            stop_plan=StopPlan.parse(doc, now))
        await poll(w)
        w.pod.pod = replace(w.pod.pod, status="EXITED", agent_error="connection refused",
                            stop_plan=None)
        await poll_until([w], lambda: bool(am_alerts(srv, "PodStopPlanned")),
                         "PodStopPlanned")
        (stopped,) = am_alerts(srv, "PodStopPlanned")
        assert stopped["labels"]["severity"] == "info"
        assert [r["name"] for r in stopped["receivers"]] == ["null"]
        pod = stopped["labels"]["pod"]
        # the same pod's slot down (Prometheus still scraping it) is inhibited...
        now = time.time()
        slot_down = {"labels": {"alertname": "SlotDown", "severity": "critical",
                                "slot": "Q27", "pod": pod, "context": "default",
                                "profile": "rtx6000-2x"},
                     "startsAt": datetime.datetime.fromtimestamp(now, datetime.UTC
                                                                 ).isoformat()}
        other = {**slot_down, "labels": {**slot_down["labels"], "pod": "another"}}
        # the gateway's own health is not the stop's: down for every pod behind it
        gw_down = {**slot_down, "labels": {**slot_down["labels"], "alertname": "GatewayDown"}}
        del gw_down["labels"]["slot"]
        httpx.post(srv.url + "/api/v2/alerts", json=[slot_down, other, gw_down],
                   timeout=10).raise_for_status()
        await poll_until([w], lambda: len(am_alerts(srv, "SlotDown")) == 2, "both SlotDown")
        assert am_alerts(srv, "GatewayDown")[0]["status"]["state"] == "active"
        by_pod = {a["labels"]["pod"]: a for a in am_alerts(srv, "SlotDown")}
        assert by_pod[pod]["status"]["state"] == "suppressed"
        assert by_pod[pod]["status"]["inhibitedBy"] == [stopped["fingerprint"]]
        # ...another pod's pages (and it is the only page)
        await poll_until([w], lambda: bool(notifications(hook, "SlotDown")), "the page")
        assert [a["labels"]["pod"] for n in notifications(hook, "SlotDown")
                for a in n["alerts"]] == ["another"]
        assert not notifications(hook, "PodStopPlanned")
    finally:
        srv.stop()
        await w.session.aclose()


async def test_one_of_two_alerts_of_one_label_set_ending_resolves_nothing_there(
        tmp_path: Path, am: AlertmanagerServer, hook: HookReceiver) -> None:
    """Two Xid 13 of one GPU, minutes apart: two alerts here, one label set there (the
    rendered rules' identity: pod, GPU, code). The older one ages out while the newer
    fires: Alertmanager's alert stays firing (its resolve is not sent)."""
    from console.config.settings import AlertTiming
    from console.model.gpu_state import Gpu, GpuReport, XidRecord

    w = on(tmp_path, am, alerts=AlertTiming(down_for_s=1, for_s=0, hold_s=0))
    now = time.time()
    # the older one ends (15 min after it arrived) a few seconds from now
    xids = tuple(XidRecord(t, 0, 13, "warning", "graphics engine exception", "")
                 for t in (now - 15 * 60 + 3, now))
    w.pod.pod = replace(w.pod.pod, gpus=GpuReport((Gpu(0),), "nvml", sampled_at=now,
                                                  xids=xids))
    try:
        def xid_keys() -> set[str]:
            return {a.key for a in w.session.alerts.firing() if a.key.startswith("xid:")}

        await poll_until([w], lambda: len(xid_keys()) == 2 and bool(am_alerts(am, "GpuXid")),
                         "both Xid alerts, one in Alertmanager")
        (one,) = am_alerts(am, "GpuXid")
        assert (one["labels"]["gpu"], one["labels"]["xid"]) == ("0", "13")
        await poll_until([w], lambda: len(xid_keys()) == 1, "the older one ended")
        (still,) = am_alerts(am, "GpuXid")  # straight after the poll that ended it
        ends = datetime.datetime.fromisoformat(still["endsAt"].replace("Z", "+00:00"))
        assert ends.timestamp() > time.time(), still
        assert still["status"]["state"] == "active"
    finally:
        await w.session.aclose()
