"""Issue 30 #13: at ×60 the header counted ``idle 11m`` while requests ran. The agent's
idle time was the time since its last busy tick, and the console counted it on from the
report at the clock's speed: a poll 10 s apart read 10 idle minutes. Now the agent says
whether its last tick saw requests, a busy pod reports no idle time, and the console does
not count idle time on from a busy report."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.model.snapshot import StopPlan
from tests.unit.test_watchdog_days import Pod, local


async def test_a_busy_pod_reports_no_idle_time_between_ticks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pod = Pod(tmp_path, monkeypatch, "seoul", idle_stop_after="30m")
    t = local("seoul", 0, 10, 0)
    pod.start(t)
    pod.busy = True
    await pod.until(t + 60)
    # 25 s (pod time) after the last tick, requests still running
    pod.wall += 25
    pod.mono += 25
    st = pod.status()
    assert st["busy"] is True and st["idle_s"] == 0.0, st
    # nobody uses it: the idle time counts from the last tick that saw a request
    pod.busy = False
    await pod.until(pod.wall + 120)
    st = pod.status()
    assert st["busy"] is False and st["idle_s"] >= 60, st


def test_the_console_does_not_count_idle_on_from_a_busy_report() -> None:
    wd = {"idle_s": 0.0, "busy": True, "idle_stop_after_s": 1800, "clock_speed": 60.0,
          "clock_simulated": True}
    plan = StopPlan.parse(wd, read_at=1000.0)
    assert plan.idle(1010.0) == 0.0  # 10 s later: 10 minutes of pod time, still busy
    idle = StopPlan.parse({**wd, "busy": False, "idle_s": 30.0}, read_at=1000.0)
    assert idle.idle(1010.0) == pytest.approx(30.0 + 600.0)


def test_the_header_shows_no_idle_time_while_requests_run() -> None:
    from console.model.snapshot import PodSnapshot
    from console.ui.widgets.header import PodHeader

    wd = {"idle_s": 0.0, "busy": True, "idle_stop_after_s": 1800, "clock_speed": 60.0,
          "clock_simulated": True, "stop_in_s": 5000.0, "next_stop_reason": "schedule"}
    pod = PodSnapshot(pod_id="p", status="RUNNING", stop_plan=StopPlan.parse(wd, 1000.0),
                      fetched_at=1000.0)
    header = PodHeader("demo", demo=True, read_only=False)
    text = " ".join(t.plain for _, t in header.segments(pod, 1011.0, None, None))
    assert "DEMO" in text and "idle 0m of 30m" in text, text
