"""The header with priorities and the key bar with only valid keys (issue 47, items 1
and 5's key-bar part), on the main screen drawn from fixed states at the widths people
use: a phone's 60 and 80 columns, a laptop's 120, a wall's 160 and 200.

The header's fields go by rank (``console/ui/widgets/header.py`` ``Rank``): no field is
shown while a more important one is not, the pod's state with its cause or countdown
never goes, an operation running never displaces the countdown, the gateway is there at
every width while it is in trouble, coloured by its worst state. The key bar offers
only keys that can work now, and ``w`` whenever the stop is near."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from msgspec.structs import replace
from rich.text import Text
from textual.screen import Screen

from console.model.alerts import Alert
from console.session.view import ConsoleState, ReplayMark
from console.ui.screens.gpus import GpuScreen
from console.ui.screens.main import MainScreen
from console.ui.widgets.header import PodHeader, Rank
from console.ui.widgets.keybar import KeyBar
from tests.screens import states
from tests.screens.host import ScreenHost, run_before, settle

WIDTHS = (60, 80, 120, 160, 200)
SIZES = [(80, 24), (120, 40), (160, 48)]


@pytest.fixture(autouse=True)
def _pinned_terminal(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TEXTUAL_COLOR_SYSTEM", "truecolor")
    monkeypatch.setenv("COLORTERM", "truecolor")
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _busy(**kw: Any) -> ConsoleState:
    """The crowded case: several contexts, an operation running, six alerts, a gateway
    in cooldown, a demo badge."""
    st = states.six_alerts(contexts=states.CONTEXTS, context="seoul",
                           operation="Benchmark", demo=True, **kw)
    return replace(st, gateway=states.gateway_reading())


SCENARIOS: dict[str, Callable[[], ConsoleState]] = {
    "plain": states.state,
    "operation": lambda: states.state(operation="Benchmark"),
    "contexts": lambda: states.state(contexts=states.CONTEXTS, context="seoul"),
    "cooldown": states.gateway_state,
    "six-alerts": states.six_alerts,
    "stop-near-operation": lambda: states.stop_near_state(operation="Benchmark"),
    "extended": states.extended_state,
    "watchdog-failing": states.watchdog_failing_state,
    "planned-stop": states.planned_stop_state,
    "busy": _busy,
}


async def _drawn(st: ConsoleState, width: int, screen: type[Screen] = MainScreen,
                 height: int = 30) -> tuple[PodHeader, str, str]:
    """The header widget, its line and the key bar's line of ``st`` at ``width``."""
    app = ScreenHost(lambda: screen(st) if screen is not MainScreen else MainScreen(st, ()))
    async with app.run_test(size=(width, height)) as pilot:
        await settle(pilot)
        header = app.top.query_one(PodHeader)
        bar = "".join(seg.text for seg in app.top.query_one(KeyBar).render_line(0))
        return header, header.render().plain, bar


def _fields(header: PodHeader, st: ConsoleState) -> list[Any]:
    return header.fields(st.pod, st.now, st.stale, st.operation, None, st.stop)


def _style_at(text: Text, word: str) -> str:
    """The style of the first span over ``word`` in a rendered line."""
    at = text.plain.index(word)
    styles = [str(s.style) for s in text.spans if s.start <= at < s.end]
    return " ".join(styles)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_the_most_important_fields_go_last_at_every_width(name: str, width: int
                                                                ) -> None:
    st = SCENARIOS[name]()
    header, line, _ = await _drawn(st, width)
    assert len(line) <= width - 2
    fields, shown = header.drawn
    assert [f.text.plain for f in fields] == [f.text.plain for f in _fields(header, st)]
    kept = [f.rank for i, f in enumerate(fields) if i in shown]
    dropped = [f.rank for i, f in enumerate(fields) if i not in shown]
    # no field is shown while a more important one is not
    assert not dropped or max(kept) <= min(dropped), (line, kept, dropped)
    # what was chosen is what is drawn, in display order
    assert line.rstrip() == " │ ".join(shown[i].plain for i in sorted(shown))
    # the pod's state and its stop (countdown, cause, extension) at any width, during
    # any operation
    assert st.pod is not None and (st.pod.status or "?") in line
    assert any(w in line for w in ("stop in", "stop ", "stopped at", "extended →")), line
    if width >= 80:
        assert "$4.18/h" in line, line
    if width >= 120 and st.view.context:
        assert "seoul" in line, line
    if width >= 120 and st.operation:
        assert "▶ Benchmark" in line, line


@pytest.mark.parametrize("width", WIDTHS)
async def test_at_60_columns_the_money_stays_and_p2p_goes(width: int) -> None:
    st = states.state()
    _, line, _ = await _drawn(st, width)
    assert "$4.18/h" in line and "stop" in line and "3 WARN" in line, line
    if width <= 120:
        assert "P2P" not in line and "refresh" not in line, line


@pytest.mark.parametrize("width", (80, 120, 160))
async def test_an_operation_never_displaces_the_stop_countdown(width: int) -> None:
    st = states.stop_near_state(operation="Benchmark", demo=True)
    _, line, _ = await _drawn(st, width)
    assert "stop in 4m (idle)" in line or "stop 4m" in line, line
    if width >= 120:
        assert "▶ Benchmark running" in line and "stop in 4m (idle)" in line, line


@pytest.mark.parametrize("width", (60, 80, 160))
async def test_the_last_minute_before_a_stop_is_counted_in_seconds(width: int) -> None:
    """Issue 47 (words): "stop in 0m" for the last 59 s read as no time left, or as no
    stop; the wall's big digits said "0 min". Seconds, there and in the header."""
    from console.ui.screens.wall import WallScreen
    from console.ui.widgets.board import Metric

    plan = states.stop_plan(next_reason="idle", in_s=42.4, warning=True, warn_before_s=600.0,
                            idle_s=1758.0)
    st = states.state(pod_=states.pod(stop_plan=plan), operation="Benchmark")
    _, line, bar = await _drawn(st, width)
    assert "stop in 42 s (idle)" in line or "stop 42 s" in line, line
    assert not re.search(r"\b0m\b", line) and "w " in bar, (line, bar)
    if width == 160:
        from textual.widgets import Digits, Label

        app = ScreenHost(lambda: WallScreen(replace(st, view=replace(st.view, read_only=True)),
                                            rotate_s=0))
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(pilot)
            stop = app.top.query_one(".m-stop", Metric)
            assert stop.query_one(Digits).value == "42"
            assert "s until the stop" in str(stop.query_one(Label).content)


@pytest.mark.parametrize("width", (120, 160))
async def test_several_contexts_put_the_context_on_the_header(width: int) -> None:
    _, line, _ = await _drawn(_busy(), width)
    assert line.startswith(" DEMO  │ seoul"), line


@pytest.mark.parametrize("width", (80, 120, 200))
async def test_an_extension_says_extended_to_not_the_old_reason(width: int) -> None:
    _, line, _ = await _drawn(states.extended_state(), width)
    assert "extended → 20:00" in line, line
    assert "stop in 57m" not in line and "(extension ends)" not in line, line
    if width >= 120:
        assert "extended → 20:00 alice" in line, line


@pytest.mark.parametrize("width", (60, 120))
async def test_a_failing_watchdog_is_said_on_the_header(width: int) -> None:
    st = states.watchdog_failing_state()
    header, line, _ = await _drawn(st, width)
    want = "watchdog failing since 10:30" if width >= 120 else "watchdog FAILING"
    assert want in line, line
    assert "crit" in _style_at(header.render(),
                             want.split()[0] + " " + want.split()[1]).split()
    assert any(a.key == "watchdog-failing" and a.severity == "crit" for a in st.alerts)


@pytest.mark.parametrize("width", WIDTHS)
async def test_the_gateway_in_cooldown_is_there_and_not_green_at_every_width(width: int
                                                                             ) -> None:
    st = states.gateway_state()
    header, line, _ = await _drawn(st, width)
    assert "COOLDOWN" in line or "cooldown: tiny-b" in line, line
    word = "COOLDOWN" if "COOLDOWN" in line else "cooldown"
    style = _style_at(header.render(), word)
    assert "ok" not in style.split() and "warn.strong" in style.split(), style


async def test_an_error_rate_over_the_limit_is_not_green() -> None:
    st = replace(states.state(), gateway=states.failing_gateway_reading())
    header, line, _ = await _drawn(st, 200)
    assert "err 30.8%" in line, line
    assert "ok" not in _style_at(header.render(), "err 30.8%").split()
    # under the limit (5 % of calls): green, as the alerts say nothing
    ok = replace(st, gateway=replace(st.gateway, total={**st.gateway.total,
                                                         "error_rate": 0.01}))
    header, line, _ = await _drawn(ok, 200)
    assert "ok" in _style_at(header.render(), "err 1.0%").split(), line


async def test_a_firing_gateway_alert_colours_the_field() -> None:
    """The field never reads green beside a gateway WARN (the alert as the book has it:
    its condition may have gone since, it holds)."""
    st = replace(states.state(), gateway=states.failing_gateway_reading())
    st = replace(st, gateway=replace(st.gateway, total={**st.gateway.total,
                                                         "error_rate": 0.0}),
                 alerts=(*st.alerts, Alert("gw-5xx:the gateway", "warn",
                                           "gateway 5xx 31% of the gateway calls > 5%", "",
                                           states.NOW - 60)))
    header, line, _ = await _drawn(st, 200)
    assert "gw ok" in line, line
    assert "warn.strong" in _style_at(header.render(), "gw ok").split()


# -- the key bar -------------------------------------------------------------------------

async def test_no_resume_key_on_a_running_pod() -> None:
    _, _, bar = await _drawn(states.state(), 200)
    assert " r resume " not in bar and " f fallback " in bar, bar
    _, _, bar = await _drawn(states.planned_stop_state(), 200)
    assert " r resume " in bar, bar


async def test_the_live_pause_shows_no_operation_key() -> None:
    """Paused, the screen is handed the recording's state: its keys are the replay's
    (``t`` steps a sample), not the operations'."""
    live = states.planned_stop_state()
    app = ScreenHost(lambda: MainScreen(live, ()))
    async with app.run_test(size=(200, 30)) as pilot:
        await settle(pilot)
        bar = app.top.query_one(KeyBar)
        before = [s.key for s in bar.spans]
        assert {"r", "f", "h", "b", "R", "a", "t"} <= set(before), before
        mark = ReplayMark("PAUSED", "11:00:00", "Thu 19 Nov", "paused", behind_s=30.0)
        app.top.show(replace(live, replay=mark, allowed=frozenset()))
        await settle(pilot)
        during = [s.key for s in bar.spans]
        assert not {"r", "f", "h", "b", "R", "a", "t", "w"} & set(during), during
        app.top.show(live)  # p: live again, the keys come back
        await settle(pilot)
        assert [s.key for s in bar.spans] == before


@pytest.mark.parametrize("width", (80, 120))
@pytest.mark.parametrize("screen", [MainScreen, GpuScreen], ids=["main", "gpus"])
async def test_w_is_on_the_bar_whenever_the_stop_is_near(width: int,
                                                         screen: type[Screen]) -> None:
    _, _, bar = await _drawn(states.stop_near_state(), width, screen)
    back = " esc back " if screen is GpuScreen else ""
    assert bar.startswith(back + " ? help  q quit  w watchdog "), bar
    _, _, far = await _drawn(states.state(), width, screen)
    assert " w watchdog " not in far[:40], far


async def test_a_poll_that_changes_no_key_redraws_no_key() -> None:
    """The bar repaints when what its keys depend on changes, not at every poll (the
    bench counts the bytes)."""
    st = states.state()
    app = ScreenHost(lambda: MainScreen(st, ()))
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        bar = app.top.query_one(KeyBar)
        drawn: list[int] = []
        real = bar.refresh

        def counted(*a: Any, **kw: Any) -> Any:
            drawn.append(1)
            return real(*a, **kw)

        bar.refresh = counted  # type: ignore[method-assign]
        for k in range(3):  # three polls: the figures move, no key changes
            app.top.show(replace(st, now=st.now + 5 * (k + 1)))
            await settle(pilot)
        assert drawn == [], drawn
        app.top.show(states.stop_near_state())  # now w is urgent: one redraw
        await settle(pilot)
        assert drawn and bar.spans[2].key == "w"


# -- snapshots -----------------------------------------------------------------------------

SNAPSHOTS: dict[str, Callable[[], ConsoleState]] = {
    "operation": lambda: states.stop_near_state(operation="Benchmark"),
    "cooldown": states.gateway_state,
    "contexts": _busy,
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", list(SNAPSHOTS))
def test_header_snapshot(snap_compare, name: str, size: tuple[int, int]) -> None:
    """The header (and the key bar) under an operation with the stop near, during a
    gateway cooldown, and with several contexts on a crowded screen."""
    st = SNAPSHOTS[name]()
    assert snap_compare(ScreenHost(lambda: MainScreen(st, states.log_lines())),
                        terminal_size=size, run_before=run_before())


def test_every_rank_is_named() -> None:
    """The ranks are distinct where they must be: the state first, P2P last."""
    ranks = {k: v for k, v in vars(Rank).items() if k.isupper()}
    assert ranks["STATE"] == 0 and ranks["P2P"] == max(ranks.values())
    assert ranks["STOP"] < ranks["ALERTS"] < ranks["CONTEXT"] < ranks["COST"] \
        < ranks["OPERATION"] < ranks["GATEWAY"] < ranks["REFRESH"] < ranks["AGE"]
