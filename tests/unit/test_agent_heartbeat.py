"""The pod agent's heartbeat (issue 43, item 5), piece by piece: the alert's shape (the
console's heartbeat built by the same function), the URL and its credentials, an
Alertmanager that answers 500, refuses the connection, redirects or never answers (a
loopback receiver: ``tests/support/hook_receiver.py``) — counted, said once per reason,
never holding up the watchdog's tick — and what ``status --json`` says, on the pod and
in the console's ``status --json``. The real Alertmanager and the real ``serve`` process:
``tests/integration/test_agent_heartbeat.py``."""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.commands.status_cmd import delivery_json
from console.config.settings import Settings
from console.model.snapshot import AgentHeartbeat
from console.session.alertmanager import Where, watchdog
from pod_agent import heartbeat as hbm
from pod_agent import paths
from pod_agent.envfile import update_env
from pod_agent.heartbeat import Heartbeat, agent_labels, target
from tests.conftest import PROFILES
from tests.support import procs
from tests.support.hook_receiver import HookReceiver
from tests.support.waits import until_true
from tests.unit.test_watchdog_days import Pod, local
from tests.unit.test_watchdog_days import pod as pod  # the fixture: one pod's volume


def _t(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@pytest.fixture
def hook() -> Iterator[HookReceiver]:
    r = HookReceiver()
    yield r
    r.close()


def _beat(url: str | None, interval_s: float = 1.0
          ) -> tuple[Heartbeat, list[dict[str, Any]]]:
    said: list[dict[str, Any]] = []
    return Heartbeat(agent_labels("pod-7", "rtx6000-2x"), interval_s, lambda: url,
                     said.append), said


# -- the shape ------------------------------------------------------------------------
def test_the_agents_heartbeat_is_an_always_firing_watchdog_ending_four_intervals_ahead(
        ) -> None:
    now, started = 1_800_000_000.0, 1_799_999_000.0
    a = hbm.alert(agent_labels("pod-7", "rtx6000-2x"), "alive", now, started, now + 120)
    assert a["labels"] == {"alertname": "Watchdog", "severity": "none",
                           "sender": "pod-agent", "pod": "pod-7", "profile": "rtx6000-2x"}
    assert _t(a["startsAt"]) == started and _t(a["endsAt"]) == now + 120
    assert a["annotations"] == {"summary": "alive"}
    # a pod id from the environment: printable, never empty (Alertmanager drops an
    # empty label, and then two pods' heartbeats would be one)
    assert agent_labels("", "p")["pod"] == "unknown"
    assert agent_labels("pod\x1b[2J-7", "p")["pod"] == "pod[2J-7"


def test_the_console_sends_the_same_shape_told_apart_by_sender_and_no_pod() -> None:
    now = 1_800_000_000.0
    c = watchdog(Where("rtx6000-2x", "pod-7", "lab"), now, now + 60, now - 5)
    a = hbm.alert(agent_labels("pod-7", "rtx6000-2x"), "alive", now, now - 5, now + 60)
    assert c.keys() == a.keys()
    assert c["labels"] == {"alertname": "Watchdog", "severity": "none", "context": "lab",
                           "sender": "pod-console"}
    assert (c["startsAt"], c["endsAt"]) == (a["startsAt"], a["endsAt"])


async def test_each_send_ends_four_intervals_ahead_on_the_real_clock(
        hook: HookReceiver) -> None:
    hb, _ = _beat(hook.url.removesuffix("/hook"), interval_s=30)
    before = time.time()
    await hb.beat()
    # (what arrived: the receiver lists a post as answered only after its answer went)
    ((path, body),) = hook.tries
    assert path == "/api/v2/alerts"
    (sent,) = body
    # (milliseconds, as Alertmanager's API writes them)
    assert before - 0.001 <= _t(sent["endsAt"]) - 4 * 30 <= time.time()
    assert hb.state.sent_at is not None and before <= hb.state.sent_at <= time.time()


def test_credentials_in_the_url_become_a_header_and_are_never_said() -> None:
    t = target("https://ops:p%40ss@am.example:9443/prefix/")
    assert t.endpoint == "https://am.example:9443/prefix/api/v2/alerts"
    assert t.origin == "https://am.example:9443"
    assert t.authorization == "Basic b3BzOnBAc3M="  # ops:p@ss
    assert target("http://127.0.0.1:9093").authorization is None
    for bad in ("ftp://ops:secret@host/", "secret-token", "http://[::1"):
        with pytest.raises(ValueError) as exc:
            target(bad)
        assert "secret" not in str(exc.value) and "POD_AGENT_ALERTMANAGER_URL" in str(
            exc.value)


# -- an Alertmanager that fails -------------------------------------------------------
async def test_a_500_is_counted_said_once_and_the_next_good_send_says_so(
        hook: HookReceiver) -> None:
    url = hook.url.removesuffix("/hook").replace("http://", "http://ops:secret@")
    hb, said = _beat(url)
    hook.answers = [500, 500, 503]
    for _ in range(3):
        await hb.beat()
    st = hb.state
    assert (st.failures, st.last_error, st.sent_at) == (3, "HTTP 503", None)
    assert st.failing_since is not None and st.to == hook.url.removesuffix("/hook")
    # said when it started failing and when the reason changed: not at every beat
    assert [s.get("error") for s in said] == ["HTTP 500", "HTTP 503"]
    await hb.beat()
    assert st.sent_at is not None and st.failing_since is None and st.failures == 3
    assert said[-1]["ok"] is True and said[-1]["failed_sends"] == 3
    assert st.last_error == "HTTP 503"  # the last error stays said, with its time
    assert "secret" not in repr(said) and "secret" not in repr(st.to_json())


async def test_a_refused_connection_and_a_redirect_are_failures(hook: HookReceiver) -> None:
    hb, said = _beat(f"http://127.0.0.1:{procs.free_port()}")
    await hb.beat()
    assert hb.state.failures == 1 and hb.state.last_error is not None
    assert "refused" in hb.state.last_error.lower(), hb.state.last_error
    assert [r["ok"] for r in said] == [False]
    hb2, _ = _beat(hook.url.removesuffix("/hook"))
    hook.answers = [307]  # never followed: the redirect is the answer
    await hb2.beat()
    assert hb2.state.last_error == "HTTP 307" and hook.posts == []
    assert [p for p, _ in hook.tries] == ["/api/v2/alerts"]


async def test_no_url_sends_nothing_and_fails_nothing(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      hook: HookReceiver) -> None:
    monkeypatch.setenv("POD_AGENT_HOME", str(tmp_path))
    monkeypatch.delenv(hbm.URL_ENV, raising=False)
    hb = Heartbeat(agent_labels("p", "q"), 1.0,
                   lambda: hbm.configured_url(paths.env_file()), lambda r: None)
    await hb.beat()
    assert hb.state.to_json()["configured"] is False and hb.state.failures == 0
    assert hook.tries == []
    # written into the agent's .env later: used at the next beat, no restart
    update_env(paths.env_file(), {hbm.URL_ENV: hook.url.removesuffix("/hook")})
    await hb.beat()
    assert hb.state.to_json()["configured"] is True and len(hook.tries) == 1


async def test_a_hung_alertmanager_never_holds_up_the_watchdogs_tick(
        pod, monkeypatch: pytest.MonkeyPatch, hook: HookReceiver) -> None:
    """The real supervisor: its heartbeat task's send hangs on a receiver that never
    answers while its watchdog ticks go on, each done with that send still in flight
    (off the loop, in the heartbeat's own thread); the hung send ends as a failure at
    its deadline."""
    p: Pod = pod("seoul")
    monkeypatch.setenv(hbm.URL_ENV, hook.url.removesuffix("/hook"))
    sup = p.start(local("seoul", 0, 10, 0))
    sup.heartbeat.timeout_s = 3.0  # the send's deadline (the interval, 2 s at least)
    hook.hang = 1000
    stop = asyncio.Event()
    task = asyncio.ensure_future(sup.heartbeat.run(stop))
    try:
        await until_true(lambda: len(hook.tries) == 1, "the first send arrives")
        for _ in range(3):  # the ticks go on while that send hangs
            await sup.watchdog_tick()
            p.wall += 30
            inflight = sup.heartbeat._inflight
            assert inflight is not None and not inflight.done()
        assert len(hook.tries) == 1 and sup.status()["watchdog"]["failing"] is None
        await until_true(lambda: sup.heartbeat.state.failures >= 1, "the send failed")
        hb = sup.status()["heartbeat"]
        assert hb["sent_at"] is None and hb["failing_since"] is not None
        assert hb["last_error"] == "no answer within 3 s"
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def test_a_beat_while_a_send_still_hangs_sends_no_second_one(
        hook: HookReceiver) -> None:
    hb, _ = _beat(hook.url.removesuffix("/hook"))
    hb._inflight = concurrent.futures.Future()  # a send whose thread has not returned
    await hb.beat()
    assert hook.tries == [] and hb.state.failures == 1
    assert hb.state.last_error == "the last send has not returned after 2 s"
    hb._inflight.set_result(None)  # it returned at last: the next beat sends
    await hb.beat()
    assert len(hook.tries) == 1 and hb.state.sent_at is not None


# -- what status --json says ----------------------------------------------------------
async def test_the_agents_status_says_when_it_last_went_and_the_console_shows_it(
        pod, monkeypatch: pytest.MonkeyPatch, hook: HookReceiver, tmp_path: Path) -> None:
    p: Pod = pod("seoul")
    monkeypatch.setenv(hbm.URL_ENV, hook.url.removesuffix("/hook"))
    sup = p.start(local("seoul", 0, 10, 0))
    assert sup.status()["heartbeat"]["sent_at"] is None
    hook.answers = [500]
    await sup.heartbeat.beat()
    await sup.heartbeat.beat()
    raw = sup.status()["heartbeat"]
    assert raw["sent_at"] is not None and raw["last_error"] == "HTTP 500"
    assert raw["failures"] == 1 and raw["failing_since"] is None and raw["sends"] == 1
    sent = hook.tries[-1][1]  # the one answered 200
    assert sent[0]["labels"]["pod"] == "pod-days" and sent[0]["labels"]["profile"] == "days"
    # the console: parsed from the agent's answer into status --json's delivery
    parsed = AgentHeartbeat.parse(raw)
    settings = Settings(profiles_dir=PROFILES, state_dir=tmp_path / "state")
    said = delivery_json(settings, time.time(), parsed)
    assert said["agent_watchdog"] == {
        "configured": True, "to": raw["to"], "interval_s": raw["interval_s"],
        "sent_at": raw["sent_at"], "last_error": "HTTP 500",
        "last_error_at": raw["last_error_at"], "failing_since": None, "failures": 1}
    assert "watchdog_sent_at" in said  # the console's own, beside it
    # an agent that does not say (older), and one whose words are hostile
    assert delivery_json(settings, time.time(), None)["agent_watchdog"] is None
    assert AgentHeartbeat.parse(None) is None
    odd = AgentHeartbeat.parse({"configured": "yes", "sent_at": True, "failures": 2.5,
                                "last_error": "\x1b[31mred" + "x" * 500})
    assert odd is not None and odd.configured is False and odd.sent_at is None
    assert odd.failures == 0 and odd.last_error is not None
    assert "\x1b" not in odd.last_error and len(odd.last_error) <= 200
