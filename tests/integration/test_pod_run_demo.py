"""Issue 42, items 1-3, in the demo at ×60: traffic stops → idle warning → the
watchdog's idle stop → `r` → a new run, serving from its first reading → `w s y` (the
console's stop-now) → `r` again. Each stop is one INFO with its cause and who, no WARN
or CRIT (the gateway's 5xx over the stop included), and no "stopping" on a running pod.

Real parts: the demo's slots (HTTP), its pod agent and watchdog on an accelerated
clock, the RunPod emulator, LiteLLM's stand-in, the operation registry and its audit
log, the session. Only the header is drawn without a terminal (its segments)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from console.session.session import Session
from console.session.view import ConsoleState
from console.ui.widgets.header import PodHeader
from tests.support.waits import polled_until

pytestmark = pytest.mark.realtime

LIMIT_S = 180.0
"""Each step's bound (the idle stop alone is ~30 s at ×60); a failure is said at once."""


def header(st: ConsoleState) -> str:
    h = PodHeader(st.view.title, st.view.demo, st.view.read_only)
    return " | ".join(t.plain for _, t in h.segments(st.pod, st.now, st.stale,
                                                      st.operation, None, st.stop))


async def test_a_day_of_stops_and_resumes_in_the_demo(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    from console.commands.tui_cmd import demo_context
    from console.demo.deployment import DemoDeployment

    monkeypatch.setenv("POD_CONSOLE_STATE_DIR", str(tmp_path / "state"))
    demo = DemoDeployment(workdir=tmp_path / "demo", seed=7, startup_s=3.0, rate=2.0,
                          clock_speed=60)
    await asyncio.to_thread(demo.start)
    try:
        ctx = demo_context(demo, refresh_s=2.0)
        session = Session(ctx)
        faults = {title: fn for title, _, fn in demo.faults()}
        seen: list[ConsoleState] = []

        async def polled() -> ConsoleState:
            session.refresh_now()
            assert await session.poll()
            seen.append(session.state())
            return seen[-1]

        async def until(cond: Callable[[ConsoleState], bool], what: str) -> ConsoleState:
            return await polled_until(polled, cond, what, LIMIT_S,
                                      say=lambda st: f"{st.run} {header(st)}")

        def loud(st: ConsoleState) -> list[str]:
            return [a.title for a in st.alerts
                    if a.state == "firing" and a.severity in ("warn", "crit")
                    # the watchdog's own warning before its stop; working hours are
                    # judged on this machine's clock, not the demo pod's (issue 42,
                    # another item): neither is a consequence of a stop
                    and a.key not in ("stop-soon", "hours")]

        st = await until(lambda s: s.run is not None and s.run.state == "serving",
                         "serving")
        first = st.run
        assert first is not None
        faults["traffic stops"]()
        st = await until(lambda s: s.run is not None and s.run.state == "stopped",
                         "the idle stop")
        assert st.run is not None and (st.run.number, st.run.cause, st.run.by) == (
            first.number, "idle", "watchdog")
        assert "stopped at" in header(st) and "(idle)" in header(st), header(st)
        info = [a.title for a in st.alerts if a.key == "stopped"]
        assert info and "(idle) by watchdog at" in info[0], info
        # `r`: a new run; the demo's agent still says it made an idle stop
        faults["traffic resumes"]()
        out = await ctx.registry.invoke("resume", {})
        assert out.ok, out.message
        mark = len(seen)
        st = await until(lambda s: s.run is not None and s.run.number == first.number + 1
                         and s.pod is not None and s.pod.stop_plan is not None
                         and s.pod.stop_plan.busy, "the resumed pod busy")
        # from the new run's first reading on: never "stopping"/"stopped" while it runs
        for s in seen[mark:]:
            if s.run is not None and s.run.number == first.number + 1:
                assert s.stop is None and "stopp" not in header(s), header(s)
        # `w s y`: the console's stop, and who asked, not "through the provider"
        out = await ctx.registry.invoke("watchdog", {"cmd": "stop-now"})
        assert out.ok, out.message
        st = await until(lambda s: s.run is not None and s.run.state == "stopped",
                         "the stop-now")
        assert st.run is not None and st.run.cause == "stop-now"
        assert st.run.by is not None and "@" in st.run.by, st.run
        assert "provider" not in header(st), header(st)
        out = await ctx.registry.invoke("resume", {})
        assert out.ok, out.message
        mark = len(seen)
        st = await until(lambda s: s.run is not None and s.run.number == first.number + 2
                         and s.run.state == "serving", "the second resume")
        for _ in range(5):
            st = await until(lambda s: True, "a poll")
            assert st.stop is None and "stopp" not in header(st), header(st)
        # no WARN or CRIT at any poll from the first stop on (the watchdog's warning
        # before the idle stop aside): the stops and their consequences are planned
        loud_polls = [(i, loud(s)) for i, s in enumerate(seen) if loud(s)]
        assert loud_polls == [], loud_polls[:3]
        await session.aclose()
    finally:
        await asyncio.to_thread(demo._stop_all)
