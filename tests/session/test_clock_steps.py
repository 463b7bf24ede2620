"""Issue 42, item 2: one clock policy. The session is driven on an injected clock whose
wall and monotonic readings the test moves apart: steps of the wall clock of +60 s (a VM
resumed), -1 h (NTP after a suspend) and +8 days (a wall display without a real-time
clock learning the date) come between polls while a slot decodes, then while it hangs.

Every duration (the stall, an alert's ``for:`` and hold, the pod's cadence, retention
ages) is monotonic: no step raises STALLED on a busy slot, hides a hang, fires or clears
an alert, or deletes a recording (another console's, or this one's own chunks). Each
step is told once, in the action log and as a marker of the recording."""

from __future__ import annotations

import asyncio
import itertools
import os
from pathlib import Path

from console.config.settings import AlertTiming
from console.session.record.reader import SqliteTape
from tests.session.world import World, world

T0 = 1_796_000_400.0  # Monday 30 Nov 2026, 10:00 in Seoul: working hours, before and after
REFRESH = 2.0
AFTER = 30.0  # the defaults: stall after 30 s at a 2 s refresh
STEPS = {60.0: "+1m 0s", -3600.0: "-1h 0m", 8 * 86400.0: "+8d 0h"}


def _stalled_said(w: World) -> list[str]:
    return [t for t, _ in w.notes if "STALLED" in t]


def _alert_notes(w: World) -> list[str]:
    return [t for t, _ in w.notes if t.startswith(("ALERT", "cleared:"))]


class Busy:
    """FLASH decoding: its token counter moves at every poll until ``hang``."""

    def __init__(self, w: World) -> None:
        self.w = w
        self.tokens = 1000.0
        self.hung = False
        self.ttft = 0.4

    def figures(self) -> None:
        if not self.hung:
            self.tokens += 37.0
        self.w.slots.values["FLASH"] = {"running": 3.0, "generation_total": self.tokens,
                                        "prompt_total": 500.0, "kv_cache_usage": 0.3,
                                        "ttft_p95_s": self.ttft}

    async def poll(self, seconds: float = REFRESH) -> None:
        self.w.clock.advance(seconds)
        self.figures()
        assert await self.w.session.poll()


async def test_wall_steps_move_no_duration_and_are_told_once(tmp_path: Path) -> None:
    w = world(tmp_path, T0, refresh_s=REFRESH,
              alerts=AlertTiming(down_for_s=0, for_s=10, hold_s=10, stall_after_s=AFTER))
    busy = Busy(w)
    busy.figures()
    assert await w.session.poll()
    rec = w.session.recorder
    assert rec is not None and await asyncio.to_thread(rec.flush)
    assert rec.path is not None
    rec.chunk_polls = 5  # retention runs at every pack: at every fifth poll here
    # another console's recording of three days ago: kept for seven
    other = rec.path.parent / "20261127-010000-77-0.podrec"
    other.write_bytes(b"SQLite format 3\0" + b"\0" * 4000)
    os.utime(other, (T0 - 3 * 86400, T0 - 3 * 86400))
    polls = 1
    # a TTFT over its limit: pending (for: 10 s) when the first step comes
    busy.ttft = 9.0
    await busy.poll()
    polls += 1
    for by in STEPS:
        w.clock.step_wall(by)  # between two polls, as NTP does it
        for i in range(12):  # 24 s of decoding: two packs, two retention passes
            await busy.poll()
            polls += 1
            if by == 60.0 and i == 0:  # 4 s of the 10 s since it became true
                (ttft,) = [a for a in w.session.alerts.active.values()
                           if a.key == "ttft:FLASH"]
                assert ttft.state == "pending"
                busy.ttft = 0.4  # and gone before its for: passed
        assert _stalled_said(w) == [], by
    assert _alert_notes(w) == []  # nothing fired, nothing cleared on a step
    steps = [t for t, _ in w.notes if t.startswith("wall clock stepped")]
    assert steps == [f"wall clock stepped {s}: durations unaffected" for s in STEPS.values()]
    # no recording deleted: the other console's file, and every poll of this one
    assert other.exists()
    assert await asyncio.to_thread(rec.flush)
    tape = SqliteTape(rec.path)
    assert len(tape.times()) == polls
    clock_marks = [m for m in tape.markers() if m.kind == "clock"]
    # (in the recording's order: by wall time, the -1 h step's marker comes first)
    assert sorted(m.text for m in clock_marks) == sorted(steps)
    tape.close()

    # a firing alert's hold is monotonic too: a TTFT over its limit fires after 10 s of
    # it, and a +60 s step right after it is gone clears nothing before the hold
    busy.ttft = 9.0
    for _ in range(6):
        await busy.poll()
    assert any(t.startswith("ALERT") and "TTFT" in t for t in _alert_notes(w))
    busy.ttft = 0.4
    await busy.poll()  # gone: the hold (10 s) starts
    gone_m = w.clock.monotonic()
    w.clock.step_wall(60.0)
    while not any(t.startswith("cleared:") and "TTFT" in t for t in _alert_notes(w)):
        assert w.clock.monotonic() - gone_m < 10.0
        await busy.poll()
    assert w.clock.monotonic() - gone_m == 10.0

    # the engine hangs: STALLED within stall_after + one refresh of the last progress,
    # on the monotonic clock, a -1 h step of the wall clock in the middle
    await busy.poll()  # the counter moved since the poll before: the last progress
    last_moved = w.clock.monotonic()
    busy.hung = True
    found = None
    for i in range(40):
        if i == 5:
            w.clock.step_wall(-3600.0)
        await busy.poll()
        if "FLASH" in w.session.state().stalled:
            found = w.clock.monotonic()
            break
    assert found is not None, w.notes[-5:]
    assert AFTER - REFRESH <= found - last_moved <= AFTER + REFRESH, found - last_moved
    (said,) = _stalled_said(w)
    assert said.startswith("ALERT FLASH STALLED: 3 request(s) stuck")
    assert w.session.state().stalled["FLASH"].for_s >= AFTER - REFRESH / 2
    assert sum(t.startswith("wall clock stepped") for t, _ in w.notes) == len(STEPS) + 2
    await w.session.aclose()


async def test_a_forward_step_never_makes_a_busy_slot_stalled_at_the_next_poll(
        tmp_path: Path) -> None:
    """The finding as it was seen: ``time.time()`` stepped +60 s turned busy, healthy
    slots STALLED at the next poll (the counters had not moved for "60 s" of wall
    clock between two polls of the same reading)."""
    w = world(tmp_path, T0, refresh_s=REFRESH, record=False,
              alerts=AlertTiming(down_for_s=0, for_s=0, hold_s=0, stall_after_s=AFTER))
    w.slots.values["FLASH"] = {"running": 2.0, "generation_total": 10.0,
                               "prompt_total": 5.0, "kv_cache_usage": 0.2}
    assert await w.session.poll()
    w.clock.advance(REFRESH)
    assert await w.session.poll()  # the same reading: a slow token, not yet a stall
    w.clock.step_wall(60.0)
    w.clock.advance(REFRESH)
    assert await w.session.poll()
    assert w.session.state().stalled == {} and _stalled_said(w) == []
    assert [t for t, _ in w.notes if t.startswith("wall clock")] == [
        "wall clock stepped +1m 0s: durations unaffected"]
    # and the age of the pod reading on screen is the monotonic one: no "60 s old"
    assert w.session.state().ages.get("pod", 0.0) <= 2 * REFRESH


async def test_a_step_moves_neither_the_stop_countdown_nor_the_idle_count(
        tmp_path: Path) -> None:
    """Between two readings of the pod (every 10 s) the stop plan's countdown and idle
    count go on from the agent's last report: on the monotonic clock, so a +60 s step
    does not make a stop due (a "stop due now" that silences the slots' alerts) nor add
    a minute of idleness."""
    from msgspec.structs import replace

    from console.model.snapshot import StopPlan

    w = world(tmp_path, T0, refresh_s=REFRESH, record=False)
    plan = StopPlan(next_reason="idle", in_s=30.0, idle_s=1500.0, idle_after_s=1800.0,
                    read_at=T0, pod_now=T0)
    w.pod.pod = replace(w.pod.pod, stop_plan=plan)
    assert await w.session.poll()
    assert w.pod.calls == 1
    w.clock.step_wall(60.0)
    w.clock.advance(REFRESH)
    assert await w.session.poll()
    assert w.pod.calls == 1  # the pod keeps its cadence: this reading is the last one
    st = w.session.state()
    assert st.stop is None and not [a for a in st.alerts if a.key.startswith("stop")]
    assert st.pod is not None and st.pod.stop_plan is not None
    assert st.pod.stop_plan.stop_in(st.now) == 30.0 - REFRESH
    assert st.pod.stop_plan.idle(st.now) == 1500.0 + REFRESH
    assert [t for t, _ in w.notes if t.startswith("wall clock")] == [
        "wall clock stepped +1m 0s: durations unaffected"]


async def test_the_plots_go_on_across_a_step_back(tmp_path: Path) -> None:
    """The plots hold the last hour of points against clock time. A step back of an
    hour made every new point older, by the clock, than the last one held: dropped,
    the plots frozen for the hour. Their points keep their ages across a step."""
    w = world(tmp_path, T0, refresh_s=REFRESH, record=False)
    for _ in range(3):
        assert await w.session.poll()
        w.clock.advance(REFRESH)
    w.clock.step_wall(-3600.0)
    for _ in range(3):
        assert await w.session.poll()
        w.clock.advance(REFRESH)
    points = list(w.session.history.series("FLASH", "kv_cache_usage").points)
    assert len(points) == 6
    times = [t for t, _ in points]
    assert times == sorted(times) and times[-1] == w.clock() - REFRESH
    assert [b - a for a, b in itertools.pairwise(times)] == [REFRESH] * 5  # ages kept


async def test_the_gateway_window_goes_on_across_a_step_back(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The gateway's rates are over a window of its scrapes, kept with their wall times:
    after a step back of an hour no kept scrape was inside the window (every gateway
    rate undefined, its 5xx alert unable to fire) until the clock caught up. The real
    LiteLLM capture, served on loopback as in ``test_gateway_session``."""
    from console.config.settings import GatewaySettings
    from console.sources.collect.http import HttpClient
    from tests.session.test_gateway_session import CAPTURE, _gateway

    monkeypatch.setenv("GW_SESSION_KEY", "gw-key")
    server, url = await _gateway({"metrics": CAPTURE})
    w = world(tmp_path, T0, refresh_s=REFRESH, record=False, gateway_url=url,
              gateway=GatewaySettings(key_env="GW_SESSION_KEY"))
    w.slots.client = HttpClient()  # type: ignore[attr-defined]
    try:
        for _ in range(3):
            assert await w.session.poll()
            w.clock.advance(REFRESH)
        gw = w.session.state().gateway
        assert gw is not None and gw.window_s == 2 * REFRESH  # from the oldest kept
        w.clock.step_wall(-3600.0)
        assert await w.session.poll()
        gw = w.session.state().gateway
        assert gw is not None and gw.metrics_error is None
        assert gw.window_s == 3 * REFRESH  # still a window, of monotonic seconds
    finally:
        server.close()
        await server.wait_closed()
        await w.session.aclose()


async def _slot_server(probes: list[float]):  # type: ignore[no-untyped-def]
    """A vLLM slot on loopback (the real 0.32 capture's /metrics): it counts the
    completion probes it answers."""
    import json

    from tests.support.dp_exposition import MODEL, Core, exposition

    metrics = exposition({"0": Core(2, 1000, 500)})  # in use: probes are not held

    async def handle(reader, writer) -> None:  # type: ignore[no-untyped-def]
        line = await reader.readline()
        length = 0
        while (h := await reader.readline()) not in (b"\r\n", b""):
            if h.lower().startswith(b"content-length:"):
                length = int(h.split(b":", 1)[1])
        if length:
            await reader.readexactly(length)
        method, path = line.split()[:2]
        kind = "application/json"
        if path == b"/metrics":
            body, kind = metrics, "text/plain; version=0.0.4"
        elif path == b"/v1/models":
            body = json.dumps({"object": "list", "data": [{"id": MODEL}]})
        elif path == b"/v1/chat/completions" and method == b"POST":
            probes.append(asyncio.get_running_loop().time())
            body = json.dumps({"choices": [{"message": {"content": "OK"}}]})
        else:
            body = ""
        data = body.encode()
        writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: "
                     f"{len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_the_completion_probe_keeps_its_interval_across_a_step_back(
        tmp_path: Path) -> None:
    """A slot's completion probe comes every ``probe_interval_s``, counted from the last
    one. Counted on the wall clock, a step back of an hour held it for the hour: a
    completion path that broke meanwhile went unsaid. The real poller, on loopback."""
    from console.model.history import History
    from console.session.session import Session
    from console.session.view import ConsoleContext
    from console.sources.collect.poller import DeploymentPoller
    from console.sources.collect.targets import SlotTarget
    from tests.support.dp_exposition import MODEL

    probes: list[float] = []
    server, port = await _slot_server(probes)
    base = world(tmp_path, T0, refresh_s=REFRESH, record=False)
    clock = base.clock
    history = History(3600.0, REFRESH)
    poller = DeploymentPoller("p", (SlotTarget("FLASH", MODEL, port,
                                               f"http://127.0.0.1:{port}"),),
                              probe_interval_s=300.0, timeout_s=2.0, history=history,
                              clock=clock)
    ctx = ConsoleContext(settings=base.settings, profile_name="rtx6000-2x",
                         profile=base.ctx.profile, poller=poller,
                         registry=base.ctx.registry, history=history, clock=clock)
    session = Session(ctx)
    try:
        assert await session.poll()  # the slot's use is known from its second scrape
        clock.advance(REFRESH)
        assert await session.poll()
        await poller.probes_done()
        assert len(probes) == 1  # in use, never probed: at once
        clock.advance(100.0)
        assert await session.poll()
        clock.step_wall(-3600.0)
        clock.advance(100.0)
        assert await session.poll()
        await poller.probes_done()
        assert len(probes) == 1  # 200 s of 300
        clock.advance(100.0)  # 300 s since the probe, on the monotonic clock
        assert await session.poll()
        await poller.probes_done()
        assert len(probes) == 2
    finally:
        server.close()
        await server.wait_closed()
        await session.aclose()
