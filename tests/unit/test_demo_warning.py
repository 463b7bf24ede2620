"""The demo on an accelerated pod clock warns early enough for a person: the README's
story (``demo --clock-speed 60``: the warning, then ``w 1 y``) needs real seconds, not pod
minutes. The tmux test in tests/tui/test_pty.py walks the story at a human pace."""

from __future__ import annotations

import pytest

from console.demo.deployment import WARN_REAL_S, DemoDeployment, demo_warn_before
from pod_agent.profile import duration_s
from tests.conftest import PROFILES


@pytest.mark.parametrize("speed", [2.0, 10.0, 30.0, 60.0])
def test_the_warning_leaves_a_person_time_at_any_speed_the_idle_limit_allows(speed) -> None:
    warn = duration_s(demo_warn_before("30m", speed))
    assert warn < duration_s("30m")  # the profile refuses warn_before >= idle_stop_after
    assert warn >= 600  # never shorter than the agent's default
    if WARN_REAL_S * speed < duration_s("30m") - 60:
        assert warn / speed >= WARN_REAL_S  # real seconds between the warning and the stop


def test_past_what_the_idle_limit_allows_it_stays_below_it() -> None:
    assert demo_warn_before("30m", 600.0) == "29m"


def test_the_demo_profiles_carry_it_only_on_an_accelerated_clock(tmp_path) -> None:
    from pod_agent.profiles import load_profiles

    for speed, want in ((1.0, None), (60.0, "25m")):
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
    story = (duration_s("30m") + 3600 + duration_s("30m")) / 60.0
    assert real_until_schedule >= 2 * story, (real_until_schedule, story)
