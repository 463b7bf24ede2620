"""Every screen and dialog of the console, drawn from a fixed ``ConsoleState`` with no
process behind it, at a phone's 80×24, a laptop's 120×40 and a wall's 160×48 (and
without colour at 80×24).

The states come from ``tests/screens/states.py``; the host app from ``host.py``. After an
intended change of a screen: ``python3 -m pytest tests/screens --snapshot-update`` and
look at the SVGs that changed (``snapshot_report.html`` shows the differences).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from textual.screen import Screen

from console.ui.screens.alerts import AlertHistoryScreen
from console.ui.screens.detail import SlotDetailScreen
from console.ui.screens.fleet import FleetScreen
from console.ui.screens.gateway import GatewayScreen
from console.ui.screens.gpus import GpuScreen
from console.ui.screens.log import LogScreen
from console.ui.screens.main import MainScreen
from console.ui.screens.modals import (
    ConfirmScreen,
    FatalScreen,
    ProgressScreen,
    RebalanceScreen,
    WatchdogScreen,
)
from console.ui.screens.wall import WallScreen
from tests.screens import states
from tests.screens.host import ScreenHost, Step, run_before

SIZES = [(80, 24), (120, 40), (160, 48)]
CONTEXTS = ("seoul", "tokyo", "oregon")


@pytest.fixture(autouse=True, scope="module")
def _warm_renderer() -> None:
    from tests.screens.host import warm_renderer

    warm_renderer()


@pytest.fixture(autouse=True)
def _pinned_terminal(monkeypatch: pytest.MonkeyPatch):
    """What rendering reads from the environment, pinned: colours and the clock's zone."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TEXTUAL_COLOR_SYSTEM", "truecolor")
    monkeypatch.setenv("COLORTERM", "truecolor")
    monkeypatch.setenv("TZ", "UTC")  # clock texts and plot axes
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _main(**kw: Any) -> Callable[[], Screen]:
    return lambda: MainScreen(states.state(**kw), states.log_lines())


def _progress(steps: tuple[tuple[str, float | None, str], ...] = states.PROGRESS_STEPS,
              title: str = "Host checks", lines: tuple[str, ...] = (),
              end: tuple[bool, str] | None = None, cancellable: bool = False
              ) -> tuple[Callable[[], Screen], Step]:
    """A progress dialog opened 37 s ago, then driven after it is drawn, as an operation
    drives it: steps, lines, the end."""
    holder: dict[str, ProgressScreen] = {}

    def make() -> Screen:
        p = ProgressScreen(title, clock=states.clock,
                           on_cancel=(lambda: None) if cancellable else None)
        p.started = states.NOW - 37
        holder["p"] = p
        return p

    def drive(pilot: Any) -> None:
        p = holder["p"]
        for step, fraction, message in steps:
            p.step(step, fraction, message)
        for line in lines:
            p.step("", None, line)
        if end is not None:
            p.finish(*end)  # its end time from the same fixed clock: "took 37 s"

    return make, drive


def _smoke() -> tuple[Callable[[], Screen], Step]:
    report = states.smoke_report()
    steps = tuple((c.name, (i + 1) / len(report.checks),
                   f"{c.verdict}: {c.evidence} ({c.duration_s:.2f} s)")
                  for i, c in enumerate(report.checks))
    return _progress(steps, "Smoke test", end=states.smoke_outcome(report))


def _bench() -> tuple[Callable[[], Screen], Step]:
    from console.operations.benchmark.record import lines

    rec = states.bench_record()
    steps = (("short-c1", 0.4, "run 2/2: 142.0 tok/s (9 s)"),
             ("long-c1", 0.8, "run 2/2: 118.0 tok/s (31 s)"),
             ("task ko_qa", 1.0, "3/3 (208 s)"))
    return _progress(steps, "Benchmark", tuple(lines(rec)), states.bench_outcome(rec),
                     cancellable=True)


def _rebalance() -> Screen:
    rows, plan, predict = states.rebalance()
    return RebalanceScreen(rows, plan, predict)


def _watchdog() -> Screen:
    return WatchdogScreen(*states.watchdog_args())


def _confirm() -> Screen:
    return ConfirmScreen(*states.confirm_question())


SCREENS: dict[str, tuple[list[Callable[[], Screen]], list[Step]]] = {
    "main": ([_main()], []),
    "main-slot-down": ([_main(down=("Q27",))], []),
    "detail": ([lambda: SlotDetailScreen(states.state(), "FLASH")], []),
    "wall": ([lambda: WallScreen(states.state(read_only=True), rotate_s=60)], []),
    "gpus": ([lambda: GpuScreen(states.state())], []),
    "fleet": ([lambda: FleetScreen(states.state(contexts=CONTEXTS, context="seoul",
                                                fleet_=states.fleet()))], []),
    "log": ([lambda: LogScreen(states.state(), states.log_lines())], []),
    "alert-history": ([lambda: AlertHistoryScreen(states.state(down=("Q27",), acked=True))],
                      []),
    # a gateway cooldown with the fallbacks and 5xx it explains drawn under it (issue 43)
    "alert-history-group": ([lambda: AlertHistoryScreen(states.cooldown_group())], []),
    # the states the issue "never lost, never contradicts itself" names: faults marked on
    # their GPU and slots, a planned stop as one event, six alerts with whole advice
    "main-gpu-faults": ([lambda: MainScreen(states.state(pod_=states.pod(
        gpus=states.faulty_gpus())), states.log_lines())], []),
    "gpus-faults": ([lambda: GpuScreen(states.state(pod_=states.pod(
        gpus=states.faulty_gpus())))], []),
    # GPUs without GPM, and a P2P probe that hung, with the topology that explains it
    "gpus-no-gpm-p2p-hung": ([lambda: GpuScreen(states.state(pod_=states.pod(
        gpus=states.no_gpm_broken_p2p_gpus(), p2p_disabled=True)))], []),
    "main-planned-stop": ([lambda: MainScreen(states.planned_stop_state(),
                                              states.log_lines())], []),
    "main-six-alerts": ([lambda: MainScreen(states.six_alerts(), states.log_lines())], []),
    # G (issue 34): model groups, deployments (one in cooldown), users, from the real
    # LiteLLM capture read twice by the collector
    "gateway": ([lambda: GatewayScreen(states.gateway_state())], []),
    # SLO attainment (issue 45): the column (100 % and 83.3 % below the objective, its
    # alert), the wall's tiles (green, red) and the detail's rows with the edge used
    "main-slo": ([lambda: MainScreen(states.slo_state(), states.log_lines())], []),
    "wall-slo": ([lambda: WallScreen(states.slo_state(read_only=True), rotate_s=60)], []),
    "detail-slo": ([lambda: SlotDetailScreen(states.slo_state(), "Q27")], []),
}
"""name → (the screens pushed, bottom first; what is done once they are up)."""


def _dialog(name: str, top: Callable[[], Screen], *steps: Step, **under: Any) -> None:
    SCREENS[name] = ([_main(**under), top], list(steps))


_dialog("confirm", _confirm)
_dialog("progress-running", *_progress(cancellable=True), operation="Host checks")
_dialog("progress-failed", *_progress(end=states.PROGRESS_FAILED))
_dialog("progress-done", *_progress(end=states.PROGRESS_DONE))
_dialog("watchdog-extend", _watchdog)
_dialog("rebalance", _rebalance)
_dialog("smoke-result", *_smoke())
_dialog("bench-result", *_bench())
_dialog("fatal-config", lambda: FatalScreen(states.fatal_problem()), ready=False,
        pod_=None)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", list(SCREENS))
def test_screen(snap_compare, name: str, size: tuple[int, int]) -> None:
    """Every screen and dialog at a phone's, a laptop's and a wall's terminal."""
    screens, steps = SCREENS[name]
    assert snap_compare(ScreenHost(*screens), terminal_size=size,
                        run_before=run_before(*steps))


def test_main_without_colour(snap_compare, monkeypatch: pytest.MonkeyPatch) -> None:
    """NO_COLOR: state is told by glyph and word, not by colour alone."""
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(ScreenHost(_main(down=("Q27",))), terminal_size=(80, 24),
                        run_before=run_before())


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_faults_and_alerts_without_colour(snap_compare, monkeypatch: pytest.MonkeyPatch,
                                          size: tuple[int, int]) -> None:
    """NO_COLOR with the worst states on screen: six alerts, an Xid, a dead slot."""
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(ScreenHost(lambda: MainScreen(states.six_alerts(),
                                                      states.log_lines())),
                        terminal_size=size, run_before=run_before())
