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
