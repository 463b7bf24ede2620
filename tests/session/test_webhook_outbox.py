"""The direct webhook loses nothing (issue 43, item 6): a receiver failing its first
posts, a session without a webhook seeing the clear first, a process killed between
judging and posting — each raise and each clear reaches a real HTTP receiver on
loopback, in order, at least once (``console/session/outbox.py``)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from console.commands.status_cmd import delivery_json
from console.model.alerts import Alert
from console.session import outbox as outbox_mod
from console.session.outbox import Outbox, drain
from console.session.session import POD_POLL_S
from console.session.shared_alerts import SharedAlerts
from tests.session.world import World, world
from tests.support.hook_receiver import HookReceiver

T0 = 1_800_000_000.0
LIMIT_S = 30.0


@pytest.fixture
def hook() -> Iterator[HookReceiver]:
    r = HookReceiver()
    yield r
    r.close()


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    # the real first wait is 2 s; the order and the retries are what is tested here
    monkeypatch.setattr(outbox_mod, "FIRST_BACKOFF_S", 0.05)


def on(tmp: Path, hook: HookReceiver | None) -> World:
    url = {"webhook_url": SecretStr(hook.url)} if hook is not None else {}
    return world(tmp, T0, run_blocking=asyncio.to_thread, **url)


async def poll(*worlds: World) -> None:
    for w in worlds:
        w.clock.advance(POD_POLL_S)
        assert await w.session.poll()
        await w.session.settle()


async def poll_until(w: World, cond: Callable[[], bool], what: str) -> None:
    """Go on polling (a console's refresh) until ``cond`` holds; fail after LIMIT_S."""
    deadline = time.monotonic() + LIMIT_S
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await poll(w)
        await asyncio.sleep(0.02)  # the cadence of this loop, not a wait for the result


def stopped(texts: list[str]) -> list[str]:
    return ["clear" if "cleared" in t else "raise" for t in texts if "pod stopped" in t]


async def test_a_receiver_failing_its_first_posts_gets_the_raise_and_the_clear_in_order(
        tmp_path: Path, hook: HookReceiver) -> None:
    hook.answers = [500, 503, 302]  # a redirect is no delivery either (and not followed)
    w = on(tmp_path, hook)
    w.pod.run(T0 - 600, status="EXITED")
    await poll(w)
    assert stopped(hook.texts()) == [] and len(hook.tries) == 1  # the 500
    w.pod.run(T0 + 60)  # it clears while its raise is still undelivered
    await poll(w)
    await poll_until(w, lambda: len(stopped(hook.texts())) == 2, "the raise and the clear")
    assert stopped(hook.texts()) == ["raise", "clear"]
    assert [p for p, _ in hook.tries] == ["/hook"] * 5  # 3 refused, 2 delivered
    assert Outbox(w.settings.state_dir).depth().depth == 0
    assert any("webhook HTTP 500" in text for text, _ in w.notes), w.notes


async def test_a_clear_seen_first_by_a_session_without_webhook_is_delivered(
        tmp_path: Path, hook: HookReceiver) -> None:
    console, wall = on(tmp_path, hook), on(tmp_path, None)
    for w in (console, wall):
        w.pod.run(T0 - 600, status="EXITED")
    await poll(console, wall)
    assert stopped(hook.texts()) == ["raise"]
    for w in (console, wall):
        w.pod.run(T0 + 60)
    await poll(wall)  # the webhook-less session judges the clear first...
    assert stopped(hook.texts()) == ["raise"]
    # ...and marks nothing sent: ``status --json`` shows it waiting
    box = delivery_json(wall.settings, wall.clock() + 3)["webhook_outbox"]
    assert isinstance(box, dict)
    assert (box["depth"], box["oldest_at"], box["oldest_age_s"]) == (1, wall.clock(), 3.0)
    await poll(console)  # the session with the webhook delivers it
    assert stopped(hook.texts()) == ["raise", "clear"]
    assert Outbox(tmp_path / "state").depth().depth == 0


_JUDGE_AND_POST = """
import asyncio, sys
from pathlib import Path
from console.commands.status_cmd import delivery_json
from console.model.alerts import Alert
from console.session.outbox import Outbox, drain
from console.session.shared_alerts import SharedAlerts
state, url = Path(sys.argv[1]), sys.argv[2]
a = Alert("slot-down:Q27", "crit", "Q27 down", "", 0.0)
ob = Outbox(state)
SharedAlerts(state).sync(float(sys.argv[3]), raised=[a], webhook=True, outbox=ob,
                         source="console")
print("judged", flush=True)
asyncio.run(drain(ob, url, 600.0, asyncio.to_thread))
"""


def test_a_process_killed_between_judging_and_posting_loses_nothing(
        tmp_path: Path, hook: HookReceiver) -> None:
    state = tmp_path / "state"
    hook.hang = 1  # the receiver takes the raise and never answers...
    proc = subprocess.Popen(
        [sys.executable, "-c", _JUDGE_AND_POST, str(state), hook.url, str(T0)],
        stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"judged\n"
        hook.wait(lambda: len(hook.tries) == 1, "the raise's POST")
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # ...and its poster is killed mid-request
        proc.wait(30)
    assert hook.texts() == []
    # a session without a webhook judges the clear; one with a webhook starts later
    a = Alert("slot-down:Q27", "crit", "Q27 down", "", 0.0)
    ob = Outbox(state)
    synced = SharedAlerts(state).sync(T0 + 60, cleared=[a], outbox=ob)
    assert [c.key for c in synced.post_cleared] == ["slot-down:Q27"]
    assert asyncio.run(drain(ob, hook.url, 10.0, asyncio.to_thread)) == 2
    assert [("cleared" in t, "Q27 down" in t) for t in hook.texts()] == [(False, True),
                                                                          (True, True)]
    assert ob.depth().depth == 0


def test_the_outbox_says_its_depth_and_oldest_entry(tmp_path: Path) -> None:
    mono = [1000.0]
    ob = Outbox(tmp_path, mono=lambda: mono[0])
    assert ob.depth().to_json(T0)["depth"] == 0
    ob.put([("a", "raise", "{}"), ("b", "raise", "{}")], T0)
    ob.put([("a", "clear", "{}")], T0 + 5)
    d = ob.depth().to_json(T0 + 10)
    assert (d["depth"], d["oldest_at"], d["oldest_age_s"]) == (3, T0, 10.0)
    # of each alert only its oldest entry is due; one that failed waits its backoff
    assert [(e.key, e.kind) for e in ob.due()] == [("a", "raise"), ("b", "raise")]
    ob.failed(ob.due()[0], "webhook HTTP 500")
    assert [(e.key, e.kind) for e in ob.due()] == [("b", "raise")]
    assert ob.depth().last_error == "webhook HTTP 500"
    mono[0] += outbox_mod.FIRST_BACKOFF_S
    assert [(e.key, e.attempts) for e in ob.due()] == [("a", 1), ("b", 0)]
    # a wait set before a reboot (the monotonic clock started again) is due at once
    ob.failed(ob.due()[0], "webhook HTTP 500")
    mono[0] = 1.0
    assert [e.key for e in ob.due()] == ["a", "b"]


def test_a_state_dir_no_webhook_drains_does_not_pile_up(tmp_path: Path) -> None:
    ob, book = Outbox(tmp_path), SharedAlerts(tmp_path)
    a, b = (Alert(k, "crit", f"{k} down", "", T0) for k in ("down:Q27", "down:FLASH"))
    assert not book.sync(T0, raised=[a], outbox=ob).post_raised  # a wall, alone
    assert ob.depth().depth == 0
    ob.drained(T0 + 1)  # a console with a webhook drains it from now on
    assert [x.key for x in book.sync(T0 + 2, raised=[b], outbox=ob).post_raised] == [
        "down:FLASH"]
    assert [e.key for e in ob.all()] == ["down:FLASH"]
    # and the unclaimed raise is still the webhook session's to claim
    assert [x.key for x in book.sync(T0 + 3, raised=[a], webhook=True, outbox=ob
                                     ).post_raised] == ["down:Q27"]
