"""A staged start's first poll, begun in a thread before the UI loads (``first_poll.py``).

The session's first poll takes that poll's snapshot (one poll, one snapshot: the slots
are not asked twice), no poll of the session's starts while it runs, a failure of it is
said as any poll's is, and a session closing before it was taken leaves the poller to
the thread until it is done with it.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from console.model.snapshot import DeploymentSnapshot
from console.session.first_poll import FirstPoll
from console.session.session import Session
from console.session.view import ConsoleView, StagedStart
from tests.session.world import World, world
from tests.support.waits import steps_until, until_true

T0 = 1_800_000_000.0


class ThreadGate:
    """``Slots.gate`` for polls that run on another thread's event loop."""

    def __init__(self) -> None:
        self.event = threading.Event()

    async def wait(self) -> None:
        await asyncio.to_thread(self.event.wait, 30)

    def set(self) -> None:
        self.event.set()


def staged(w: World, notes: list[tuple[str, str]]) -> tuple[Session, FirstPoll, list]:
    """A session on a staged start whose first poll runs in its thread, as ``watch``'s
    does; and each poll's (thread, snapshot), in the order they ended."""
    polled: list[tuple[str, DeploymentSnapshot]] = []
    real = w.slots.poll

    async def poll() -> DeploymentSnapshot:
        snap = await real()
        polled.append((threading.current_thread().name, snap))
        return snap

    w.slots.poll = poll  # type: ignore[method-assign]
    first = FirstPoll(w.slots)  # type: ignore[arg-type]
    view = ConsoleView(profile_name="rtx6000-2x", targets=w.slots.targets, read_only=False,
                       demo=False, refresh_s=2.0, plot_refresh_s=300.0)
    start = StagedStart(view=view, poller=w.slots,  # type: ignore[arg-type]
                        history=w.ctx.history, finish=lambda p, h: w.ctx, first_poll=first)
    s = Session(start, clock=w.clock, note=lambda text, style: notes.append((text, style)))
    return s, first, polled


async def test_the_first_frame_shows_the_first_polls_snapshot_and_polls_never_overlap(
        tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    gate = ThreadGate()
    w.slots.gate = gate  # type: ignore[assignment]
    s, _, polled = staged(w, [])
    await until_true(lambda: w.slots.running == 1, "the first poll in flight in its thread")
    shown = asyncio.ensure_future(s.poll())
    assert await steps_until(lambda: s.polling)
    for _ in range(3):  # the app's beats while it runs: none polls the slots again
        w.clock.advance(s.refresh_s)
        s.tick()
        assert await s.poll() is False
    assert s.polls == 0 and s.state().snapshot is None
    assert s.state().stale == "waiting for first data…"
    gate.set()
    assert await shown is True
    assert w.slots.calls == 1 and s.polls == 1  # asked once, shown once
    assert [name for name, _ in polled] == ["first-poll"]
    assert s.state().snapshot is polled[0][1]
    assert all(slot.health == "up" for slot in polled[0][1].slots)
    s.tick()  # the next beat polls on the session's own loop
    await s.settle()
    assert [name for name, _ in polled] == ["first-poll", threading.current_thread().name]
    assert (w.slots.calls, w.slots.most_at_once, s.polls) == (2, 1, 2)
    assert s.state().snapshot is polled[1][1]


async def test_a_failed_first_poll_is_said_as_any_poll_and_the_next_one_runs(
        tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    real = w.slots.poll

    async def broken_in_its_thread() -> DeploymentSnapshot:
        if threading.current_thread().name == "first-poll":
            raise RuntimeError("exposition parser exploded")
        return await real()

    w.slots.poll = broken_in_its_thread  # type: ignore[method-assign]
    notes: list[tuple[str, str]] = []
    s, _, _ = staged(w, notes)
    assert await s.poll() is False  # the thread's failure, not a poll of the session's
    assert w.slots.calls == 0 and s.polls == 0
    assert s.poll_failure == (T0, "RuntimeError: exposition parser exploded")
    assert "POLL FAILED" in (s.state().stale or "")
    assert ("poll failed: RuntimeError: exposition parser exploded", "crit") in notes
    w.clock.advance(2)
    assert await s.poll() is True  # on the session's loop, not the thread's answer again
    assert w.slots.calls == 1 and s.poll_failure is None and s.state().stale is None


async def test_closing_before_the_first_poll_was_shown_waits_for_its_thread(
        tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    gate = ThreadGate()
    w.slots.gate = gate  # type: ignore[assignment]
    closed: list[tuple[str, int]] = []

    async def aclose() -> None:  # who closed the poller, and with how many polls in flight
        closed.append((threading.current_thread().name, w.slots.running))

    w.slots.aclose = aclose  # type: ignore[method-assign]
    s, first, _ = staged(w, [])
    waiting: list[bool] = []
    ended = first.ended

    async def waits_for_it() -> None:
        waiting.append(True)
        await ended()

    first.ended = waits_for_it  # type: ignore[method-assign]
    await until_true(lambda: w.slots.running == 1, "the first poll in flight in its thread")
    closing = asyncio.ensure_future(s.aclose())
    try:
        await until_true(lambda: bool(waiting or closed), "the session closing")
        assert closed == []  # the poller is the thread's until its poll ends
    finally:
        gate.set()
        await closing
    # the thread closed what it opened, then the session: never under a poll in flight
    assert closed == [("first-poll", 0), (threading.current_thread().name, 0)]
