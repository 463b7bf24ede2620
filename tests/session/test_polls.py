"""The tick and the one poll guard, and each source at its cadence, on the injected clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

from console.session.session import POD_POLL_S
from tests.session.world import world
from tests.support.waits import steps_until as until

T0 = 1_800_000_000.0


async def test_polls_never_overlap(tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    w.slots.gate = asyncio.Event()
    first = asyncio.ensure_future(w.session.poll())
    assert await until(lambda: w.slots.running == 1)
    assert w.session.polling
    for _ in range(5):  # ticks and a refresh while it hangs: none starts another
        w.clock.advance(w.session.refresh_s)
        w.session.tick()
        w.session.refresh_now()
        assert await w.session.poll() is False
    await asyncio.sleep(0)
    assert w.slots.calls == 1
    w.slots.gate.set()
    assert await first is True
    assert not w.session.polling and w.session.polls == 1
    w.session.tick()  # the next beat polls again
    await w.session.settle()
    assert (w.slots.calls, w.slots.most_at_once, w.session.polls) == (2, 1, 2)


async def test_a_failing_poll_is_said_and_the_next_one_runs(tmp_path: Path) -> None:
    w = world(tmp_path, T0)

    async def broken():
        raise RuntimeError("exposition parser exploded")

    real = w.slots.poll
    w.slots.poll = broken  # type: ignore[method-assign]
    assert await w.session.poll() is False
    assert w.session.poll_failure == (T0, "RuntimeError: exposition parser exploded")
    assert "POLL FAILED" in (w.session.state().stale or "")
    assert ("poll failed: RuntimeError: exposition parser exploded", "crit") in w.notes
    w.slots.poll = real  # type: ignore[method-assign]
    w.clock.advance(2)
    assert await w.session.poll() is True
    assert w.session.poll_failure is None and w.session.state().stale is None


async def test_the_pod_is_read_at_its_cadence_and_at_once_when_asked(tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    for _ in range(int(POD_POLL_S / 2) * 3):  # 30 s at a 2 s refresh
        assert await w.session.poll()
        w.clock.advance(2)
    assert w.slots.calls == 15
    assert w.pod.calls == 3  # at 0, 10 and 20 s: RunPod's limit, not the refresh
    w.session.refresh_now()  # ctrl+r: the pod too, not at its next turn
    await w.session.settle()
    assert w.pod.calls == 4
    # the wall clock stepped back an hour: the pod keeps its cadence (counted on the
    # monotonic clock), neither starved nor read early
    w.clock.step_wall(-3600)
    assert await w.session.poll()
    assert w.pod.calls == 4
    w.clock.advance(POD_POLL_S)
    assert await w.session.poll()
    assert w.pod.calls == 5


async def test_the_fleet_is_polled_only_while_looked_at(tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    looked: list[bool] = [False]
    cycles: list[float] = []

    async def cycle():
        cycles.append(w.clock())

    w.session._fleet_wanted = lambda: looked[0]  # type: ignore[method-assign]
    w.session.poll_fleet = cycle  # type: ignore[method-assign]
    w.session.tick()
    await w.session.settle()
    assert cycles == []
    looked[0] = True
    for _ in range(3):
        w.session.tick()
        await w.session.settle()
        w.clock.advance(w.session.refresh_s)
    assert cycles == [T0, T0 + 2, T0 + 4]  # at every beat: the refresh is its cadence
