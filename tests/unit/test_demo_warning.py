"""The demo on an accelerated pod clock warns early enough for a person: the demo's
story (docs/demo.md: ``demo --clock-speed 60``: the warning, then ``w 1 y``) needs real
seconds on the console's screen, not pod minutes at the agent.
tests/session/test_clock_speed_story.py walks the story on a driven clock (the real agent
and session, at every phase of the console's reads); tests/tui/test_pty.py types its
first keys in a real terminal.

Issue 42: at ×60 the scheduled stop's warning was on screen 13 s before the stop, not the
~25 of docs/demo.md. ``warn_before`` was 25 pod minutes (25 real s at the agent), and the console
reads the pod every ``POD_POLL_S`` (10 s), the reading itself taking a second or two, the
agent finding the warning at its next watchdog tick: 25 − 12.5 s. Here the demo's own
profiles are run through the stop policy (``decide``, the agent's tick pace on the pod's
clock) for each kind of stop, and the warning's real lead is what remains once the
console's worst lag is taken off."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from console.demo.deployment import (
    WARN_REAL_S,
    WATCHDOG_INTERVAL_S,
    DemoDeployment,
    demo_warn_before,
    warning_lag_s,
)
from console.session.session import POD_POLL_S
from pod_agent import stoppolicy
from pod_agent.profile import Profile, duration_s
from pod_agent.stop_watch import tick_wait_s
from pod_agent.stoppolicy import PolicyState
from tests.conftest import PROFILES


def _demo_profile(tmp_path: Path, speed: float) -> Profile:
    """The first profile as the demo writes it at ``speed`` (validated on load)."""
    demo = DemoDeployment(workdir=tmp_path / f"x{speed:g}", clock_speed=speed)
    demo.profiles_dir.mkdir(parents=True)
    for src in sorted(PROFILES.glob("*.yaml")):
        demo._profile_copy(src)
    return demo.profiles()[0].profile


def _warned_and_stopped(profile: Profile, kind: str, speed: float) -> tuple[float, float]:
    """Pod instants of the first watchdog tick that warns and of the tick that stops,
    on the demo's pod clock (a Monday noon in the profile's zone, six pod hours before
    its 18:00 stop), the ticks ``tick_wait_s`` real seconds apart as the agent's are."""
    sched = profile.schedule
    tz = ZoneInfo(sched.timezone)
    start = dt.datetime(2026, 12, 7, 12, 0, tzinfo=tz).timestamp()
    st = PolicyState()
    st.touch(start)
    eighteen = dt.datetime(2026, 12, 7, 18, 0, tzinfo=tz).timestamp()
    if kind == "schedule":  # busy until the stop time (so no idle stop first), then not
        busy_until = eighteen
    elif kind == "idle":  # traffic stops at once
        busy_until = start
    else:  # an extension to 19:00, held through the 18:00 stop, ends with a stop
        busy_until = dt.datetime(2026, 12, 7, 19, 0, tzinfo=tz).timestamp()
        st.extension = stoppolicy.make_extension(sched, st, start, busy_until, "me", "demo")
    step = tick_wait_s(WATCHDOG_INTERVAL_S, speed) * speed
    warned = None
    t = start
    while t < start + 86400:
        busy = t < busy_until
        if busy:
            st.touch(t)
        d = stoppolicy.decide(sched, st, t, busy)
        if d.announce:
            st.note_warning(d, t)
        if d.warn and warned is None:
            warned = t
        if d.stop:
            assert warned is not None, f"{kind}: stopped at {t} without a warning"
            assert d.reason == {"schedule": "schedule", "idle": "idle",
                                "extension": "extension ended"}[kind], d
            return warned, t
        t += step
    raise AssertionError(f"{kind}: no stop within a day")


@pytest.mark.parametrize("kind", ["schedule", "idle", "extension"])
def test_every_kind_of_stop_is_on_screen_25_real_s_ahead_at_x60(kind: str, tmp_path: Path
                                                                 ) -> None:
    speed = 60.0
    profile = _demo_profile(tmp_path, speed)
    warned, stopped = _warned_and_stopped(profile, kind, speed)
    agent_lead = (stopped - warned) / speed  # real seconds, at the agent
    # the console reads the pod every POD_POLL_S; the worst phase reads it just before
    # the warning, so the screen has it a reading (and the reading's own time) later
    on_screen = agent_lead - (POD_POLL_S + 2.0)
    assert on_screen >= WARN_REAL_S - 1.0, (kind, agent_lead, on_screen,
                                            profile.schedule.warn_before)


@pytest.mark.parametrize("speed", [2.0, 10.0, 30.0, 60.0, 120.0])
def test_the_warning_leaves_a_person_time_at_any_speed(speed: float, tmp_path: Path) -> None:
    sched = _demo_profile(tmp_path, speed).schedule  # loaded: warn_before < idle limit
    warn = duration_s(sched.warn_before)
    assert warn >= 600  # never shorter than the agent's default
    assert warn / speed - warning_lag_s(speed) >= WARN_REAL_S
    assert duration_s(sched.idle_stop_after or "0s") > warn
    assert demo_warn_before(speed) == sched.warn_before


def test_the_demo_profiles_carry_it_only_on_an_accelerated_clock(tmp_path) -> None:
    from pod_agent.profiles import load_profiles

    for speed, want in ((1.0, None), (60.0, "38m")):
        demo = DemoDeployment(workdir=tmp_path / f"x{speed:g}", clock_speed=speed)
        demo.profiles_dir.mkdir(parents=True)
        for src in sorted(PROFILES.glob("*.yaml")):
            demo._profile_copy(src)
        loaded = load_profiles(demo.profiles_dir)
        assert loaded  # they still validate (warn_before < idle_stop_after)
        for lp in loaded:
            sched = lp.profile.schedule
            got = sched.warn_before if want else None
            assert got == want or (want is None and sched.warn_before == "10m"), (speed, got)
            assert sched.idle_stop_after == ("43m" if want else "30m")


def test_the_idle_story_ends_long_before_the_scheduled_stop_at_x60(tmp_path, monkeypatch) -> None:
    """The pod clock starts ``SCHEDULE_LEAD_S`` before the scheduled stop at any speed: at
    ×60 the idle story (30 pod minutes of silence, a +1 h extension, 30 more) ends well
    inside it, so the stop a person sees is the idle one. CI once saw the schedule's stop
    first: the lead was 90 pod minutes, 90 real seconds, shorter than a loaded run."""
    import time

    from pod_agent import clock, stoppolicy

    demo = DemoDeployment(workdir=tmp_path / "d", clock_speed=60.0)
    demo.profiles_dir.mkdir(parents=True)
    for src in sorted(PROFILES.glob("*.yaml")):
        demo._profile_copy(src)
    first = demo.profiles()[0]
    real = time.time()
    spec = demo.pod_clock_spec(first, real)
    assert spec is not None
    monkeypatch.setenv("POD_AGENT_CLOCK", spec)
    pod_now = clock.now()  # as the agent reads it
    at = stoppolicy.next_scheduled(first.profile.schedule, pod_now)
    assert at is not None and clock.speed() == 60.0
    real_until_schedule = (at - pod_now) / 60.0
    idle = duration_s(first.profile.schedule.idle_stop_after or "0s")
    story = (idle + 3600 + idle) / 60.0
    assert real_until_schedule >= 2 * story, (real_until_schedule, story)
