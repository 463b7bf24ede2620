"""The console's completion probe is a real request, and the agent's idle stop counts
requests whoever sends them: a console (a wall, on all night) probing an idle pod every
few minutes kept the pod nobody used running — in the demo at ×60 the probe every 30 s
and the 30 (pod) minute idle limit raced, and the idle stop sometimes never came. Now the
probe waits while the pod counts idle time, and before the pod's first reading."""

from __future__ import annotations

from msgspec.structs import replace

from console.demo.http_serve import Reply, Request, start
from console.model.model_figures import ModelFigures
from console.model.pod_stop import (
    PROBE_WAITS_FOR_IDLE,
    PROBE_WAITS_FOR_POD,
    PROBE_WAITS_FOR_TRAFFIC,
    probe_hold,
    slots_in_use,
)
from console.model.snapshot import PodSnapshot, SlotSnapshot, StopPlan
from console.sources.collect.poller import DeploymentPoller
from console.sources.collect.targets import SlotTarget

POD = PodSnapshot(pod_id="p1", status="RUNNING")
IDLE = StopPlan(next_reason="idle", idle_s=600.0, idle_after_s=1800.0, busy=False)


def test_the_probe_waits_on_an_idle_pod_and_before_the_first_reading() -> None:
    assert probe_hold(None) == PROBE_WAITS_FOR_POD
    # no stop plan served (a wall: no SSH, no exporter): the slots' own counters say
    assert probe_hold(POD) == PROBE_WAITS_FOR_TRAFFIC  # not known: it may be idle
    assert probe_hold(POD, in_use=False) == PROBE_WAITS_FOR_TRAFFIC
    assert probe_hold(POD, in_use=True) is None  # others' requests run: the probe goes
    assert probe_hold(replace(POD, stop_plan=IDLE)) == PROBE_WAITS_FOR_IDLE
    assert probe_hold(replace(POD, stop_plan=replace(IDLE, busy=True))) is None  # in use
    assert probe_hold(replace(POD, stop_plan=replace(IDLE, idle_after_s=None))) is None


def slot(name: str, running: float = 0.0, done: float = 0.0,
         stale: bool = False) -> SlotSnapshot:
    figs = ModelFigures(name, 300.0, {"running": running, "waiting": 0.0},
                        requests_by_reason={"stop": done} if done else {})
    return SlotSnapshot(slot=name, served_model_name=name, port=1, url="", health="up",
                        figures=figs, stale_since=1.0 if stale else None)


def test_the_slots_counters_say_whether_anyone_but_the_console_uses_the_pod() -> None:
    """A wall with no stop plan probed every 5 min, and the agent counted each probe as
    traffic: the idle stop never came. Its own probes are not anyone's use."""
    assert slots_in_use([], {}) is None  # no figures: not known
    assert slots_in_use([slot("A", stale=True)], {}) is None  # old figures say nothing
    assert slots_in_use([slot("A"), slot("B")], {}) is False
    assert slots_in_use([slot("A", done=1.0)], {"A": 1}) is False  # that was our probe
    assert slots_in_use([slot("A", running=1.0)], {"A": 1}) is False  # ours, running
    assert slots_in_use([slot("A", done=2.0)], {"A": 1}) is True  # one more: somebody
    assert slots_in_use([slot("A"), slot("B", running=1.0)], {"A": 3}) is True
    assert slots_in_use([slot("A", done=1.0)], {"B": 1}) is True  # ours went elsewhere


class Slot:
    """A slot on loopback that counts the chat completions it answers."""

    def __init__(self) -> None:
        self.completions = 0

    async def __call__(self, request: Request) -> Reply:
        if request.path == "/v1/models":
            return Reply(200, b'{"object": "list", "data": [{"id": "m"}]}')
        if request.path == "/v1/chat/completions":
            self.completions += 1
            return Reply(200, b'{"choices": [{"message": {"content": "OK"}}]}')
        return Reply(200, b"", "text/plain")  # /health, and an empty exposition


async def test_the_poller_sends_no_probe_while_it_is_held() -> None:
    slot = Slot()
    server = await start(slot, 0)
    port = server.sockets[0].getsockname()[1]
    poller = DeploymentPoller("p", (SlotTarget("S", "m", port, f"http://127.0.0.1:{port}"),),
                              probe_interval_s=0.0, timeout_s=5.0)
    held: list[str | None] = [PROBE_WAITS_FOR_IDLE]
    poller.probe_hold = lambda: held[0]
    try:
        for _ in range(3):
            snap = await poller.poll()
            await poller.probes_done()
        assert snap.slots[0].health == "up" and slot.completions == 0
        assert snap.slots[0].probe_ok is None  # never probed, not "failed"
        held[0] = None  # the pod is in use again
        await poller.poll()
        await poller.probes_done()
        assert slot.completions == 1
        assert (await poller.poll()).slots[0].probe_ok is True
    finally:
        await poller.aclose()
        server.close()
