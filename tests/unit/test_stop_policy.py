"""The pod's stop policy, clock in hand: every transition, in the profile's zone, across
DST changes, with extensions, idleness and the busy grace."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from pod_agent import stoppolicy as sp
from pod_agent.profile import Schedule

KST = ZoneInfo("Asia/Seoul")
NY = ZoneInfo("America/New_York")


def at(y: int, mo: int, d: int, h: int, mi: int, tz: dt.tzinfo = KST, s: int = 0) -> float:
    return dt.datetime(y, mo, d, h, mi, s, tzinfo=tz).timestamp()


def seoul(**kw) -> Schedule:
    return Schedule(timezone="Asia/Seoul", start="08:30", stop="18:00",
                    days=["mon", "tue", "wed", "thu", "fri"], **kw)


MON = (2026, 11, 30)  # a Monday


def run(sched: Schedule, st: sp.PolicyState, t: float, busy: bool = False) -> sp.Decision:
    """One tick, and what the supervisor does with its decision: a warning is sent (and
    remembered), a stop carries out the day's scheduled stop and ends the extension."""
    if busy:
        st.touch(t)
    d = sp.decide(sched, st, t, busy)
    if d.announce:
        st.note_warning(d, t)
    if d.stop:
        day = sp.done_day(sched, st, t, d.reason)
        if day is not None:
            st.last_stop_day = day
        st.extension = None
        if d.reason == "idle":
            st.touch(t)
    return d


def ticks(sched: Schedule, st: sp.PolicyState, t0: float, t1: float, step: float = 30.0,
          busy: bool = False) -> tuple[float | None, list[tuple[float, sp.Decision]]]:
    """The agent's ticks every ``step`` s from t0 to t1 (both included) until one stops
    the pod: that instant (None: no stop) and every decision on the way."""
    seen: list[tuple[float, sp.Decision]] = []
    t = t0
    while t <= t1:
        d = run(sched, st, t, busy)
        seen.append((t, d))
        if d.stop:
            return t, seen
        t += step
    return None, seen


def first_warning(seen: list[tuple[float, sp.Decision]]) -> tuple[float, sp.Decision]:
    return next((t, d) for t, d in seen if d.announce)


def test_the_scheduled_stop_warns_then_stops_once_in_the_profiles_zone() -> None:
    sched = seoul()
    st = sp.PolicyState(last_activity=at(*MON, 9, 0))
    d = run(sched, st, at(*MON, 17, 45))
    assert not d.stop and not d.warn and d.next_reason == "schedule"
    assert d.next_at == at(*MON, 18, 0)
    d = run(sched, st, at(*MON, 17, 50))
    assert d.warn and not d.stop and d.warn_key() == f"schedule@{round(at(*MON, 18, 0))}"
    assert not run(sched, st, at(*MON, 17, 59, s=59)).stop
    d = run(sched, st, at(*MON, 18, 0))
    assert d.stop and d.reason == "schedule"
    assert not run(sched, st, at(*MON, 18, 5)).stop  # once a day
    # the laptop's zone is irrelevant: 09:00 UTC is 18:00 in Seoul
    st2 = sp.PolicyState(last_activity=at(*MON, 9, 0))
    stopped, _ = ticks(sched, st2, at(*MON, 8, 45, tz=dt.UTC), at(*MON, 9, 5, tz=dt.UTC))
    assert stopped == at(*MON, 9, 0, tz=dt.UTC)


def test_a_day_off_stops_nothing_and_names_the_next_working_day() -> None:
    sched = seoul()
    st = sp.PolicyState()
    sat = (2026, 11, 28)
    d = run(sched, st, at(*sat, 19, 0))
    assert not d.stop and d.next_at == at(*MON, 18, 0)


def test_disarmed_nothing_stops() -> None:
    sched = seoul(idle_stop_after="5m")
    st = sp.PolicyState(armed=False, last_activity=at(*MON, 9, 0))
    d = run(sched, st, at(*MON, 19, 0))
    assert not d.stop and d.next_at is None


def test_an_extension_holds_the_stop_and_ends_into_it() -> None:
    sched = seoul(idle_stop_after="30m")
    st = sp.PolicyState(last_activity=at(*MON, 17, 0))
    t = at(*MON, 17, 30)
    st.extension = sp.make_extension(sched, st, t, sp.extension_until("20:00", sched, t),
                                     "alice", "eval run")
    assert st.extension.holds == at(*MON, 18, 0)
    # not the schedule, not 2 h of idleness: the extension's end, said as the idleness
    # it will be by then (nothing came since 17:00)
    stopped, seen = ticks(sched, st, at(*MON, 17, 30), at(*MON, 21, 0))
    assert stopped == at(*MON, 20, 0)
    assert all(d.next_at == at(*MON, 20, 0) and d.next_reason == "idle" for _, d in seen)
    assert first_warning(seen)[0] == at(*MON, 19, 50)
    assert seen[-1][1].reason == "idle"
    # a request on the way: the same stop at the same instant, now the held schedule's
    st = sp.PolicyState(last_activity=at(*MON, 17, 0))
    t = at(*MON, 17, 30)
    st.extension = sp.make_extension(sched, st, t, sp.extension_until("20:00", sched, t),
                                     "alice", "eval run")
    ticks(sched, st, at(*MON, 19, 45), at(*MON, 19, 55))
    run(sched, st, at(*MON, 19, 58), busy=True)
    d = run(sched, st, at(*MON, 20, 0))
    assert d.stop and d.reason == "extension ended"


def test_an_extension_past_midnight_still_ends_into_the_stop_it_held() -> None:
    sched = seoul()
    st = sp.PolicyState(last_activity=at(*MON, 17, 0))
    t = at(*MON, 18, 0, s=30)  # the stop is due: extended at the last moment
    assert sp.stop_pending(sched, t, None) is not None
    st.extension = sp.make_extension(sched, st, t,
                                     sp.extension_until("tomorrow 01:00", sched, t), "bob", "")
    assert st.extension.until == at(2026, 12, 1, 1, 0)
    stopped, seen = ticks(sched, st, at(2026, 12, 1, 0, 40), at(2026, 12, 1, 1, 30))
    assert stopped == at(2026, 12, 1, 1, 0) and seen[-1][1].reason == "extension ended"
    assert first_warning(seen)[0] == at(2026, 12, 1, 0, 50)


def test_an_extension_before_the_stop_only_keeps_idleness_away() -> None:
    sched = seoul(idle_stop_after="30m")
    st = sp.PolicyState(last_activity=at(*MON, 9, 0))
    t = at(*MON, 10, 0)
    st.extension = sp.make_extension(sched, st, t, sp.extension_until("+2h", sched, t),
                                     "carol", "demo at 11")
    assert st.extension.holds is None
    d = run(sched, st, at(*MON, 11, 0))  # 2 h idle, still extended: it stops at its end
    assert not d.stop and d.next_reason == "idle" and d.next_at == at(*MON, 12, 0)
    stopped, seen = ticks(sched, st, at(*MON, 11, 30), at(*MON, 12, 30))
    assert stopped == at(*MON, 12, 0) and seen[-1][1].reason == "idle"
    assert first_warning(seen)[0] == at(*MON, 11, 50)  # warned, as every stop is


def test_idle_stop_counts_from_the_last_request_and_not_while_one_runs() -> None:
    sched = seoul(idle_stop_after="45m", warn_before="10m")
    st = sp.PolicyState(last_activity=at(*MON, 13, 0))
    d = run(sched, st, at(*MON, 13, 31))
    assert not d.stop and not d.warn and d.next_reason == "idle"
    assert d.idle_s == 31 * 60 and d.next_at == at(*MON, 13, 45)
    assert run(sched, st, at(*MON, 13, 36)).warn
    d = run(sched, st, at(*MON, 13, 50), busy=True)  # a request running: not idle
    assert not d.stop and d.next_at == at(*MON, 14, 35)
    stopped, seen = ticks(sched, st, at(*MON, 14, 0), at(*MON, 15, 0))
    assert stopped == at(*MON, 14, 35) and seen[-1][1].reason == "idle"
    assert first_warning(seen)[0] == at(*MON, 14, 25)


def test_idle_stop_outside_working_hours_only() -> None:
    sched = seoul(idle_stop_after="45m", idle_stop_in_hours=False)
    st = sp.PolicyState(last_activity=at(*MON, 7, 0))
    stopped, _ = ticks(sched, st, at(*MON, 7, 30), at(*MON, 8, 0))
    assert stopped == at(*MON, 7, 45)  # before 08:30: idle stop applies
    st = sp.PolicyState(last_activity=at(*MON, 9, 0))
    d = run(sched, st, at(*MON, 15, 0))  # 6 h idle inside hours: kept
    assert not d.stop and d.next_reason == "schedule"


def test_the_busy_grace_postpones_and_is_bounded() -> None:
    sched = seoul(busy_grace="15m")
    st = sp.PolicyState(last_activity=at(*MON, 17, 0))
    run(sched, st, at(*MON, 17, 50))  # the warning
    d = run(sched, st, at(*MON, 18, 0), busy=True)
    assert not d.stop and d.grace_until == at(*MON, 18, 15) and d.warn
    assert not run(sched, st, at(*MON, 18, 14, s=59), busy=True).stop
    d = run(sched, st, at(*MON, 18, 15), busy=True)  # still busy: the grace is over
    assert d.stop and d.reason == "schedule"
    st = sp.PolicyState(last_activity=at(*MON, 17, 0))
    run(sched, st, at(*MON, 17, 50))
    assert not run(sched, st, at(*MON, 18, 0), busy=True).stop
    assert run(sched, st, at(*MON, 18, 3), busy=False).stop  # the requests finished


def test_nothing_outlives_its_extension_plus_grace() -> None:
    sched = seoul(busy_grace="10m")
    st = sp.PolicyState(last_activity=at(*MON, 17, 0))
    t = at(*MON, 17, 0)
    st.extension = sp.make_extension(sched, st, t, at(*MON, 19, 0), "dan", "")
    t = at(*MON, 18, 45)
    stopped = None
    while t < at(*MON, 21, 0):
        if run(sched, st, t, busy=True).stop:
            stopped = t
            break
        t += 30
    assert stopped == at(*MON, 19, 10)


def test_dst_spring_forward_stop_in_the_skipped_hour() -> None:
    """New York, 2026-03-08: 02:00 EST becomes 03:00 EDT; a stop at 02:30 happens at the
    change, and next_stop says that same instant."""
    sched = Schedule(timezone="America/New_York", stop="02:30", days=["sun"])
    st = sp.PolicyState(last_activity=at(2026, 3, 8, 0, 0, tz=NY))
    before = at(2026, 3, 8, 1, 50, tz=NY)
    d = run(sched, st, before)
    change = dt.datetime(2026, 3, 8, 7, 0, tzinfo=dt.UTC).timestamp()
    assert d.next_at == change and d.warn
    assert not run(sched, st, change - 1).stop
    assert run(sched, st, change).stop


def test_dst_fall_back_stops_at_the_first_of_the_repeated_times() -> None:
    sched = Schedule(timezone="Europe/Berlin", stop="02:30", days=["sun"])
    st = sp.PolicyState()
    first = dt.datetime(2026, 10, 25, 0, 30, tzinfo=dt.UTC).timestamp()  # CEST
    assert run(sched, st, first - 900).next_at == first
    stopped, _ = ticks(sched, st, first - 600, first + 600)
    assert stopped == first
    assert not run(sched, st, first + 3600).stop  # 02:30 CET: the same day, done


def test_dst_day_stop_instant_and_idle_in_real_minutes() -> None:
    sched = Schedule(timezone="America/New_York", stop="18:00",
                     days=["sat", "sun"], idle_stop_after="45m", idle_stop_in_hours=True)
    st = sp.PolicyState(last_activity=at(2026, 3, 7, 17, 0, tz=NY))
    sat = run(sched, st, at(2026, 3, 7, 12, 0, tz=NY))
    assert sat.next_reason == "idle"
    assert sp.next_scheduled(sched, at(2026, 3, 7, 12, 0, tz=NY)) == \
        dt.datetime(2026, 3, 7, 23, 0, tzinfo=dt.UTC).timestamp()  # EST
    assert sp.next_scheduled(sched, at(2026, 3, 8, 12, 0, tz=NY)) == \
        dt.datetime(2026, 3, 8, 22, 0, tzinfo=dt.UTC).timestamp()  # EDT
    # idle across the change: 01:30 EST + 45 real minutes = 03:15 EDT
    st = sp.PolicyState(last_activity=at(2026, 3, 8, 1, 30, tz=NY))
    d = run(sched, st, at(2026, 3, 8, 1, 31, tz=NY))
    assert d.next_at == at(2026, 3, 8, 3, 15, tz=NY)


@pytest.mark.parametrize("text,want", [
    ("+1h", at(*MON, 18, 0)), ("+90m", at(*MON, 18, 30)), ("20:00", at(*MON, 20, 0)),
    ("tomorrow 08:00", at(2026, 12, 1, 8, 0)), ("Tomorrow 8:00", at(2026, 12, 1, 8, 0)),
    ("2026-11-30T21:15:00+09:00", at(*MON, 21, 15)),
    ("2026-11-30T21:15", at(*MON, 21, 15))])
def test_extension_times(text: str, want: float) -> None:
    assert sp.extension_until(text, seoul(), at(*MON, 17, 0)) == want


@pytest.mark.parametrize("text,words", [
    ("2026-11-30T16:00:00+09:00", "not in the future"), ("+25h", "more than 24 h"),
    ("tonight", r"give \+1h"), ("+1x", "not a duration"),
    ("08:00", "already past today"), ("24:00", "not a time of day"),
    ("tomorrow 17:30", "more than 24 h")])
def test_extension_refusals(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        sp.extension_until(text, seoul(), at(*MON, 17, 0))


def test_the_watchdog_record_survives_and_a_broken_one_is_discarded(tmp_path) -> None:
    from pod_agent import stopstate

    path = str(tmp_path / "watchdog.json")
    st = sp.PolicyState()
    st.extension = sp.Extension(at(*MON, 20, 0), "alice", "eval", at(*MON, 17, 0),
                                at(*MON, 18, 0), True)
    stopstate.save(path, stopstate.record(st, "run-1", at(*MON, 17, 0)))
    raw, problem = stopstate.read(path)
    back = sp.PolicyState()
    assert problem is None
    assert stopstate.restore(back, raw, "run-1", at(*MON, 17, 5), 0.0) == []
    assert back.extension == st.extension
    (tmp_path / "watchdog.json").write_text('{"until": "soon"')
    raw, problem = stopstate.read(path)
    assert raw is stopstate.MISSING and "not JSON" in (problem or "")


def test_the_agent_clock_reads_its_anchor_and_survives_a_restart(monkeypatch) -> None:
    from pod_agent import clock

    real0 = 1_000_000.0
    monkeypatch.setenv("POD_AGENT_CLOCK", clock.spec_for(at(*MON, 17, 59), 60.0, real0))
    monkeypatch.setattr("time.time", lambda: real0 + 2.0)
    assert clock.now() == at(*MON, 18, 1) and clock.speed() == 60.0
    monkeypatch.setenv("POD_AGENT_CLOCK", "garbage")
    assert clock.now() == real0 + 2.0  # never a random time


def test_traffic_from_the_real_exposition() -> None:
    from pod_agent import traffic
    from tests.conftest import FIXTURES

    base = FIXTURES / "vllm-0.32.0-cpu" / "plain"
    idle = traffic.parse((base / "metrics-idle.txt").read_text())
    load = traffic.parse((base / "metrics-after-load.txt").read_text())
    assert idle.in_flight == 0 and load.finished == 18
    assert traffic.active(idle, load) and not traffic.active(load, load)
    assert not traffic.active(load, idle)  # a counter going down is a restart
    assert not traffic.active(None, None)
    assert traffic.active(None, traffic.SlotTraffic(1.0, 0.0))


async def test_the_supervisor_warns_before_the_memory_guard_and_before_a_stop(
        tmp_path, monkeypatch) -> None:
    """In the supervisor: MemAvailable within a quarter of the floor warns once (audit,
    status) and clears when memory recovers; the schedule's warning is sent once per
    stop, to the audit log and the webhook, with the key that extends."""
    import json

    from pod_agent import supervisor as sv
    from tests.conftest import PROFILES

    monkeypatch.setenv("POD_AGENT_HOME", str(tmp_path))
    monkeypatch.setenv("RUNPOD_POD_ID", "pod-mem")
    sent: list[str] = []

    def post(url: str, text: str) -> tuple[bool, str]:
        sent.append(text)
        return True, "HTTP 200"

    monkeypatch.setattr("pod_agent.watchdog.post_webhook", post)
    monkeypatch.setenv("POD_AGENT_WEBHOOK_URL", "http://127.0.0.1:9/hook")
    sup = sv.Supervisor(str(PROFILES / "10-rtx6000-2x.yaml"), vllm="false",
                        apply_patches=False)
    sup.watch.state.mem_floor_gib = 8.0
    mem = {"gib": 9.0}
    monkeypatch.setattr("pod_agent.hostcheck.mem_available_gib", lambda: mem["gib"])
    monday_1750 = at(*MON, 17, 50)  # Seoul: 10 minutes before the profile's stop
    await sup.watchdog_tick(monday_1750)
    wd = sup.watch.to_json(monday_1750)
    assert wd["memory_warning"] and "below it the guard stops slot" in wd["memory_warning"]
    assert wd["warning"] and wd["next_stop_reason"] == "schedule"
    await sup.watchdog_tick(monday_1750 + 30)  # once, not every tick
    mem["gib"] = 20.0
    await sup.watchdog_tick(monday_1750 + 60)
    assert sup.watch.to_json(monday_1750 + 60)["memory_warning"] is None
    audit = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    warns = [a["reason"] for a in audit if a["op"] == "stop-warning"]
    assert sorted(warns) == ["memory guard", "schedule"], warns
    assert len(sent) == 2 and any("press w in pod-console" in m and "18:00 KST" in m
                                  for m in sent), sent
    assert all(a["ok"] for a in audit if a["op"] == "webhook")
    assert "http://127.0.0.1:9" not in (tmp_path / "audit.jsonl").read_text()  # no URL


def test_a_pod_started_after_its_stop_time_gets_warned_time_to_be_extended() -> None:
    sched = seoul(warn_before="10m")
    started = at(*MON, 19, 0)  # an evening `up`
    st = sp.PolicyState(last_activity=started)
    d = run(sched, st, started)
    assert not d.stop and d.warn and d.announce and d.next_at == at(*MON, 19, 10)
    t = started + 60
    st.extension = sp.make_extension(sched, st, t, sp.extension_until("22:00", sched, t),
                                     "erin", "late eval")
    assert not run(sched, st, at(*MON, 19, 10)).stop  # extended in time: kept
    st2 = sp.PolicyState(last_activity=started)
    stopped, _ = ticks(sched, st2, started, at(*MON, 19, 30))
    assert stopped == at(*MON, 19, 10)  # not extended: stopped after the warning


async def test_an_extension_that_cannot_be_audited_is_refused_and_not_kept(
        tmp_path, monkeypatch) -> None:
    from pod_agent import supervisor as sv
    from tests.conftest import PROFILES

    monkeypatch.setenv("POD_AGENT_HOME", str(tmp_path))
    sup = sv.Supervisor(str(PROFILES / "10-rtx6000-2x.yaml"), vllm="false",
                        apply_patches=False)

    def full_disk(rec: dict) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("pod_agent.audit.record", full_disk)
    sent: list[dict] = []

    async def send(ev: dict) -> None:
        sent.append(ev)

    await sup.dispatch({"op": "watchdog", "cmd": "extend", "until": "+1h", "by": "alice"},
                       send)
    assert sent[-1]["kind"] == "error" and "No space left" in sent[-1]["message"]
    assert sup.watch.policy.extension is None and not (tmp_path / "extension.json").exists()
