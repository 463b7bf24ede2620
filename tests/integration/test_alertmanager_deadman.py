"""Issue 43, "nobody is paged when no console runs": a console killed with SIGKILL (no
goodbye, nothing flushed) stops its heartbeat, and Alertmanager itself says so.

A real ``pod-console record`` (headless) sends to the real Alertmanager on loopback,
whose ``Watchdog`` route goes to a loopback webhook standing in for a dead-man's-switch
service: it is notified while the console lives; after ``kill -9`` the heartbeat's
``endsAt`` passes (4 × max(refresh, ``AM_RESEND_FLOOR_S``) after the last send) and the
service gets the resolved notification, the sign a dead-man's switch pages on. Times are
on the monotonic clock from the kill. The floor is made 5 s in the console (``FLOOR_S``):
the same relation, 20 s of waiting instead of 60."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.support import alertmanager_server
from tests.support.alertmanager_server import AlertmanagerServer
from tests.support.hook_receiver import HookReceiver
from tests.support.waits import held_by

pytestmark = pytest.mark.realtime

FLOOR_S = 5.0
"""``AM_RESEND_FLOOR_S`` in the killed console: above its 1 s refresh, so the lapse is
still 4 x the floor (20 s; a console alive but slow for that long would page too)."""


@pytest.fixture
def hook() -> Iterator[HookReceiver]:
    r = HookReceiver()
    yield r
    r.close()


def _deadman_config(url: str) -> dict[str, Any]:
    """The heartbeat to the dead-man's-switch service (the rendered config's "heartbeat"
    receiver given a webhook, as its comment says), everything else to nobody."""
    return {
        "route": {"receiver": "null", "group_by": ["alertname"], "group_wait": "1s",
                  "group_interval": "2s", "repeat_interval": "1h",
                  "routes": [{"matchers": ['alertname="Watchdog"'], "receiver": "heartbeat",
                              "group_wait": "0s", "repeat_interval": "1m"}]},
        "receivers": [{"name": "null"},
                      {"name": "heartbeat", "webhook_configs": [
                          {"url": url, "send_resolved": True}]}],
    }


def _heartbeats(hook: HookReceiver) -> list[str]:
    with hook.cond:
        return [b.get("status", "") for _, b in hook.posts if isinstance(b, dict)
                and b.get("groupLabels", {}).get("alertname") == "Watchdog"]


def test_a_killed_console_stops_its_heartbeat_and_the_switch_hears_it(
        tmp_path: Path, hook: HookReceiver) -> None:
    alertmanager_server.require()
    srv = AlertmanagerServer(tmp_path / "am", _deadman_config(hook.url))
    srv.start()
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {REPO / 'profiles'}\nstate_dir: {tmp_path / 'state'}\n"
                   f"refresh_s: 1\nalertmanager_url: {srv.url}\npod:\n  host: 127.0.0.1\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    # the real ``pod-console record`` with the resend floor made short (FLOOR_S), as an
    # in-process test would monkeypatch it: the lapse after the kill is 4 x the floor,
    # a minute at the product's 15 s, all of it spent waiting
    run = (f"import sys; from console.session import delivery; "
           f"delivery.AM_RESEND_FLOOR_S = {FLOOR_S!r}; "
           f"sys.argv[0] = 'pod-console'; from console.cli import run; run()")
    child = subprocess.Popen([sys.executable, "-c", run, "record", "--config", str(cfg)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env=env, cwd=REPO, start_new_session=True)
    try:
        held_by(lambda: "firing" in _heartbeats(hook), "the heartbeat's first page", 120)
        assert child.poll() is None
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
        killed = time.monotonic()
        assert "resolved" not in _heartbeats(hook)
        # the last send's endsAt is at most 4 x max(refresh 1 s, the floor) ahead; the
        # resolved notification follows at the next group interval (2 s here)
        lapse = 4 * FLOOR_S
        heard = held_by(lambda: "resolved" in _heartbeats(hook), "the resolved heartbeat",
                        lapse + 30)
        print(f"heartbeat resolved {heard - killed:.1f} s after kill -9 (bound {lapse:.0f} s)")
        assert heard - killed <= lapse + 10
    finally:
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
        srv.stop()
