"""The completion probe after an operation and during an engine's warm-up (issue 42, "an
operation's own effects raise alerts"): after ``✓ Q27 restarted`` a CRIT "Q27 up but
completions fail — timed out" fired, and at a real vLLM start a first probe that timed out
during compile warm-up left a CRIT for the 5 minutes to the next probe while the server
answered in 0.1 s. Now a failed probe is retried soon (backoff), a probe of the slot
before it went down says nothing of it now, and only a failure confirmed after the slot's
warm-up is said. And a poller knows how many of a slot's requests were its own probes.

The slot is a server on loopback (real HTTP); the poller's clock is injected."""

from __future__ import annotations

from console.demo.http_serve import Reply, Request, start
from console.sources.collect import poller as poller_mod
from console.sources.collect.poller import DeploymentPoller
from console.sources.collect.targets import SlotTarget

EXPOSITION = ('# TYPE vllm:request_success_total counter\n'
              'vllm:request_success_total{{model_name="m",finished_reason="stop"}} {n}\n'
              '# TYPE vllm:num_requests_running gauge\n'
              'vllm:num_requests_running{{model_name="m"}} 0\n')


class Slot:
    """A vLLM-like slot: ``/health`` (down while ``down``), a completion that fails with
    HTTP 500 while ``failing``, and its request counter (every completion, and others')."""

    def __init__(self) -> None:
        self.completions = 0
        self.others = 0
        self.failing = False
        self.down = False

    async def __call__(self, request: Request) -> Reply:
        if self.down:
            return Reply(503, b"", "text/plain")
        if request.path == "/v1/models":
            return Reply(200, b'{"object": "list", "data": [{"id": "m"}]}')
        if request.path == "/v1/chat/completions":
            self.completions += 1
            if self.failing:
                return Reply(500, b'{"error": "warming up"}')
            return Reply(200, b'{"choices": [{"message": {"content": "OK"}}]}')
        if request.path == "/metrics":
            n = self.completions + self.others
            return Reply(200, EXPOSITION.format(n=n).encode(), "text/plain")
        return Reply(200, b"", "text/plain")


class Clock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


async def setup() -> tuple[Slot, DeploymentPoller, Clock, object]:
    slot = Slot()
    server = await start(slot, 0)
    port = server.sockets[0].getsockname()[1]
    clock = Clock()
    poller = DeploymentPoller("p", (SlotTarget("S", "m", port, f"http://127.0.0.1:{port}"),),
                              probe_interval_s=300.0, timeout_s=5.0, clock=clock)
    return slot, poller, clock, server


async def poll(poller: DeploymentPoller, clock: Clock, after: float):  # type: ignore[no-untyped-def]
    clock.t += after
    snap = await poller.poll()
    await poller.probes_done()
    return snap.slots[0]


async def test_a_failed_probe_is_retried_soon_and_said_only_once_confirmed() -> None:
    slot, poller, clock, server = await setup()
    try:
        await poll(poller, clock, 0)  # first probe: fine
        assert (await poll(poller, clock, 2)).probe_ok is True
        slot.failing = True
        await poll(poller, clock, 300)  # the interval's probe fails once
        s = await poll(poller, clock, 2)
        assert s.probe_ok is None and "retrying" in s.probe_detail  # a blip is not a CRIT
        n = slot.completions
        await poll(poller, clock, poller_mod.PROBE_RETRY_S)  # retried soon, not in 5 min
        assert slot.completions == n + 1
        s = await poll(poller, clock, 2)
        assert s.probe_ok is False and "HTTP 500" in s.probe_detail  # confirmed
        slot.failing = False
        await poll(poller, clock, 2 * poller_mod.PROBE_RETRY_S)  # backoff: and again
        assert (await poll(poller, clock, 2)).probe_ok is True
    finally:
        await poller.aclose()
        server.close()


async def test_a_slot_coming_up_is_probed_at_once_and_its_warm_up_is_not_alerted() -> None:
    slot, poller, clock, server = await setup()
    try:
        await poll(poller, clock, 0)
        slot.failing = True
        await poll(poller, clock, 300)
        await poll(poller, clock, poller_mod.PROBE_RETRY_S)
        assert (await poll(poller, clock, 2)).probe_ok is False  # broken, confirmed
        slot.down = True  # R: the slot restarts
        assert (await poll(poller, clock, 2)).health != "up"
        slot.down = False
        n = slot.completions
        s = await poll(poller, clock, 2)  # up again: the old failure is not of this run
        assert s.health == "up" and slot.completions == n + 1  # probed at once
        # warming up (compile): its failures are retried, with backoff, and never said
        t_up = clock.t
        while clock.t - t_up < poller_mod.PROBE_WARMUP_S - 10:
            s = await poll(poller, clock, 5)
            assert s.probe_ok is None, s.probe_detail
        assert slot.completions - n < 8  # backoff: not a probe a poll
        slot.failing = False  # warmed up: the next retry goes through
        for _ in range(60):
            s = await poll(poller, clock, 5)
            if s.probe_ok is not None:
                break
        assert s.probe_ok is True
    finally:
        await poller.aclose()
        server.close()


async def test_the_poller_knows_its_own_probes_from_others_requests() -> None:
    slot, poller, clock, server = await setup()
    try:
        await poll(poller, clock, 0)  # probes once
        await poll(poller, clock, 2)
        await poll(poller, clock, 2)  # the counter moved by the probe alone
        assert slot.completions == 1
        assert poller.in_use(4.0) is False  # only ours: nobody uses the pod
        slot.others += 1  # one request: maybe another viewer's probe, not use
        await poll(poller, clock, 2)
        assert poller.in_use(4.0) is False
        slot.others += 2  # somebody's requests
        await poll(poller, clock, 2)
        assert poller.in_use(4.0) is True
        # nobody since: not in use at the next poll already (the figures' window would
        # still count that request for its whole length, probing all the while)
        await poll(poller, clock, 2)
        assert poller.in_use(4.0) is False
    finally:
        await poller.aclose()
        server.close()
