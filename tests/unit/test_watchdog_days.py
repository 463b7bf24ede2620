"""The watchdog keeps its word across days (issue 29, findings 1–9; issue 31, 6 and 19).

The real supervisor (``pod_agent.supervisor``) on an injected pod clock — the wall
clock and the monotonic one apart, so a wall-clock step is one line — in Asia/Seoul
(Monday into Tuesday) and Europe/Berlin (Saturday into Sunday, the night the clocks go
back), ticking every 30 s as the agent does. Only RunPod's stop call and the slots'
``/metrics`` are stand-ins: what the agent decides, writes on its volume, audits and
says in ``status`` is the real thing. A stopped pod that resumes is a new supervisor on
the same volume, in a new run of the container, as on RunPod. The last test runs the
real ``pod-agent serve`` process through a stop and the next morning's start."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from pod_agent import clock
from pod_agent import stoppolicy as sp
from pod_agent import supervisor as sv
from pod_agent.profile import Schedule
from pod_agent.profiles import check_file
from pod_agent.stop_watch import tick_wait_s
from pod_agent.traffic import SlotTraffic
from tests.conftest import REPO

TICK = 30.0
ZONES = {
    "seoul": ("Asia/Seoul", dt.date(2026, 11, 30)),  # a Monday, then Tuesday
    "berlin": ("Europe/Berlin", dt.date(2026, 10, 24)),  # Saturday; Sunday 03:00 → 02:00
}
EVERY_DAY = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def local(zone: str, day: int, h: int, m: int) -> float:
    """Day ``day`` (0, 1, …) of the zone's scenario at h:m local time."""
    tz, d0 = ZONES[zone]
    d = d0 + dt.timedelta(days=day)
    return dt.datetime(d.year, d.month, d.day, h, m, tzinfo=ZoneInfo(tz)).timestamp()


class Pod:
    """One pod's volume, its clocks, its traffic, and the agent that runs on it."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch, zone: str,
                 **schedule: Any) -> None:
        self.root = root
        self.zone = zone
        self.wall = 0.0
        self.mono = 10_000.0
        self.busy = False
        self.finished = 0.0
        self.run = 1
        self.stops: list[tuple[float, str | None]] = []
        self.sup: sv.Supervisor | None = None
        sched = {"timezone": ZONES[zone][0], "start": "08:30", "stop": "18:00",
                 "days": EVERY_DAY, **schedule}
        lines = "".join(f"  {k}: {json.dumps(v)}\n" for k, v in sched.items())
        self.profile = root / "10-days.yaml"
        self.profile.write_text(
            "name: days\ngpu_type_ids: [NVIDIA H200]\nimage: local\nschedule:\n" + lines +
            "slots:\n  TINY:\n    served_model_name: tiny\n    hf_repo_id: local/tiny\n"
            "    port: 1031\n    gpus: [0]\n    gpu_util: 0.5\n    max_model_len: 2048\n")
        self.home = root / "home"
        monkeypatch.setenv("POD_AGENT_HOME", str(self.home))
        monkeypatch.setenv("RUNPOD_POD_ID", "pod-days")
        monkeypatch.setenv("POD_AGENT_RUN_ID", "run-1")
        monkeypatch.delenv("POD_AGENT_WEBHOOK_URL", raising=False)
        monkeypatch.delenv("POD_AGENT_CLOCK", raising=False)
        monkeypatch.setattr(clock, "now", lambda: self.wall)
        monkeypatch.setattr(clock, "monotonic", lambda: self.mono, raising=False)
        monkeypatch.setattr("pod_agent.watchdog.stop_pod", self._stop_pod)
        monkeypatch.setattr("pod_agent.hostcheck.mem_available_gib", lambda: 64.0)
        monkeypatch.setattr("pod_agent.traffic.read_all", self._traffic)
        self._mp = monkeypatch

    # -- stand-ins for RunPod and the slots ---------------------------------------------
    def _stop_pod(self, pod_id: str | None, timeout_s: float = 60.0) -> tuple[bool, str]:
        self.stops.append((self.wall, self.sup.watch.decision.reason if self.sup else None))
        return True, 'pod "pod-days" stopped'

    def _traffic(self, ports: dict[str, int], timeout_s: float) -> dict[str, SlotTraffic]:
        if self.busy:
            self.finished += 1
        return {n: SlotTraffic(1.0 if self.busy else 0.0, self.finished) for n in ports}

    # -- the agent ---------------------------------------------------------------------
    def start(self, wall: float) -> sv.Supervisor:
        """``pod-agent serve`` starts (in this run of the container)."""
        self.wall = wall
        self.sup = sv.Supervisor(str(self.profile), vllm="false", apply_patches=False)
        return self.sup

    def resume(self, wall: float) -> sv.Supervisor:
        """The pod was stopped and is started again: a new container, a new agent."""
        self.run += 1
        self._mp.setenv("POD_AGENT_RUN_ID", f"run-{self.run}")
        self.mono += 3600.0  # another boot or not: only differences mean anything
        return self.start(wall)

    async def until(self, end: float, stop_on_stop: bool = True) -> list[tuple[float, str]]:
        """Ticks every 30 s up to ``end``; the stops made (a stopped pod stops ticking)."""
        made = len(self.stops)
        assert self.sup is not None
        while self.wall <= end:
            await self.sup.watchdog_tick()
            if stop_on_stop and len(self.stops) > made:
                break
            self.wall += TICK
            self.mono += TICK
        return self.stops[made:]  # type: ignore[return-value]

    async def op(self, req: dict[str, Any]) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []

        async def send(ev: dict[str, Any]) -> None:
            got.append(ev)

        assert self.sup is not None
        await self.sup.dispatch(req, send)
        return got

    def status(self) -> dict[str, Any]:
        assert self.sup is not None
        return self.sup.watch.to_json(self.wall)

    def audit(self) -> list[dict[str, Any]]:
        p = self.home / "audit.jsonl"
        return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []

    def warnings(self) -> list[tuple[float, float, str]]:
        """(sent, announced stop, reason) on the pod's clock, from the audit log."""
        out = []
        for a in self.audit():
            if a["op"] == "stop-warning" and a.get("reason") != "memory guard":
                at = dt.datetime.fromisoformat(a["at"]).timestamp()
                out.append((at - a["in_s"], at, a["reason"]))
        return out

    def assert_warned(self, stop_at: float) -> None:
        """The stop was announced, for that instant, ``warn_before`` ahead (one tick of
        slack: the warning goes out on the first tick inside the window)."""
        assert self.sup is not None
        warn_s = self.sup.profile.schedule.seconds("warn_before") or 0.0
        before = [w for w in self.warnings() if w[0] <= stop_at]
        assert before, f"no warning before the stop at {sp.iso(stop_at)}"
        sent, announced, _ = before[-1]
        assert stop_at - sent >= warn_s - TICK, (sp.iso(sent), sp.iso(stop_at))
        assert abs(announced - stop_at) <= TICK, (sp.iso(announced), sp.iso(stop_at))


@pytest.fixture
def pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def make(zone: str, **schedule: Any) -> Pod:
        return Pod(tmp_path, monkeypatch, zone, **schedule)
    return make


def _result(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert events and events[-1]["kind"] == "result", events
    return events[-1]


# -- 1. an extension never outlives a stop ---------------------------------------------

@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("how", ["stop-now", "down --force", "down, announced"])
async def test_a_stop_ends_the_extension_and_the_next_morning_keeps_its_pod(
        pod, zone: str, how: str) -> None:
    p = pod(zone)
    p.start(local(zone, 0, 17, 30))
    ext = _result(await p.op({"op": "watchdog", "cmd": "extend", "until": "20:00",
                              "by": "alice", "reason": "eval"}))["extension"]
    assert ext["until"] == local(zone, 0, 20, 0)
    assert await p.until(local(zone, 0, 19, 0)) == []  # 18:00 held
    stopped_at = p.wall
    if how == "stop-now":  # `w` → stop now, or `pod-agent watchdog stop-now`
        evs = await p.op({"op": "stop-now", "action_id": "stop-now-1", "by": "alice"})
        assert evs[-1]["kind"] == "result" and len(p.stops) == 1
    elif how == "down, announced":  # the console says so before it stops the pod
        _result(await p.op({"op": "watchdog", "cmd": "stopping", "by": "alice",
                            "reason": "down --force"}))
    # down --force: RunPod stops the container; the agent is told nothing
    p.sup = None
    # the next morning, the pod resumes: nothing of last night's extension acts
    p.resume(local(zone, 1, 8, 40))
    stops = await p.until(local(zone, 1, 9, 40))
    assert stops == [], stops
    wd = p.status()
    assert wd["extension"] is None and wd["next_stop_reason"] == "schedule"
    assert wd["next_stop"] == sp.iso(local(zone, 1, 18, 0), ZoneInfo(ZONES[zone][0]))
    last = wd["last_stop"]
    if how == "stop-now":
        assert (last["reason"], last["by"], last["ok"]) == ("stop-now", "alice", True)
        assert last["at"] == stopped_at
    elif how == "down, announced":
        assert (last["reason"], last["by"]) == ("down --force", "alice")
    else:  # seen at the start, logged
        assert last["reason"] == "stopped outside the agent" and last["at"] is None
        notes = [a for a in p.audit() if a["op"] == "watchdog-state-discarded"]
        assert [n["what"] for n in notes] == ["extension"], notes
        assert "stopped and started" in notes[0]["why"]


async def test_an_agent_restarted_after_its_extension_ended_discards_it(pod) -> None:
    """Same run of the pod (the agent alone died): an extension that ended while no
    agent ran is stale — logged, never acted on; the stop it held is warned first."""
    p = pod("seoul")
    p.start(local("seoul", 0, 17, 30))
    _result(await p.op({"op": "watchdog", "cmd": "extend", "until": "20:00", "by": "bob"}))
    assert await p.until(local("seoul", 0, 19, 30)) == []
    p.sup = None  # killed; back at 20:30
    p.start(local("seoul", 0, 20, 30))
    notes = [a for a in p.audit() if a["op"] == "watchdog-state-discarded"]
    assert notes and "stale" in notes[-1]["why"]
    stops = await p.until(local("seoul", 0, 21, 30))
    assert stops == [(local("seoul", 0, 20, 40), "schedule")], stops
    p.assert_warned(stops[0][0])


# -- 2. every stop is warned, whatever its reason ---------------------------------------

async def test_the_idle_stop_at_an_extensions_end_is_warned(pod) -> None:
    p = pod("seoul", idle_stop_after="30m", warn_before="10m")
    p.start(local("seoul", 0, 9, 30))
    p.busy = True
    await p.until(local("seoul", 0, 10, 0))
    p.busy = False
    await p.until(local("seoul", 0, 10, 25))
    assert p.warnings()[-1][2] == "idle"  # 10:20, for 10:30
    # kept for two hours: it holds no scheduled stop (18:00 is later)
    ext = _result(await p.op({"op": "watchdog", "cmd": "extend", "until": "+2h",
                              "by": "carol"}))["extension"]
    assert ext["holds"] is None and ext["stops_at_end"] is False
    stops = await p.until(local("seoul", 0, 13, 0))
    assert stops == [(ext["until"], "idle")], stops
    p.assert_warned(stops[0][0])  # at 12:15, not only the one two hours before


# -- 3. across midnight: yesterday's held stop never comes into working hours ----------

@pytest.mark.parametrize("zone", ZONES)
async def test_an_overnight_extension_leaves_the_working_day_alone(pod, zone: str) -> None:
    p = pod(zone)
    p.start(local(zone, 0, 17, 30))
    ext = _result(await p.op({"op": "watchdog", "cmd": "extend", "until": "+23h",
                              "by": "dan", "reason": "overnight eval"}))["extension"]
    stops = await p.until(local(zone, 1, 19, 0))
    # nothing at its end (16:30 in Seoul; 15:30 in Berlin: the clocks went back), the
    # day's own stop at 18:00, warned
    assert stops == [(local(zone, 1, 18, 0), "schedule")], stops
    p.assert_warned(stops[0][0])
    assert ext["until"] == local(zone, 0, 17, 30) + 23 * 3600
    assert ext["crosses_midnight"] is True and ext["replaces_next_stop"] is False
    assert ext["stops_at_end"] is False


@pytest.mark.parametrize("zone", ZONES)
async def test_an_overnight_extension_can_replace_the_next_evenings_stop(
        pod, zone: str) -> None:
    p = pod(zone)
    p.start(local(zone, 0, 17, 30))
    ext = _result(await p.op({"op": "watchdog", "cmd": "extend", "until": "+23h",
                              "by": "dan", "replaces_next_stop": True}))["extension"]
    assert ext["replaces_next_stop"] is True and ext["stops_at_end"] is True
    end = local(zone, 0, 17, 30) + 23 * 3600
    stops = await p.until(local(zone, 1, 19, 0))
    assert stops == [(end, "extension ended")], stops
    p.assert_warned(end)
    wd = p.status()
    assert wd["last_stop_day"] == (ZONES[zone][1] + dt.timedelta(days=1)).isoformat()
    # that day's 18:00 is done by it: the agent, still alive, plans the next day's
    assert wd["extension"] is None
    await p.until(local(zone, 1, 19, 0), stop_on_stop=False)
    assert len(p.stops) == 1 and p.status()["next_stop"].startswith(
        (ZONES[zone][1] + dt.timedelta(days=2)).isoformat())


def test_the_cli_says_whether_an_extension_replaces_the_next_stop(monkeypatch) -> None:
    from pod_agent import cli

    sent: list = []
    monkeypatch.setattr(cli, "relay", lambda req: sent.append(req) or 0)
    cli.main(["watchdog", "extend", "tomorrow 10:00", "--replaces-next-stop", "--by", "x"])
    cli.main(["watchdog", "extend", "+23h", "--by", "x"])
    assert [r.replaces_next_stop for r in sent] == [True, False]
    assert sent[0].until == "tomorrow 10:00"


async def test_a_disarm_holds_across_an_agent_restart_not_across_a_pod_stop(pod) -> None:
    p = pod("seoul")
    p.start(local("seoul", 0, 17, 0))
    _result(await p.op({"op": "watchdog", "cmd": "disarm"}))
    p.sup = None
    p.start(local("seoul", 0, 17, 30))  # the agent alone restarted: still disarmed
    assert p.status()["armed"] is False
    assert await p.until(local("seoul", 0, 19, 0)) == []
    p.sup = None
    p.resume(local("seoul", 1, 8, 40))  # stopped by hand, started the next morning
    assert p.status()["armed"] is True


# -- 4. a clock time already past today is refused --------------------------------------

async def test_a_clock_time_already_past_today_is_refused(pod) -> None:
    p = pod("seoul")
    p.start(local("seoul", 0, 17, 50))
    evs = await p.op({"op": "watchdog", "cmd": "extend", "until": "17:45", "by": "erin"})
    assert evs[-1]["kind"] == "error" and "already past today" in evs[-1]["message"]
    assert "tomorrow 17:45" in evs[-1]["message"]
    assert p.sup is not None and p.sup.watch.policy.extension is None
    ext = _result(await p.op({"op": "watchdog", "cmd": "extend", "until": "tomorrow 17:45",
                              "by": "erin"}))["extension"]
    assert ext["until"] == local("seoul", 1, 17, 45)


# -- 5. an agent restarted inside the warning or the grace keeps the due time -----------

@pytest.mark.parametrize("restart", [(17, 55), (18, 5)])
async def test_a_restarted_agent_keeps_the_stop_and_its_grace(pod, restart) -> None:
    p = pod("seoul", busy_grace="15m", warn_before="10m")
    p.start(local("seoul", 0, 17, 30))
    p.busy = True  # requests all evening: the grace runs out
    assert await p.until(local("seoul", 0, *restart) - TICK) == []
    p.sup = None
    p.start(local("seoul", 0, *restart))  # same run: only the agent restarted
    stops = await p.until(local("seoul", 0, 19, 0))
    assert stops == [(local("seoul", 0, 18, 15), "schedule")], stops
    assert len(p.warnings()) == 1  # the 17:50 one, not again


# -- 6. an idle limit within warn_before is refused, with its field ---------------------

@pytest.mark.parametrize("sched,said", [
    ("  idle_stop_after: 5m\n", "warn_before (by default) 10m"),
    ("  idle_stop_after: 10m\n  warn_before: 10m\n", "warn_before 10m"),
    ("  warn_before: 25m\n  idle_stop_after: 20m\n", "warn_before 25m")])
def test_an_idle_limit_within_the_warning_is_refused(tmp_path: Path, sched: str,
                                                     said: str) -> None:
    f = tmp_path / "10-x.yaml"
    f.write_text("gpu_type_ids: [A]\nimage: i\nschedule:\n  timezone: UTC\n" + sched +
                 "slots:\n  A:\n    served_model_name: a\n    hf_repo_id: o/a\n"
                 "    port: 8000\n    gpus: [0]\n    gpu_util: 0.5\n    max_model_len: 99\n")
    profile, problems = check_file(f)
    line = 1 + f.read_text().splitlines().index(
        next(x for x in f.read_text().splitlines() if "idle_stop_after" in x))
    assert profile is None and [(p.field, p.line) for p in problems] == [
        ("schedule.idle_stop_after", line)], problems
    assert said in problems[0].message and str(problems[0]).startswith(f"{f}:{line}: ")


def test_an_idle_limit_longer_than_the_warning_loads(tmp_path: Path) -> None:
    f = tmp_path / "10-x.yaml"
    f.write_text("gpu_type_ids: [A]\nimage: i\nschedule:\n  idle_stop_after: 11m\n"
                 "slots:\n  A:\n    served_model_name: a\n    hf_repo_id: o/a\n"
                 "    port: 8000\n    gpus: [0]\n    gpu_util: 0.5\n    max_model_len: 99\n")
    assert check_file(f)[1] == []


# -- 7. no warning for a stop that cannot happen -----------------------------------------

def test_no_warning_for_an_idle_stop_that_would_fall_in_working_hours() -> None:
    sched = Schedule(timezone="Asia/Seoul", start="08:30", stop="18:00", days=EVERY_DAY,
                     idle_stop_after="45m", idle_stop_in_hours=False, warn_before="10m")
    mon = local("seoul", 0, 0, 0)
    st = sp.PolicyState(last_activity=mon + 7 * 3600 + 50 * 60)  # 07:50: idle by 08:35
    t = mon + 8 * 3600
    while t < mon + 12 * 3600:
        d = sp.decide(sched, st, t, False)
        assert not d.warn and not d.stop and d.next_reason == "schedule", (sp.iso(t), d)
        t += TICK
    # before the working day it can happen, and is warned
    st = sp.PolicyState(last_activity=mon + 6 * 3600 + 30 * 60)
    d = sp.decide(sched, st, mon + 7 * 3600 + 5 * 60, False)
    assert d.warn and d.next_reason == "idle" and d.next_at == mon + 7 * 3600 + 15 * 60


# -- 8. last_stop_day and the last stop are in status ------------------------------------

async def test_status_says_when_and_why_the_pod_last_stopped(pod) -> None:
    p = pod("seoul")
    p.start(local("seoul", 0, 17, 30))
    stops = await p.until(local("seoul", 0, 18, 30))
    assert stops == [(local("seoul", 0, 18, 0), "schedule")]
    wd = p.status()
    assert wd["last_stop_day"] == "2026-11-30"
    assert wd["last_stop"]["reason"] == "schedule" and wd["last_stop"]["ok"] is True
    assert wd["last_stop"]["at_iso"] == "2026-11-30T18:00:00+09:00"
    assert wd["last_stop_reason"] == "schedule"
    p.resume(local("seoul", 1, 8, 40))  # kept on the volume: the morning after says it
    assert p.status()["last_stop"]["at_iso"] == "2026-11-30T18:00:00+09:00"


# -- 9. the tick follows the accelerated clock -------------------------------------------

async def test_the_watchdog_ticks_in_pod_time_on_an_accelerated_clock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = Pod(tmp_path, monkeypatch, "seoul")
    monkeypatch.undo()  # the real clocks, at x60 (the demo's --clock-speed 60)
    monkeypatch.setenv("POD_AGENT_HOME", str(p.home))
    monkeypatch.setenv("POD_AGENT_CLOCK", clock.spec_for(local("seoul", 0, 16, 30), 60))
    sup = sv.Supervisor(str(p.profile), vllm="false", apply_patches=False,
                        watchdog_interval_s=30.0)
    seen: list[float] = []

    async def tick(now: float | None = None) -> None:
        seen.append(time.monotonic())

    monkeypatch.setattr(sup.watch, "tick", tick)
    loop = asyncio.ensure_future(sup.watch.loop())
    deadline = time.monotonic() + 60
    while len(seen) < 5 and time.monotonic() < deadline:  # four gaps, however long
        await asyncio.sleep(0.05)
    sup.request_stop()
    await asyncio.wait_for(loop, 5)
    # 30 pod-seconds at x60: a tick every half real second, so a warning 15 pod-minutes
    # ahead reaches the screen 15 real seconds ahead, not one 5-real-second tick late.
    # The gaps are measured, not counted in a window: a loaded machine wakes the loop
    # late, never ten times late, and never early
    gaps = sorted(b - a for a, b in itertools.pairwise(seen))
    assert len(gaps) >= 4, seen
    assert gaps[0] >= 0.5 - 0.05 and gaps[len(gaps) // 2] < 2.5, gaps
    assert tick_wait_s(30.0, 60.0) == 0.5 and tick_wait_s(5.0, 1.0) == 5.0
    assert tick_wait_s(5.0, 600.0) == 0.5  # never a spinning host


# -- issue 31, 6: durations on a monotonic clock -----------------------------------------

async def test_a_forward_wall_clock_step_neither_stops_a_busy_pod_nor_cuts_its_grace(
        pod) -> None:
    p = pod("berlin", idle_stop_after="45m", busy_grace="15m")
    p.start(local("berlin", 0, 14, 0))
    p.busy = True
    await p.until(local("berlin", 0, 14, 30))
    p.busy = False
    await p.until(local("berlin", 0, 14, 31))
    p.wall += 3600  # NTP, a VM resume: the wall clock jumps an hour, 30 s went by
    assert await p.until(p.wall) == [] and p.status()["idle_s"] <= 5 * TICK
    # the busy grace at the scheduled stop, the same
    p.busy = True
    await p.until(local("berlin", 0, 18, 1))
    p.wall += 3600
    stops = await p.until(p.wall + 3600)
    # 15 real minutes of grace after 18:00, whatever the wall clock said meanwhile
    assert len(stops) == 1 and stops[0][0] == local("berlin", 0, 18, 15) + 3600, stops


def test_idleness_is_measured_on_the_monotonic_clock() -> None:
    sched = Schedule(timezone="Asia/Seoul", idle_stop_after="45m", days=EVERY_DAY)
    st = sp.PolicyState()
    t, mono = local("seoul", 0, 14, 0), 500.0
    st.touch(t, mono)
    d = sp.decide(sched, st, t + 3630, False, mono + 30)
    assert not d.stop and d.idle_s == 30 and d.next_at == t + 3630 + 45 * 60 - 30


# -- issue 31, 19: the record on the volume is input ------------------------------------

HOSTILE = {
    "null": "null", "list": "[1, 2]", "number": "42", "text": '"20:00"',
    "truncated": '{"until": 1796',
    "until inf": '{"until": "inf", "by": "x", "set_at": {set}, "holds": {held}}',
    "until nan": '{"until": "nan", "by": "x", "set_at": {set}, "holds": {held}}',
    "until Infinity": '{"until": Infinity, "set_at": {set}, "holds": {held}}',
    "more than a day": '{"until": {far}, "set_at": {set}, "holds": {held}}',
    "deep": "[" * 5000 + "]" * 5000,
}


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("file", ["extension.json", "watchdog.json"])
async def test_a_broken_record_on_the_volume_is_discarded_and_logged(
        pod, name: str, file: str) -> None:
    p = pod("seoul")
    p.home.mkdir()
    t = local("seoul", 0, 10, 0)
    text = HOSTILE[name].replace("{set}", str(t - 60)).replace(
        "{held}", str(local("seoul", 0, 18, 0))).replace("{far}", str(t + 30 * 86400))
    if file == "watchdog.json" and name.startswith(("until", "more")):
        text = f'{{"version": 1, "run": "run-1", "extension": {text}}}'
    (p.home / file).write_text(text)
    p.start(t)  # serve starts
    wd = p.status()
    assert wd["extension"] is None
    notes = [a for a in p.audit() if a["op"] == "watchdog-state-discarded"]
    assert len(notes) == 1 and notes[0]["why"], notes
    # nothing acts on it: the working day runs, the evening's stop comes, warned
    stops = await p.until(local("seoul", 0, 19, 0))
    assert stops == [(local("seoul", 0, 18, 0), "schedule")], stops
    assert not (p.home / "extension.json").exists()
    assert json.loads((p.home / "watchdog.json").read_text())["version"] == 1


# -- the real agent process: a stop, and the next morning --------------------------------

def test_the_real_agent_forgets_a_stopped_pods_extension(tmp_path: Path) -> None:
    """``pod-agent serve`` on a pod clock at 19:00 with an extension to 20:00; stop-now;
    the next morning's serve (a new run of the pod) stops nothing, says the last stop."""
    home, log = tmp_path / "home", tmp_path / "runpodctl.log"
    p = tmp_path / "10-days.yaml"
    p.write_text("name: days\ngpu_type_ids: [A]\nimage: i\nschedule:\n"
                 "  timezone: Asia/Seoul\n  days: [mon, tue, wed, thu, fri, sat, sun]\n"
                 "slots:\n  A:\n    served_model_name: a\n    hf_repo_id: o/a\n"
                 "    port: 1031\n    gpus: [0]\n    gpu_util: 0.5\n    max_model_len: 99\n")
    env = dict(os.environ, POD_AGENT_HOME=str(home), RUNPOD_POD_ID="pod-real",
               FAKE_RUNPODCTL_LOG=str(log), PYTHONPATH=str(REPO), POD_AGENT_RUN_ID="run-1",
               PATH=f"{REPO / 'tests' / 'support' / 'bin'}:{os.environ.get('PATH', '')}")
    env.pop("POD_AGENT_WEBHOOK_URL", None)

    def agent(*args: str, pod_time: float | None = None) -> subprocess.CompletedProcess[str]:
        e = dict(env)
        if pod_time is not None:
            e["POD_AGENT_CLOCK"] = clock.spec_for(pod_time)
        return subprocess.run([sys.executable, "-m", "pod_agent", *args], env=e,
                              capture_output=True, text=True, timeout=60, cwd=REPO)

    def serve(pod_time: float) -> subprocess.Popen[bytes]:
        e = dict(env, POD_AGENT_CLOCK=clock.spec_for(pod_time))
        proc = subprocess.Popen([sys.executable, "-m", "pod_agent", "serve", "--profile",
                                 str(p), "--vllm", "false", "--no-patches",
                                 "--watchdog-interval", "0.2", "--backoff", "30"],
                                env=e, cwd=REPO, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if agent("status", "--json").returncode == 0:
                return proc
            time.sleep(0.2)
        proc.kill()
        raise AssertionError("serve did not answer")

    def final(r: subprocess.CompletedProcess[str]) -> dict:
        return json.loads(r.stdout.strip().splitlines()[-1])

    proc = serve(local("seoul", 0, 19, 0))
    try:
        r = final(agent("watchdog", "extend", "20:00", "--by", "alice"))
        assert r["kind"] == "result" and r["extension"]["until"] == local("seoul", 0, 20, 0)
        r = final(agent("watchdog", "stop-now", "--by", "alice"))
        assert r["kind"] == "result", r
        assert log.read_text().splitlines() == ["stop pod pod-real"]
        agent("shutdown")
        proc.wait(30)
        env["POD_AGENT_RUN_ID"] = "run-2"  # the pod, started again in the morning
        proc = serve(local("seoul", 1, 8, 40))
        time.sleep(3)  # 15 ticks of the next morning's agent
        wd = final(agent("status", "--json"))["watchdog"]
        assert log.read_text().splitlines() == ["stop pod pod-real"]  # nothing more
        assert wd["extension"] is None and wd["next_stop_reason"] == "schedule"
        assert (wd["last_stop"]["reason"], wd["last_stop"]["by"]) == ("stop-now", "alice")
    finally:
        agent("shutdown")
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
