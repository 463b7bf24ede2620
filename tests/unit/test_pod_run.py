"""The pod run reducer (``console.model.pod_run``) over sequences of readings: a day of
one pod told as runs, each state with its cause and who (issue 42, item 1)."""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from console.model.pod_run import (
    Operation,
    PodRun,
    RunReading,
    advance,
    cause_of,
    operation_of,
)
from console.model.snapshot import PodSnapshot, StopPlan

T0 = 1_800_000_000.0


def plan(t: float, **wd: Any) -> StopPlan:
    doc = {"armed": True, "next_stop_reason": "idle", "stop_in_s": 1800.0, "now": t,
           "clock_speed": 1.0, "idle_s": 0.0, "busy": True, "idle_stop_after_s": 1800.0,
           **wd}
    return StopPlan.parse(doc, t)


def running(t: float, started: float, **wd: Any) -> PodSnapshot:
    """The provider says RUNNING; the agent answers with its plan as read at ``t``."""
    return PodSnapshot(pod_id="p1", status="RUNNING", started_at=started, cost_per_hr=4.0,
                       watchdog_armed=True, stop_plan=plan(t, **wd),
                       agent_slots={"FLASH": {"state": "ready"}, "Q27": {"state": "ready"}})


def quiet(p: PodSnapshot, status: str = "RUNNING") -> PodSnapshot:
    """The container gone, the agent with it (the provider may still say RUNNING)."""
    return replace(p, status=status, agent_error="connection refused", stop_plan=None,
                   agent_slots={}, gpus=None)


class Day:
    """Readings fed to the reducer in order, the agent's last answer kept as the
    session keeps it."""

    def __init__(self) -> None:
        self.run: PodRun | None = None
        self.seen: PodSnapshot | None = None
        self.ops: list[Operation] = []

    def read(self, t: float, pod: PodSnapshot, slots_up: int | None = 2) -> PodRun:
        if not pod.agent_error and pod.stop_plan is not None:
            self.seen = pod
        self.run = advance(self.run, RunReading(t, pod, self.seen, tuple(self.ops),
                                                slots_up))
        assert self.run is not None
        return self.run


def test_start_serve_idle_warn_stop_idle_then_resume_is_a_new_run() -> None:
    d, t, start = Day(), T0, T0 - 3600
    # provisioning, then booting (the engine's phase), then serving
    r = d.read(t, PodSnapshot(pod_id="p1", status="STARTING"), slots_up=0)
    assert (r.state, r.number) == ("provisioning", 1)
    booting = replace(running(t + 30, start), agent_slots={
        "FLASH": {"state": "starting", "phases": [["loading weights", 12.0]]}})
    r = d.read(t + 30, booting, slots_up=0)
    assert (r.state, r.phase) == ("booting", "loading weights")
    r = d.read(t + 60, running(t + 60, start))
    assert r.state == "serving" and r.cause is None and r.planned_stop() is None
    # traffic stops: idle counting, then the watchdog's warning
    r = d.read(t + 120, running(t + 120, start, busy=False, idle_s=60.0, stop_in_s=1740.0))
    assert r.state == "idle"
    r = d.read(t + 1500, running(t + 1500, start, busy=False, idle_s=1500.0,
                                 stop_in_s=300.0, warning=True))
    assert (r.state, r.cause, r.by) == ("warned", "idle", "watchdog")
    # the watchdog records its stop; the pod goes; the provider says EXITED
    stop_at = t + 1799
    made = running(t + 1800, start, busy=False, idle_s=1800.0, stop_in_s=0.0,
                   last_stop={"reason": "idle", "at": stop_at, "by": "watchdog", "ok": None},
                   last_stop_reason="idle")
    r = d.read(t + 1800, made)
    assert (r.state, r.cause, r.by, r.at) == ("stopping", "idle", "watchdog", stop_at)
    assert r.planned and r.stop_text("17:30") == "stopping (idle)"
    r = d.read(t + 1810, quiet(made), slots_up=0)
    assert (r.state, r.cause) == ("stopping", "idle")
    r = d.read(t + 1820, quiet(made, "EXITED"), slots_up=0)
    assert (r.state, r.cause, r.by, r.ended) == ("stopped", "idle", "watchdog", True)
    assert r.event_title("17:30") == "pod stopped (idle) by watchdog at 17:30"
    # `r`: the same machine started again. The agent still reports its last stop (the
    # demo's agent outlives its pod): the new run is serving, not "stopping (idle)"
    resumed_at = t + 1830
    again = running(t + 1835, resumed_at, busy=True,
                    last_stop={"reason": "idle", "at": stop_at, "by": "watchdog", "ok": True},
                    last_stop_reason="idle")
    r = d.read(t + 1835, again)
    assert (r.number, r.state, r.cause, r.by) == (2, "serving", None, None)
    assert r.planned_stop() is None
    assert r.previous is not None and (r.previous.number, r.previous.state,
                                       r.previous.cause) == (1, "stopped", "idle")
    assert r.key != r.previous.key
    r = d.read(t + 1845, again)
    assert (r.number, r.previous) == (2, r.previous) and r.state == "serving"


def test_a_resume_within_the_clock_slack_is_still_a_new_run() -> None:
    """Stopped at 17:55, resumed 20 s later: the old stop is the old run's, whatever the
    slack for clocks that differ (the bug: "stopping (idle)" on a running, busy pod)."""
    d, t = Day(), T0
    made = running(t, t - 600, busy=False,
                   last_stop={"reason": "idle", "at": t - 1, "by": "watchdog", "ok": None},
                   last_stop_reason="idle")
    assert d.read(t, made).state == "stopping"
    assert d.read(t + 5, quiet(made, "EXITED")).state == "stopped"
    busy = running(t + 25, t + 20, busy=True,
                   last_stop={"reason": "idle", "at": t - 1, "by": "watchdog", "ok": True},
                   last_stop_reason="idle")
    r = d.read(t + 25, busy)
    assert (r.number, r.state) == (2, "serving")


def test_a_stop_and_start_between_two_readings_is_seen_by_the_start_time() -> None:
    d, t = Day(), T0
    assert d.read(t, running(t, t - 600)).state == "serving"
    r = d.read(t + 10, running(t + 10, t + 8))  # started_at moved: stopped and started
    assert r.number == 2 and r.state == "serving"
    assert r.previous is not None and r.previous.state == "stopped"
    assert r.previous.cause == "unknown"


def test_stop_now_from_the_console_says_who_and_is_not_the_provider() -> None:
    d, t = Day(), T0
    assert d.read(t, running(t, t - 600)).state == "serving"
    d.ops.append(Operation("stop-now", t + 5, "started", "alice@laptop", "p1"))
    acting = replace(running(t + 6, t - 600), agent_actions=(
        {"id": "stop-1", "kind": "stop-now", "state": "running", "started_at": t + 5.5},))
    r = d.read(t + 6, acting)
    assert (r.state, r.cause, r.by) == ("stopping", "stop-now", "alice@laptop")
    # the agent's own record (by: "stop-now") does not lose who asked
    rec = running(t + 8, t - 600, last_stop={"reason": "stop-now", "at": t + 7,
                                             "by": "stop-now", "ok": True},
                  last_stop_reason="stop-now")
    r = d.read(t + 8, rec)
    assert (r.cause, r.by) == ("stop-now", "alice@laptop")
    # nor does one naming the pod's user (an agent told no --by): CI saw "root"
    as_root = running(t + 8, t - 600, last_stop={"reason": "stop-now", "at": t + 7,
                                                 "by": "root", "ok": True},
                      last_stop_reason="stop-now")
    assert d.read(t + 8, as_root).by == "alice@laptop"
    r = d.read(t + 20, quiet(rec, "EXITED"), slots_up=0)
    assert (r.state, r.cause, r.by) == ("stopped", "stop-now", "alice@laptop")
    assert "provider" not in r.event_title("18:00")
    # `r` after `w s y`: a running pod is not "stopping (stop-now)"
    d.ops.append(Operation("resume", t + 30, "ok", "alice@laptop", "p1"))
    r = d.read(t + 40, replace(rec, started_at=t + 35, stop_plan=plan(t + 40),
                               agent_actions=acting.agent_actions))
    assert (r.number, r.state, r.planned_stop()) == (2, "serving", None)


def test_the_watchdogs_stop_unseen_keeps_the_warnings_cause() -> None:
    """The agent went before any reading showed its record: the warning said why."""
    d, t = Day(), T0
    warned = running(t, t - 600, busy=False, idle_s=1500.0, stop_in_s=120.0, warning=True,
                     next_stop_reason="schedule")
    assert d.read(t, warned).state == "warned"
    r = d.read(t + 30, quiet(warned, "EXITED"), slots_up=0)
    assert (r.state, r.cause, r.by) == ("stopped", "schedule", "watchdog")
    assert r.planned


def test_down_from_cron_is_told_by_the_audit_log() -> None:
    rec = {"t": T0 + 5, "user": "ops", "host": "box", "action": "down",
           "arguments": {"pod": "p1"}, "result": "ok", "via": "cron"}
    op = operation_of(rec)
    assert op is not None and (op.kind, op.by) == ("down", "cron down")
    forced = operation_of({**rec, "arguments": {"pod": "p1", "force": True}, "via": "tty"})
    assert forced is not None and (forced.kind, forced.by) == ("down --force", "ops@box")
    assert operation_of({"t": T0, "action": "watchdog", "arguments": {"cmd": "arm"}}) is None
    d, t = Day(), T0
    assert d.read(t, running(t, t - 600)).state == "serving"
    d.ops.append(forced)
    r = d.read(t + 20, quiet(running(t, t - 600), "EXITED"), slots_up=0)
    assert (r.state, r.cause, r.by) == ("stopped", "down --force", "ops@box")


def test_a_fallback_replaces_the_run_and_a_new_one_begins_clean() -> None:
    d, t = Day(), T0
    assert d.read(t, running(t, t - 600)).number == 1
    d.ops.append(Operation("fallback", t + 5, "started", "alice@laptop", "p1"))
    new = replace(running(t + 60, t + 50), pod_id="p2")
    r = d.read(t + 60, new)
    assert (r.pod_id, r.number, r.state) == ("p2", 2, "serving")
    old = r.previous
    assert old is not None and (old.pod_id, old.state, old.cause, old.replaced_by) == (
        "p1", "replaced", "fallback", "p2")
    assert old.by == "alice@laptop" and old.planned
    assert old.event_title("") == "pod replaced by pod p2 (fallback) (alice@laptop)"


def test_a_provider_stop_is_the_providers_and_a_stop_never_seen_running_is_unknown() -> None:
    d, t = Day(), T0
    assert d.read(t, running(t, t - 600)).state == "serving"
    r = d.read(t + 10, quiet(running(t, t - 600), "EXITED"), slots_up=0)
    assert (r.state, r.cause, r.by, r.planned) == ("stopped", "provider", "provider", False)
    cold = Day().read(t, quiet(running(t, t - 600), "EXITED"), slots_up=0)
    assert (cold.state, cold.cause, cold.planned) == ("stopped", "unknown", False)
    gone = Day()
    gone.read(t, running(t, t - 600))
    r = gone.read(t + 10, quiet(running(t, t - 600), "TERMINATED"), slots_up=0)
    assert (r.state, r.cause) == ("terminated", "provider")


def test_a_failed_stop_is_no_stop() -> None:
    d, t = Day(), T0
    failed = running(t, t - 600, last_stop={"reason": "idle", "at": t - 1, "by": "watchdog",
                                            "ok": False}, last_stop_reason="idle")
    assert d.read(t, failed).state == "serving"


def test_causes_from_the_agents_words() -> None:
    assert [cause_of(w) for w in ("schedule", "extension ends", "idle", "memory guard",
                                  "stop-now", "down", "down --force", "fallback", "provider",
                                  "?", None)] == [
        "schedule", "schedule", "idle", "memory guard", "stop-now", "down", "down --force",
        "fallback", "provider", "unknown", "unknown"]


def test_a_console_started_after_a_quick_resume_does_not_take_the_old_stop() -> None:
    """No earlier reading: the agent's stop, carried out 20 s before the provider's
    start of this run, is the last run's (within the minute of slack for clocks)."""
    t = T0
    busy = running(t, t - 20, busy=True,
                   last_stop={"reason": "idle", "at": t - 40, "by": "watchdog", "ok": True},
                   last_stop_reason="idle")
    r = Day().read(t, busy)
    assert (r.number, r.state, r.planned_stop()) == (1, "serving", None)
    # one still being made (ok unknown) that early is still this run's
    making = running(t, t - 20, busy=False,
                     last_stop={"reason": "idle", "at": t - 40, "by": "watchdog",
                                "ok": None}, last_stop_reason="idle")
    assert Day().read(t, making).state == "stopping"


def test_a_reading_that_says_nothing_changes_nothing() -> None:
    """The provider's API failed and the agent did not answer (our network): the run
    stays as the last reading that said something, not "serving"."""
    d, t = Day(), T0
    warned = running(t, t - 600, busy=False, idle_s=1500.0, stop_in_s=290.0, warning=True)
    assert d.read(t, warned).state == "warned"
    blind = replace(quiet(warned), status=None, provider_error="timed out")
    r = d.read(t + 10, blind, slots_up=None)
    assert (r.state, r.cause) == ("warned", "idle")
