"""Issue 42: "pod running outside working hours" is judged on the pod's clock.

Every healthy demo started with that WARN: the rule read this machine's wall clock (a
laptop's evening) while the pod's clock — the agent's, which its stops follow — said
noon on a working day. The clocks are injected here: this machine's instant is chosen,
and the pod's is the demo's own (``pod_clock_spec``: six pod hours before the profile's
next scheduled stop) or one set by hand, as the agent reports it (``now`` in its
status)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from zoneinfo import ZoneInfo

from console.config.settings import Settings
from console.demo.deployment import DemoDeployment, shipped_profiles_dir
from console.model.alerts import evaluate
from console.model.snapshot import PodSnapshot, StopPlan
from pod_agent import clock
from pod_agent.profiles import load_profiles
from tests.conftest import PROFILES

SEOUL = ZoneInfo("Asia/Seoul")  # the shipped profiles' zone; hours 08:30-18:00 mon-fri


def _at(text: str) -> float:
    return dt.datetime.fromisoformat(text).replace(tzinfo=SEOUL).timestamp()


def _hours(pod_now: float | None, ours: float, speed: float = 1.0) -> bool:
    """Whether the alert says the pod runs outside working hours, at ``ours`` (this
    machine's clock), the agent having said ``pod_now`` at that instant."""
    lp = next(p for p in load_profiles(PROFILES) if p.name == "rtx6000-2x")
    plan = None if pod_now is None else StopPlan.parse(
        {"now": pod_now, "clock_speed": speed, "clock_simulated": speed != 1.0}, ours)
    pod = PodSnapshot(status="RUNNING", cost_per_hr=4.18, stop_plan=plan)
    conds = evaluate(None, pod, lp.profile, Settings(profiles_dir=PROFILES), ours)
    return any(c.key == "hours" for c in conds)


def test_the_pods_clock_decides_not_this_machines() -> None:
    friday_night, friday_noon = _at("2026-12-04T23:00"), _at("2026-12-04T12:00")
    assert not _hours(friday_noon, friday_night)  # the pod's noon: inside its hours
    assert _hours(friday_night, friday_noon)  # the pod's night: outside, whatever ours
    assert _hours(None, friday_night)  # no agent to say its time: this machine's


def test_an_accelerated_pod_clock_is_read_where_it_is_now() -> None:
    """At ×60 ten of our seconds are ten pod minutes: 17:55 on the pod at the report,
    18:05 ten seconds later (outside), though our clock barely moved."""
    ours = _at("2026-12-04T12:00")
    assert not _hours(_at("2026-12-04T17:55"), ours, 60.0)
    lp = next(p for p in load_profiles(PROFILES) if p.name == "rtx6000-2x")
    plan = StopPlan.parse({"now": _at("2026-12-04T17:55"), "clock_speed": 60.0,
                           "clock_simulated": True}, ours)
    pod = PodSnapshot(status="RUNNING", stop_plan=plan)
    later = evaluate(None, pod, lp.profile, Settings(profiles_dir=PROFILES), ours + 10)
    assert any(c.key == "hours" for c in later)


def test_a_demo_started_on_a_friday_night_is_in_its_pods_working_hours(tmp_path: Path
                                                                      ) -> None:
    """The demo's pod clock at its start, on a laptop at 23:00 on a Friday: the pod's
    Monday noon (six hours before its 18:00 stop). No "outside working hours"."""
    demo = DemoDeployment(workdir=tmp_path / "d", clock_speed=60.0)
    demo.profiles_dir.mkdir(parents=True)
    for src in sorted(shipped_profiles_dir().glob("*.yaml")):
        demo._profile_copy(src)
    ours = _at("2026-12-04T23:00")
    spec = demo.pod_clock_spec(demo.profiles()[0], ours)
    assert spec is not None
    anchor = clock._parse(spec)
    assert anchor is not None and anchor[0] == round(ours, 3)
    pod_now = anchor[1]  # the pod's clock at our ``ours``
    assert dt.datetime.fromtimestamp(pod_now, SEOUL).strftime("%a %H:%M") == "Mon 12:00"
    assert not _hours(pod_now, ours, 60.0)


def test_a_reading_without_the_agent_keeps_the_pods_clock() -> None:
    """The agent busy for a reading (restarting a hung slot: ``R`` in the demo, CI at 03:00
    in Seoul) left the reading with no stop plan, and the rule fell back to this machine's
    night. The last answer's clock, carried forward, still says the pod's noon."""
    lp = next(p for p in load_profiles(PROFILES) if p.name == "rtx6000-2x")
    ours = _at("2026-12-04T03:00")
    plan = StopPlan.parse({"now": _at("2026-12-04T12:00"), "clock_speed": 1.0}, ours)
    seen = PodSnapshot(pod_id="p1", status="RUNNING", cost_per_hr=4.18, stop_plan=plan)
    blip = PodSnapshot(pod_id="p1", status="RUNNING", cost_per_hr=4.18,
                       agent_error="timed out")
    conds = evaluate(None, blip, lp.profile, Settings(profiles_dir=PROFILES), ours + 30,
                     agent_seen=seen)
    assert not any(c.key == "hours" for c in conds), conds
    # another pod's answer says nothing of this one's clock
    other = PodSnapshot(pod_id="p2", status="RUNNING", stop_plan=plan)
    conds = evaluate(None, blip, lp.profile, Settings(profiles_dir=PROFILES), ours + 30,
                     agent_seen=other)
    assert any(c.key == "hours" for c in conds)


def _exporters_plan(wd: dict, read_at: float, without: tuple[str, ...] = ()) -> StopPlan:
    """The stop plan as the console reads it from the pod's exporter (its
    ``pod_agent_*`` gauges, made by the agent's own code from its watchdog section):
    what a wall (no SSH) has, and what fills a reading whose agent did not answer, on a
    pod with ``gpu_metrics_url`` (the demo's first pod). ``without``: gauges an older
    exporter does not publish."""
    from console.sources.collect.gpu_metrics import stop_plan
    from tests.support.watchdog_gauges import exporter_samples

    samples = [s for s in exporter_samples(wd) if s[0] not in without]
    plan, _ = stop_plan(samples, read_at)
    assert plan is not None
    return plan


WD_NOON = {"armed": True, "now": _at("2026-12-04T12:00"), "clock_speed": 1.0,
           "stop_in_s": 6 * 3600.0, "next_stop_reason": "scheduled", "idle_s": 30.0,
           "idle_stop_after_s": 3600.0}
"""The agent's watchdog section at the pod's noon on a Friday (Seoul)."""


def test_a_wall_judges_the_hours_on_the_pods_clock_from_its_exporter() -> None:
    """A wall has no SSH: the exporter's gauges are all it reads of the pod's plan. They
    carry the pod's clock (``pod_agent_clock_seconds``), so the hours are the pod's: no
    WARN at 03:00 on this machine while the pod says noon; a WARN at this machine's noon
    while the pod says 23:00. Before, the plan had no clock and the rule read this
    machine's (the demo's web wall warned whenever the laptop was out of hours)."""
    lp = next(p for p in load_profiles(PROFILES) if p.name == "rtx6000-2x")
    settings = Settings(profiles_dir=PROFILES)
    ours = _at("2026-12-04T03:00")
    plan = _exporters_plan(WD_NOON, ours)
    assert plan.pod_now == _at("2026-12-04T12:00") and plan.in_s == 6 * 3600.0
    # as scraped (Prometheus: up to a scrape interval old) the clock reads the hours but
    # says nothing of the pod clock's offset from ours: no "pod clock off" from a wall
    assert plan.skew_s is None
    wall = PodSnapshot(pod_id="p1", status="RUNNING", cost_per_hr=4.18, stop_plan=plan,
                       watchdog_armed=True)
    conds = evaluate(None, wall, lp.profile, settings, ours + 30, agent_seen=None)
    assert not any(c.key in ("hours", "pod-clock") for c in conds), conds
    night = _exporters_plan(dict(WD_NOON, now=_at("2026-12-04T23:00")), _at("2026-12-04T12:00"))
    wall = PodSnapshot(pod_id="p1", status="RUNNING", cost_per_hr=4.18, stop_plan=night,
                       watchdog_armed=True)
    conds = evaluate(None, wall, lp.profile, settings, _at("2026-12-04T12:00") + 30)
    assert any(c.key == "hours" for c in conds), conds


def test_an_exporter_without_the_clock_keeps_the_last_answers_clock() -> None:
    """Issue 48: ``R`` on a hung slot in the demo, the machine loaded: the agent's status
    timed out for a reading and the exporter's gauges filled its stop plan. From an
    exporter that does not publish the pod's clock (older than it) that plan has no pod
    time: it says nothing of the hours, and the last answer's clock goes on (the rule once
    fell back to this machine's: 09:17 UTC, 18:17 in Seoul, "outside working hours")."""
    lp = next(p for p in load_profiles(PROFILES) if p.name == "rtx6000-2x")
    ours = _at("2026-12-04T03:00")
    seen = PodSnapshot(pod_id="p1", status="RUNNING", cost_per_hr=4.18,
                       stop_plan=StopPlan.parse(WD_NOON, ours))
    plan = _exporters_plan(WD_NOON, ours + 30, without=("pod_agent_clock_seconds",))
    assert plan.pod_now is None and plan.in_s == 6 * 3600.0  # a plan, without a clock
    blip = PodSnapshot(pod_id="p1", status="RUNNING", cost_per_hr=4.18,
                       agent_error="agent command timed out after 10 s", stop_plan=plan,
                       watchdog_armed=True)
    settings = Settings(profiles_dir=PROFILES)
    conds = evaluate(None, blip, lp.profile, settings, ours + 30, agent_seen=seen)
    assert not any(c.key == "hours" for c in conds), conds
    # with no answer of this pod's agent ever, this machine's clock (03:00) is all there is
    conds = evaluate(None, blip, lp.profile, settings, ours + 30, agent_seen=None)
    assert any(c.key == "hours" for c in conds), conds


def test_a_wall_says_an_extension_about_to_end_as_the_pod_means_it() -> None:
    """With the pod's clock on the exporter a wall reads how long an extension has left
    (``StopPlan.extension_left`` needs the pod's time) and warns before it ends; the
    gauge says whether that end stops the pod (``stops_at_end``), so the wall's words are
    the agent's: the pod stops then (warn), or the schedule applies again (info)."""
    from console.model.alerts import extension_warning

    pod_noon = _at("2026-12-04T12:00")
    ours = _at("2026-12-04T03:00")
    until = pod_noon + 5 * 60
    for stops, severity, words in ((True, "warn", "the pod stops then"),
                                   (False, "info", "the schedule applies again")):
        ext = {"until": until, "by": "alice", "stops_at_end": stops,
               "until_iso": dt.datetime.fromtimestamp(until, SEOUL).isoformat()}
        plan = _exporters_plan(dict(WD_NOON, extension=ext, warn_before_s=600.0), ours)
        assert plan.extension_stops_at_end is stops
        left = plan.extension_left(ours + 60)
        assert left is not None and abs(left - 240) < 1e-6  # on the pod's clock
        cond = extension_warning(plan, ours + 60)
        assert cond is not None and cond.severity == severity, cond
        assert cond.title == f"extension (by alice) ends in 4 min: {words}"
