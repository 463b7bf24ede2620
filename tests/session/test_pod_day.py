"""The pod's day, told right (issue 42, "Done when" 1): one session driven through a whole
day on an injected clock whose wall and monotonic readings are separate.

busy → traffic stops → the idle warning → ``w`` extends → the extension ends → the idle
stop → ``r`` → busy (no "stopping" from the first busy reading on) → the scheduled
warning → the scheduled stop → the next morning's start; with wall-clock steps of +60 s,
-1 h and +8 days (and the +8 days taken back) between polls. Throughout: no false
STALLED, a real hang caught within one refresh of ``stall_after``, no recording deleted,
no alert fired or cleared by a step, each step logged once; a planned stop is one INFO
and no WARN or CRIT; what belonged to a run (its acknowledgement) ends with it.

The agent's answers are what the real agent serves (``StopPlan.parse`` of its
``watchdog`` document), set by the test as the agent would decide; the alert rules, the
pod run, the stall watch, the recorder and its retention are the real ones."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from pathlib import Path
from zoneinfo import ZoneInfo

from msgspec.structs import replace

from console.config.settings import AlertTiming
from console.session.record.reader import SqliteTape
from console.session.view import ConsoleState
from tests.session.test_pod_run_session import agent, container_gone, header, loud
from tests.session.world import World, world

SEOUL = ZoneInfo("Asia/Seoul")
T0 = dt.datetime(2027, 1, 14, 10, 0, tzinfo=SEOUL).timestamp()  # a Thursday, 10:00
REFRESH = 2.0
AFTER = 30.0  # the defaults: STALLED after 30 s at a 2 s refresh
SLOTS = ("FLASH", "Q27")


class Day:
    """The session, its slots' counters and the log, moved poll by poll."""

    def __init__(self, w: World) -> None:
        self.w = w
        self.tokens = 1000.0
        self.running = 3.0
        self.hung = False
        self.polls = 0

    def figures(self) -> None:
        if self.running and not self.hung:
            self.tokens += 41.0
        for slot in SLOTS:
            self.w.slots.values[slot] = {
                "running": self.running if slot == "FLASH" else 0.0,
                "generation_total": self.tokens if slot == "FLASH" else 10.0,
                "prompt_total": 500.0, "kv_cache_usage": 0.3, "ttft_p95_s": 0.4}

    async def poll(self, after: float = REFRESH) -> ConsoleState:
        self.w.clock.advance(after)
        self.figures()
        self.w.session.refresh_now()
        assert await self.w.session.poll()
        self.polls += 1
        return self.w.session.state()

    async def polls_for(self, seconds: float) -> ConsoleState:
        st = self.w.session.state()
        for _ in range(round(seconds / REFRESH)):
            st = await self.poll()
        return st

    def notes(self, prefix: str) -> list[str]:
        return [t for t, _ in self.w.notes if t.startswith(prefix)]

    def alert_notes(self) -> list[str]:
        return [t for t, _ in self.w.notes if t.startswith(("ALERT", "cleared:"))]

    def step(self, by: float) -> list[str]:
        """The wall clock alone moves (NTP, a VM resumed): what the log said before."""
        self.w.clock.step_wall(by)
        return self.alert_notes()


def iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, SEOUL).isoformat()


async def test_a_whole_day_of_one_pod(tmp_path: Path) -> None:
    w = world(tmp_path, T0, refresh_s=REFRESH,
              alerts=AlertTiming(down_for_s=0, for_s=0, hold_s=0, stall_after_s=AFTER))
    day = Day(w)
    w.pod.pod = replace(w.pod.pod, started_at=T0 - 1800)
    agent(w, next_stop_reason="schedule", stop_in_s=8 * 3600.0)
    st = await day.poll(0.0)
    rec = w.session.recorder
    assert rec is not None and await asyncio.to_thread(rec.flush) and rec.path is not None
    rec.chunk_polls = 5  # a pack, and its retention pass, every fifth poll
    other = rec.path.parent / "20270111-010000-77-0.podrec"  # another console's, 3 days old
    other.write_bytes(b"SQLite format 3\0" + b"\0" * 4000)
    os.utime(other, (T0 - 3 * 86400, T0 - 3 * 86400))
    assert st.run is not None and (st.run.number, st.run.state) == (1, "serving")
    assert "stop in" in header(st) and "(schedule)" in header(st), header(st)
    assert loud(w) == [], loud(w)

    # busy, and a +60 s step of the wall clock in the middle: no STALLED, nothing fired
    await day.polls_for(10.0)
    before = day.step(60.0)
    st = await day.polls_for(40.0)
    assert day.alert_notes() == before
    assert "FLASH" not in st.stalled and not day.notes("ALERT FLASH STALLED")

    # traffic stops: the agent counts idle time, then warns of the idle stop
    day.running = 0.0
    agent(w, busy=False, idle_s=600.0, next_stop_reason="idle", stop_in_s=1200.0)
    st = await day.poll(600.0)
    assert st.run is not None and st.run.state == "idle"
    agent(w, busy=False, idle_s=1500.0, next_stop_reason="idle", stop_in_s=300.0,
          warning=True)
    st = await day.poll(900.0)
    assert st.run is not None and st.run.state == "warned"
    assert [t for t in loud(w) if "pod stops in" in t], loud(w)

    # `w` extends by an hour: the warning goes, the header says until when
    until = w.clock() + 3600.0
    agent(w, busy=False, idle_s=1520.0, next_stop_reason="extension ends",
          stop_in_s=3600.0, extension={"until_iso": iso(until), "by": "alice",
                                       "reason": "demo at 2", "stops_at_end": False})
    st = await day.poll(20.0)
    assert not [t for t in loud(w) if "pod stops in" in t], loud(w)
    assert "extended → " in header(st) and "alice" in header(st), header(st)
    assert st.run is not None and st.run.state == "idle"  # still counted, not warned

    # an hour back on the wall clock during the extension: nothing fires or clears
    before = day.step(-3600.0)
    st = await day.poll()
    assert day.alert_notes() == before
    assert st.run is not None and st.run.state == "idle"

    # the extension ends, the pod still idle: the plan resumes with its idle stop
    agent(w, busy=False, idle_s=1700.0, next_stop_reason="idle", stop_in_s=100.0,
          warning=True)
    st = await day.poll(3600.0)
    assert st.run is not None and st.run.state == "warned"
    stop_at = w.clock() + 100.0
    w.clock.advance(99.0)
    agent(w, busy=False, idle_s=1800.0, stop_in_s=0.0, last_stop_reason="idle",
          last_stop={"reason": "idle", "at": stop_at, "by": "watchdog", "ok": None})
    await day.poll(1.0)
    container_gone(w)
    await day.poll(6.0)
    w.pod.pod = replace(w.pod.pod, status="EXITED", cost_per_hr=0.0)
    st = await day.poll(6.0)
    assert st.run is not None and (st.run.state, st.run.cause, st.run.by) == (
        "stopped", "idle", "watchdog")
    assert "stopped at" in header(st) and "(idle)" in header(st), header(st)
    for _ in range(5):
        st = await day.poll(12.0)
        assert loud(w) == [], loud(w)
    fired = [e for e in w.session.alerts.history if e.kind == "firing" and e.t >= stop_at]
    assert [e.severity for e in fired] == ["info"], fired

    # `r`: run 2, busy from its first reading: no "stopping", no old stop
    w.clock.advance(20.0)
    w.slots.down = set()
    w.pod.run(started_at=w.clock())
    day.running = 3.0
    agent(w, busy=True, next_stop_reason="schedule", stop_in_s=3 * 3600.0,
          last_stop_reason="idle",
          last_stop={"reason": "idle", "at": stop_at, "by": "watchdog", "ok": True})
    st = await day.poll()
    assert st.run is not None and (st.run.number, st.run.state) == (2, "serving")
    text = header(st)
    assert "stopping" not in text and "stopped" not in text and "stop in" in text, text
    assert loud(w) == [], loud(w)
    st = await day.polls_for(20.0)
    assert "stopping" not in header(st) and "FLASH" not in st.stalled

    # a real hang: STALLED within one refresh of stall_after, on the monotonic clock
    last_moved = w.clock.monotonic()
    day.hung = True
    found = None
    for _ in range(40):
        st = await day.poll()
        if "FLASH" in st.stalled:
            found = w.clock.monotonic()
            break
    assert found is not None
    assert AFTER - REFRESH <= found - last_moved <= AFTER + REFRESH, found - last_moved
    day.hung = False
    st = await day.polls_for(10.0)
    assert "FLASH" not in st.stalled

    # the scheduled warning, then the scheduled stop
    day.running = 0.0
    agent(w, busy=False, next_stop_reason="schedule", stop_in_s=300.0, warning=True,
          last_stop_reason="idle",
          last_stop={"reason": "idle", "at": stop_at, "by": "watchdog", "ok": True})
    st = await day.poll(600.0)
    assert st.run is not None and (st.run.number, st.run.state) == (2, "warned")
    sched_at = w.clock() + 300.0
    w.clock.advance(299.0)
    agent(w, busy=False, stop_in_s=0.0, last_stop_reason="schedule",
          last_stop={"reason": "schedule", "at": sched_at, "by": "watchdog", "ok": None})
    await day.poll(1.0)
    container_gone(w, "EXITED")
    w.pod.pod = replace(w.pod.pod, cost_per_hr=0.0)
    st = await day.poll(6.0)
    assert st.run is not None and (st.run.number, st.run.state, st.run.cause) == (
        2, "stopped", "schedule")
    assert "(schedule)" in header(st) and "(idle)" not in header(st), header(st)
    for _ in range(5):
        await day.poll(12.0)
        assert loud(w) == [], loud(w)

    # the night: +8 days on the wall clock of a display without a real-time clock, then
    # NTP takes it back; no recording goes, nothing fires, each step is told
    before = day.step(8 * 86400.0)
    for _ in range(6):
        await day.poll(10.0)
    before2 = day.step(-8 * 86400.0)
    assert before2 == before
    for _ in range(6):
        await day.poll(10.0)
    assert day.alert_notes() == before
    assert other.exists()

    # the next morning's start (cron `up`): run 3, clean
    morning = dt.datetime(2027, 1, 15, 8, 30, tzinfo=SEOUL).timestamp()
    assert morning > w.clock() + 10 * 3600  # the night went by
    w.clock.advance(morning - w.clock())
    w.slots.down = set()
    w.pod.run(started_at=w.clock())
    day.running = 3.0
    agent(w, busy=True, next_stop_reason="schedule", stop_in_s=9 * 3600.0,
          last_stop_reason="schedule",
          last_stop={"reason": "schedule", "at": sched_at, "by": "watchdog", "ok": True})
    st = await day.poll()
    assert st.run is not None and (st.run.number, st.run.state) == (3, "serving")
    assert "stopped" not in header(st) and "stopping" not in header(st), header(st)
    assert loud(w) == [], loud(w)
    st = await day.polls_for(20.0)
    assert "FLASH" not in st.stalled

    # every step told once, in the log and in the recording; no STALLED but the real one
    steps = day.notes("wall clock stepped")
    assert steps == ["wall clock stepped +1m 0s: durations unaffected",
                     "wall clock stepped -1h 0m: durations unaffected",
                     "wall clock stepped +8d 0h: durations unaffected",
                     "wall clock stepped -8d 0h: durations unaffected"], steps
    assert len(day.notes("ALERT FLASH STALLED")) == 1, day.notes("ALERT")
    assert await asyncio.to_thread(rec.flush)
    tape = SqliteTape(rec.path)
    try:
        assert len(tape.times()) == day.polls
        marks = sorted(m.text for m in tape.markers() if m.kind == "clock")
        assert marks == sorted(steps)
    finally:
        tape.close()
    await w.session.aclose()
