"""The cron layer and the pod disagreeing: ``down`` asks the pod, and the pod's clock
judges the extension — a laptop clock that is off neither stops an extended pod nor
keeps one whose extension ended; an agent it cannot ask keeps nothing up."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest

from console.commands import pod_cmd
from console.model.snapshot import PodSnapshot, StopPlan
from console.sources.remote import AgentError, AgentResult

SKEW = 7200.0  # the pod's clock is two hours ahead of this laptop's


def _status(until: float | None, pod_now: float) -> AgentResult:
    ext = None if until is None else {"until": until, "until_iso": "2026-11-30T20:00:00+09:00",
                                      "by": "alice", "reason": "eval run"}
    return AgentResult(0, {"kind": "result", "watchdog": {"now": pod_now, "extension": ext}})


@pytest.fixture
def agent(monkeypatch):
    answer: dict = {}

    class Client:
        def __init__(self, transport) -> None:
            pass

        async def request(self, req: Any, timeout_s: float | None = None) -> AgentResult:
            assert req.key() == "status"
            if "error" in answer:
                raise AgentError(answer["error"])
            return answer["result"]

    class Transport:
        def close(self) -> None:
            pass

    monkeypatch.setattr("console.sources.agent_client.AgentClient", Client)
    monkeypatch.setattr("console.session.context.ssh_transport", lambda s: Transport())
    return answer


async def test_the_pods_clock_judges_the_extension(agent) -> None:
    pod_now = time.time() + SKEW
    # ends in 10 min on the pod's clock (1 h 50 m in the laptop's past): kept
    agent["result"] = _status(pod_now + 600, pod_now)
    held = await pod_cmd._extension_holds(object())  # type: ignore[arg-type]
    assert held == "extended until 20:00 by alice: eval run"
    # ended a minute ago on the pod (still two hours ahead of the laptop): not kept
    agent["result"] = _status(pod_now - 60, pod_now)
    assert await pod_cmd._extension_holds(object()) is None  # type: ignore[arg-type]
    agent["result"] = _status(None, pod_now)
    assert await pod_cmd._extension_holds(object()) is None  # type: ignore[arg-type]


async def test_an_agent_that_cannot_be_asked_keeps_nothing_up(agent, capsys) -> None:
    agent["error"] = "ssh: connect to host 203.0.113.7 port 22: Connection timed out"
    assert await pod_cmd._extension_holds(object()) is None  # type: ignore[arg-type]
    assert "could not read the pod's extension" in capsys.readouterr().out
    agent.pop("error")
    agent["result"] = AgentResult(1, {"kind": "error", "message": "not running"})
    assert await pod_cmd._extension_holds(object()) is None  # type: ignore[arg-type]


def test_the_console_counts_down_on_the_pods_report_and_says_the_skew() -> None:
    read_at = 1_000_000.0
    plan = StopPlan.parse({"now": read_at + SKEW, "stop_in_s": 600.0, "idle_s": 60.0,
                           "idle_stop_after_s": 2700.0, "next_stop_reason": "idle",
                           "clock_speed": 1.0}, read_at)
    assert plan.skew_s == SKEW
    pod = PodSnapshot(status="RUNNING", stop_plan=plan, cost_per_hr=6.0,
                      started_at=read_at - 3600, watchdog_armed=True)
    assert pod.stop_in_s(read_at + 60) == 540.0  # from the pod's own seconds left
    assert plan.idle(read_at + 60) == 120.0
    fast = StopPlan.parse({"now": 5.0, "stop_in_s": 600.0, "clock_speed": 60.0}, read_at)
    assert fast.skew_s is None and fast.stop_in(read_at + 5) == 300.0  # pod seconds


def test_an_extension_moves_todays_projected_spend() -> None:
    noon = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC).timestamp()

    def pod(stop_in_s: float) -> PodSnapshot:
        return PodSnapshot(status="RUNNING", cost_per_hr=6.0, started_at=noon - 3600,
                           watchdog_armed=True,
                           stop_plan=StopPlan(in_s=stop_in_s, read_at=noon))

    assert pod(0.0).projected_today(noon, dt.UTC) == pytest.approx(6.0)  # the hour so far
    assert pod(3600.0).projected_today(noon, dt.UTC) == pytest.approx(12.0)
    assert pod(20 * 3600.0).projected_today(noon, dt.UTC) == pytest.approx(6.0 * 13)  # midnight


async def test_down_force_is_audited_as_such_naming_what_it_overrode(agent, tmp_path,
                                                                   capsys) -> None:
    import json

    import httpx

    from console.config.settings import load_settings
    from console.sources.provider.emulator import EmulatorState, make_app
    from console.sources.provider.runpod import RunPodClient

    state = EmulatorState(api_key="k")
    pid = state.add_stopped_pod("pod-console-a", "NVIDIA H100 80GB HBM3")
    state.set_status(state.pods[pid], "RUNNING")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"state_dir: {tmp_path / 'state'}\npod:\n  runpod_id: {pid}\n"
                   "  ssh_host: 127.0.0.1\n")
    settings = load_settings(cfg)
    pod_now = time.time()
    agent["result"] = _status(pod_now + 3600, pod_now)

    def client() -> RunPodClient:
        return RunPodClient("k", "http://rp/v2",
                            transport=httpx.ASGITransport(app=make_app(state)))

    def audit() -> list[dict]:
        return [json.loads(x) for x in (tmp_path / "state" / "audit.jsonl").read_text()
                .splitlines()]

    c = client()
    assert await pod_cmd._down_locked(settings, c, force=False) == 0
    await c.aclose()
    assert state.pods[pid]["status"] == "RUNNING"
    assert (audit()[-1]["result"], audit()[-1]["arguments"]) == ("kept", {"pod": pid})
    c = client()
    assert await pod_cmd._down_locked(settings, c, force=True) == 0
    await c.aclose()
    assert state.pods[pid]["status"] == "EXITED"
    rec = audit()[-1]
    assert rec["action"] == "down" and rec["result"] == "ok"
    assert rec["arguments"] == {"pod": pid, "force": True}  # not a plain down's record
    assert rec["overrode"] == "extended until 20:00 by alice: eval run"
    assert "down --force" in capsys.readouterr().err
    # the console's pod run reads it back: who stopped the pod (no terminal: cron)
    from console.model.pod_run import operation_of

    op = operation_of(rec)
    assert op is not None and (op.kind, op.by, op.pod_id) == ("down --force", "cron down", pid)
