"""Issue 43, item 5: the pod agent's own heartbeat. A pod with no console open is watched
by its agent's ``Watchdog`` alert; a dead-man's switch hears when that agent dies.

Real parts: the real Alertmanager on loopback running the *rendered* ``alertmanager.yml``
(its ``heartbeat-pod-agent`` receiver given a loopback webhook standing in for a
dead-man's-switch service, as the file's opening comment says; grouping made fast), and
the real ``pod-agent serve`` process, its Alertmanager URL in its environment (with
credentials, which must appear nowhere), beating every second. The heartbeat shows in
Alertmanager's v2 API with its labels, routed to its own receiver; the agent's ``status
--json`` says when it was last sent, and the console reads that from the real agent
(``PodCollector`` through the agent's own command line) into ``status --json``'s
``delivery``. Then the agent is killed with SIGKILL (by its pid: nothing flushed, no
goodbye) and the switch gets the resolved notification within 4 intervals (the last
``endsAt``) plus a group interval and a margin. Times on the monotonic clock from the
kill."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pod_agent.heartbeat import LEAD_INTERVALS
from tests.conftest import PROFILES, REPO
from tests.support import alertmanager_server
from tests.support.alertmanager_server import AlertmanagerServer
from tests.support.hook_receiver import HookReceiver
from tests.support.waits import holds_within

pytestmark = pytest.mark.realtime

INTERVAL_S = 1.0
"""``serve --heartbeat-interval``: each send's ``endsAt`` is 4 s ahead."""
GROUP_INTERVAL_S = 2.0
POD = "pod-hb-7"
SECRET = "s3cret-pass"


@pytest.fixture
def hook() -> Iterator[HookReceiver]:
    r = HookReceiver()
    yield r
    r.close()


def _rendered_with_switch(url: str) -> dict[str, Any]:
    """The rendered config, the agent's heartbeat receiver wired to ``url`` (the
    comment's recipe), the team's Slack swapped for nobody, grouping fast."""
    from console.sources.alert_rules import render_alertmanager

    cfg = render_alertmanager()
    for r in cfg["receivers"]:
        if r["name"] == "team":
            r.pop("slack_configs")
        if r["name"] == "heartbeat-pod-agent":
            r["webhook_configs"] = [{"url": url, "send_resolved": True}]
    cfg["route"] |= {"group_wait": "1s", "group_interval": f"{GROUP_INTERVAL_S:g}s"}
    for rt in cfg["route"]["routes"]:
        if rt["matchers"] == ['alertname="Watchdog"']:
            rt |= {"group_interval": f"{GROUP_INTERVAL_S:g}s", "repeat_interval": "1h"}
    return cfg


def _switch_heard(hook: HookReceiver) -> list[tuple[str, dict[str, str]]]:
    """(status, group labels) of every notification the switch got."""
    with hook.cond:
        return [(b.get("status", ""), b.get("groupLabels", {})) for _, b in hook.posts
                if isinstance(b, dict)]


def _agent_beats(srv: AlertmanagerServer) -> list[dict[str, Any]]:
    return [a for a in srv.get("/api/v2/alerts")
            if a["labels"].get("alertname") == "Watchdog"
            and a["labels"].get("sender") == "pod-agent"]


def _status(env: dict[str, str]) -> dict[str, Any]:
    r = subprocess.run([sys.executable, "-m", "pod_agent", "status", "--json"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    (result,) = [e for e in map(json.loads, r.stdout.splitlines()) if e["kind"] == "result"]
    return result


def test_the_agents_heartbeat_reaches_alertmanager_and_resolves_when_it_is_killed(
        tmp_path: Path, hook: HookReceiver) -> None:
    alertmanager_server.require()
    srv = AlertmanagerServer(tmp_path / "am", _rendered_with_switch(hook.url))
    srv.start()
    home = tmp_path / "home"
    failing = tmp_path / "vllm"
    failing.write_text("#!/bin/sh\nexit 1\n")  # a slot that never comes up: no child left
    failing.chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if k not in ("RUNPOD_API_KEY", "POD_AGENT_WEBHOOK_URL", "POD_AGENT_CLOCK")}
    env.update(POD_AGENT_HOME=str(home), PYTHONPATH=str(REPO), RUNPOD_POD_ID=POD,
               POD_AGENT_ALERTMANAGER_URL=srv.url.replace("http://",
                                                          f"http://ops:{SECRET}@"))
    log = tmp_path / "serve.log"
    with open(log, "wb") as fh:
        agent = subprocess.Popen(
            [sys.executable, "-m", "pod_agent", "serve", "--profile",
             str(PROFILES / "10-rtx6000-2x.yaml"), "--vllm", str(failing), "--no-patches",
             "--backoff", "3600", "--watchdog-interval", "3600",
             "--heartbeat-interval", f"{INTERVAL_S:g}"],
            stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
            start_new_session=True)
    try:
        assert holds_within(lambda: bool(_agent_beats(srv)), 60), log.read_text()
        (beat,) = _agent_beats(srv)
        assert beat["labels"] == {"alertname": "Watchdog", "severity": "none",
                                  "sender": "pod-agent", "pod": POD,
                                  "profile": "rtx6000-2x"}
        assert beat["status"]["state"] == "active"
        assert [r["name"] for r in beat["receivers"]] == ["heartbeat-pod-agent"]
        assert holds_within(lambda: ("firing", {"alertname": "Watchdog",
                                                "sender": "pod-agent", "pod": POD})
                            in _switch_heard(hook), 30), _switch_heard(hook)

        # the agent's status --json says when it last went, and nothing failed
        hb = _status(env)["heartbeat"]
        assert hb["configured"] and hb["to"] == srv.url and hb["last_error"] is None
        assert hb["sent_at"] is not None and time.time() - hb["sent_at"] < 30
        # the console reads it from the real agent into its own status --json
        from console.commands.status_cmd import delivery_json
        from console.config.settings import Settings
        from console.sources.agent_client import AgentClient
        from console.sources.collect.pod import PodCollector
        from console.sources.remote import LocalAgentTransport

        collector = PodCollector(POD, None, AgentClient(LocalAgentTransport(
            [sys.executable, "-m", "pod_agent"], env, POD)), timeout_s=30)
        pod = asyncio.run(collector.poll())
        assert pod.agent_error is None and pod.agent_heartbeat is not None
        said = delivery_json(Settings(profiles_dir=PROFILES, state_dir=tmp_path / "state"),
                             time.time(), pod.agent_heartbeat)["agent_watchdog"]
        assert isinstance(said, dict) and said["configured"] and said["to"] == srv.url
        assert isinstance(said["sent_at"], float) and said["sent_at"] >= hb["sent_at"]
        # the credentials went as a header, never into the log or the status
        assert SECRET not in log.read_text() and SECRET not in json.dumps(hb)
        assert f"heartbeat reaches Alertmanager at {srv.url}" in log.read_text()

        assert ("resolved", {"alertname": "Watchdog", "sender": "pod-agent", "pod": POD}) \
            not in _switch_heard(hook)
        os.kill(agent.pid, signal.SIGKILL)
        agent.wait(30)
        killed = time.monotonic()
        bound = LEAD_INTERVALS * INTERVAL_S + GROUP_INTERVAL_S
        assert holds_within(lambda: ("resolved", {"alertname": "Watchdog",
                                                  "sender": "pod-agent", "pod": POD})
                            in _switch_heard(hook), bound + 60), _switch_heard(hook)
        heard = time.monotonic() - killed
        print(f"the agent's heartbeat resolved at the switch {heard:.1f} s after kill -9 "
              f"(bound {bound:g} s + 10 s margin)")
        assert heard <= bound + 10
        assert not _agent_beats(srv) or all(
            a["status"]["state"] != "active" for a in _agent_beats(srv))
    finally:
        if agent.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(agent.pid, signal.SIGKILL)
            agent.wait(30)
        srv.stop()
