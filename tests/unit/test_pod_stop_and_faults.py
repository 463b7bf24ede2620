"""The two pure rules behind alerts that follow intent (issue 30, finding 4): is this
stop planned (``pod_stop``), and how long a GPU fault lasts (``gpu_faults``)."""

from __future__ import annotations

from console.model.conditions import Condition
from console.model.gpu_faults import FaultBook, gpu_marks
from console.model.gpu_state import Gpu, GpuReport
from console.model.pod_stop import OVERDUE_S, planned_stop
from console.model.snapshot import PodSnapshot, StopPlan

NOW = 1_800_000_000.0


def pod(**kw) -> PodSnapshot:
    base = {"pod_id": "p1", "status": "RUNNING", "started_at": NOW - 3600,
            "watchdog_armed": True}
    base.update(kw)
    return PodSnapshot(**base)


def plan(**wd) -> StopPlan:
    return StopPlan.parse({"now": NOW, "stop_in_s": 600.0, "next_stop_reason": "idle", **wd},
                          NOW)


def test_what_is_a_planned_stop() -> None:
    quiet = {"agent_error": "connection refused"}
    # nothing says a stop is coming: none
    assert planned_stop(pod(stop_plan=plan()), None, NOW) is None
    # the watchdog's recorded stop of this run
    made = plan(last_stop={"reason": "idle", "at": NOW - 5, "by": "watchdog", "ok": None},
                last_stop_reason="idle")
    stop = planned_stop(pod(**quiet), pod(stop_plan=made), NOW)
    assert stop is not None and stop.reason == "idle" and stop.by == "watchdog"
    assert stop.text("17:00") == "stopping (idle)"
    # a failed stop is no plan: the pod is still up, its silence an outage
    failed = plan(last_stop={"reason": "idle", "at": NOW - 5, "by": "watchdog", "ok": False})
    assert planned_stop(pod(**quiet), pod(stop_plan=failed), NOW) is None
    # a stop of an earlier run says nothing of this one (resumed since)
    old = plan(last_stop={"reason": "idle", "at": NOW - 7200, "by": "watchdog", "ok": True})
    assert planned_stop(pod(**quiet), pod(stop_plan=old), NOW) is None
    # the watchdog's time has come: due while the agent answers, being made once it is gone
    due = pod(stop_plan=plan(stop_in_s=-10.0))
    assert planned_stop(due, due, NOW).text("") == "stop due now (idle)"
    assert planned_stop(pod(**quiet), due, NOW).text("") == "stopping (idle)"
    # long past its time with the agent still answering: late, not planned
    late = pod(stop_plan=plan(stop_in_s=-OVERDUE_S - 60))
    assert planned_stop(late, late, NOW) is None
    # held by requests: not being made
    held = pod(stop_plan=plan(stop_in_s=-10.0, grace_until="2027-01-15T17:10:00+09:00"))
    assert planned_stop(held, held, NOW) is None
    # stopped by someone else, seen through the provider
    gone = planned_stop(pod(status="EXITED", **quiet), None, NOW)
    assert gone is not None and gone.done and gone.text("") == \
        "stopped (stopped through the provider)"


def xid(gpu: int, severity: str = "crit") -> Condition:
    return Condition(f"xid:{gpu}:79:{NOW:.0f}", severity, f"GPU {gpu} Xid 79")


def report(*gpus: Gpu) -> GpuReport:
    return GpuReport(gpus=gpus, source="nvml", sampled_at=NOW)


def test_a_fault_lasts_until_the_gpu_is_healthy_or_its_pod_is_gone() -> None:
    book = FaultBook()
    book.observe("p1", "RUNNING", NOW - 3600, report(Gpu(0)), [xid(0)], NOW)
    assert [c.key for c in book.conditions("p1")] == [f"xid:0:79:{NOW:.0f}@p1"]
    assert gpu_marks(book.of("p1"), None) == {0: "XID 79"}
    # the data goes: it stays; the GPU reports again in the same run: still off the bus
    book.observe("p1", "EXITED", NOW - 3600, None, [], NOW + 60)
    book.observe("p1", "RUNNING", NOW - 3600, report(Gpu(0)), [], NOW + 120)
    assert book.conditions("p1") and book.conditions("p2") == []
    # a later run (a reset): seen healthy
    book.observe("p1", "RUNNING", NOW + 600, report(Gpu(0)), [], NOW + 700)
    assert book.conditions("p1") == []
    # a warning Xid is an event, not a standing hardware fault
    book.observe("p1", "RUNNING", NOW + 600, report(Gpu(0)), [xid(0, "warn")], NOW + 800)
    assert book.conditions("p1") == []
    # terminated: ended with its pod
    book.observe("p1", "RUNNING", NOW + 600, report(Gpu(1, ecc_dbe_volatile=2)),
                 [Condition("ecc:1", "crit", "GPU 1 double-bit ECC errors: 2")], NOW + 900)
    ended = book.observe("p1", "TERMINATED", None, None, [], NOW + 960)
    assert ended == {"ecc:1@p1": "ended with pod p1"} and book.faults == {}
