"""The watchdog's edges (issue 42, last finding): an extension ended by hand, an idle pod
announced for the evening's stop with ``idle_stop_in_hours: false``, a wall clock that
steps back after the warning, and ``--replaces-next-stop`` from the console's ``w``.

The pure policy in the style of ``test_stop_policy`` (its ``run``/``ticks``); the real
supervisor on the injected pod clock of ``test_watchdog_days``; the console's watchdog
operation through the real ``pod-agent`` CLI to that supervisor's socket."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from console.operations.operation import OperationDeps
from console.operations.ops import watchdog as wd_op
from console.sources.agent_client import AgentClient
from console.sources.remote import LocalAgentTransport
from pod_agent import paths
from pod_agent import stoppolicy as sp
from tests.conftest import REPO
from tests.unit.test_stop_policy import MON, at, seoul, ticks
from tests.unit.test_watchdog_days import TICK, Pod, local
from tests.unit.test_watchdog_days import pod as pod  # the fixture: one pod's volume


def _extend(sched, st: sp.PolicyState, t: float, until: str) -> None:
    st.extension = sp.make_extension(sched, st, t, sp.extension_until(until, sched, t),
                                     "alice", "eval")
    st.warned.clear()  # a new plan: its warnings are new (the supervisor's _set_extension)


def _end_by_hand(sched, st: sp.PolicyState, t: float) -> sp.Decision:
    """``w c``: the extension goes, and the decision the agent answers with is acted on."""
    st.extension = None
    d = sp.resume_plan(sched, st, t, False)
    if d.announce:
        st.note_warning(d, t)
    return d


# -- an extension ended by hand -----------------------------------------------------------

def test_an_extension_ended_past_its_held_stop_stops_after_the_stated_grace() -> None:
    sched = seoul()  # warn_before 10m
    st = sp.PolicyState(last_activity=at(*MON, 9, 0))
    _extend(sched, st, at(*MON, 17, 0), "21:00")
    assert ticks(sched, st, at(*MON, 17, 0), at(*MON, 19, 0))[0] is None  # held
    d = _end_by_hand(sched, st, at(*MON, 19, 0))
    # warned once, now, for 19:02: the grace the confirmation states, not warn_before
    assert d.announce and d.next_reason == "schedule"
    assert d.next_at == at(*MON, 19, 0) + sp.END_GRACE_S
    stopped, seen = ticks(sched, st, at(*MON, 19, 0, s=30), at(*MON, 19, 30))
    assert stopped == at(*MON, 19, 2) and seen[-1][1].reason == "schedule"
    assert not any(dd.announce for _, dd in seen)  # no second warning
    # ended within warn_before of the stop: at its own time (warned now), not 18:05
    st = sp.PolicyState(last_activity=at(*MON, 9, 0))
    _extend(sched, st, at(*MON, 17, 0), "21:00")
    d = _end_by_hand(sched, st, at(*MON, 17, 55))
    assert d.announce and d.next_at == at(*MON, 18, 0)
    assert ticks(sched, st, at(*MON, 17, 55, s=30), at(*MON, 18, 30))[0] == at(*MON, 18, 0)
    # ended long before the stop: the plan alone, warned warn_before ahead as always
    st = sp.PolicyState(last_activity=at(*MON, 9, 0))
    _extend(sched, st, at(*MON, 12, 0), "21:00")
    d = _end_by_hand(sched, st, at(*MON, 13, 0))
    assert not d.announce and d.next_at == at(*MON, 18, 0)


def test_the_confirmation_says_what_ending_an_extension_does(tmp_path) -> None:
    from console.model.snapshot import PodSnapshot
    from tests.unit.test_operations_modules import _facts

    facts = _facts(tmp_path, PodSnapshot(pod_id="emu7", cost_per_hr=4.18))
    text = wd_op.question(facts, {"cmd": "extend", "clear": True})
    assert "at once" not in text
    assert f"warned now and made {sp.END_GRACE_S / 60:g} min later" in text, text


# -- idle all afternoon, announced for the scheduled stop ---------------------------------

def test_an_idle_afternoon_stops_at_the_scheduled_stop_as_the_schedule() -> None:
    sched = seoul(idle_stop_after="45m", idle_stop_in_hours=False)
    st = sp.PolicyState(last_activity=at(*MON, 13, 0))
    stopped, seen = ticks(sched, st, at(*MON, 13, 0), at(*MON, 19, 0))
    assert stopped == at(*MON, 18, 0), sp.iso(stopped)
    assert seen[-1][1].reason == "schedule"
    warned = [(t, d.next_reason) for t, d in seen if d.announce]
    assert warned == [(at(*MON, 17, 50), "schedule")]  # one warning, for what happens
    # all afternoon the plan said the schedule, never an idle stop in working hours
    assert {d.next_reason for _, d in seen} == {"schedule"}


async def test_the_real_agent_stops_an_idle_afternoon_at_18_as_scheduled(pod) -> None:
    p: Pod = pod("seoul", idle_stop_after="45m", idle_stop_in_hours=False)
    p.start(local("seoul", 0, 13, 0))
    stops = await p.until(local("seoul", 0, 19, 0))
    assert stops == [(local("seoul", 0, 18, 0), "schedule")]
    assert [w[2] for w in p.warnings()] == ["schedule"]
    assert p.status()["last_stop"]["reason"] == "schedule"


# -- a wall clock that steps back after the warning ---------------------------------------

async def test_after_the_clock_steps_back_the_warning_comes_warn_before_ahead(pod) -> None:
    p: Pod = pod("seoul")
    p.start(local("seoul", 0, 17, 30))
    await p.until(local("seoul", 0, 17, 55))
    assert [w[0] for w in p.warnings()] == [local("seoul", 0, 17, 50)]
    p.wall -= 3600  # 16:55: NTP after a suspend; the stop is 65 real minutes away again
    await p.until(p.wall + TICK)
    assert p.status()["warning"] is False  # not "stops in 65 min" as a warning
    mono_at_warning: list[float] = []
    assert p.sup is not None
    warn = p.sup.watch.warn

    async def seen_warn(reason: str, at_: float, now: float) -> None:
        mono_at_warning.append(p.mono)
        await warn(reason, at_, now)

    p.sup.watch.warn = seen_warn  # type: ignore[method-assign]
    mono0, wall0 = p.mono, p.wall
    stops = await p.until(local("seoul", 0, 18, 30))
    assert stops == [(local("seoul", 0, 18, 0), "schedule")]
    # warned again on the pod's clock at 17:50, i.e. warn_before (10 real min) ahead
    assert [w[0] for w in p.warnings()][-1] == local("seoul", 0, 17, 50)
    stop_mono = mono0 + (local("seoul", 0, 18, 0) - wall0)
    assert len(mono_at_warning) == 1 and stop_mono - mono_at_warning[0] <= 600 + TICK


def test_a_warning_timed_on_the_monotonic_clock_survives_a_forward_step() -> None:
    """A forward step after the warning does not make the stop come early either."""
    sched = seoul()
    st = sp.PolicyState(last_activity=at(*MON, 9, 0))
    t, mono = at(*MON, 17, 50), 1_000.0
    d = sp.decide(sched, st, t, False, mono)
    assert d.announce
    st.note_warning(d, t, mono)
    # the wall clock jumps 20 min, 30 s went by: the stop waits its 10 real minutes
    d = sp.decide(sched, st, t + 1230, False, mono + 30)
    assert not d.stop and d.next_at == t + 1230 + 570


# -- w offers --replaces-next-stop ------------------------------------------------------

class _Agent:
    """The console's side of the real agent: the ``pod-agent`` CLI, run as a process (the
    demo's transport: only SSH skipped), to the supervisor's own socket."""

    def __init__(self, p: Pod) -> None:
        self.p = p
        env = dict(os.environ, POD_AGENT_HOME=str(p.home), PYTHONPATH=str(REPO))
        client = AgentClient(LocalAgentTransport([sys.executable, "-m", "pod_agent"], env))
        self.deps = OperationDeps(client, lambda: False, lambda: None)
        self.server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> _Agent:
        assert self.p.sup is not None
        self.server = await asyncio.start_unix_server(self.p.sup.handle,
                                                      path=paths.socket_path())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def w(self, args: dict[str, Any]) -> Any:
        """The watchdog operation's handler, as ``w`` runs it once confirmed."""
        return await wd_op.handler(self.deps, args, lambda *a: None)


async def test_w_can_replace_the_next_stop_through_the_agent(pod) -> None:
    p: Pod = pod("seoul")
    sup = p.start(local("seoul", 0, 17, 0))
    async with _Agent(p) as agent:
        out = await agent.w({"cmd": "extend", "until": "tomorrow 10:00", "reason": "eval",
                             "replaces_next_stop": True})
    assert out.ok, out.message
    ext = sup.watch.policy.extension
    assert ext is not None and ext.replaces_next_stop
    assert out.data["next_stop_reason"] == "extension ends"  # its end, in working hours
    stops = await p.until(local("seoul", 1, 10, 30))
    assert stops == [(local("seoul", 1, 10, 0), "extension ended")]


async def test_w_ending_an_extension_past_its_stop_stops_as_confirmed(pod) -> None:
    p: Pod = pod("seoul")
    p.start(local("seoul", 0, 17, 0))
    async with _Agent(p) as agent:
        assert (await agent.w({"cmd": "extend", "until": "21:00", "reason": "eval"})).ok
        assert await p.until(local("seoul", 0, 19, 0) - TICK) == []  # held; now 19:00
        out = await agent.w({"cmd": "extend", "clear": True})
    assert out.ok and "the pod stops at 19:02 (schedule), warned now" in out.message, \
        out.message
    stops = await p.until(local("seoul", 0, 19, 30))
    assert stops == [(local("seoul", 0, 19, 2), "schedule")]  # not 19:10
    assert [w[0] for w in p.warnings()] == [local("seoul", 0, 19, 0)]
