"""The alerts panel grows with the alerts before the plots do; advice wraps, never cut;
the history says which severity fired (issue 30, #7)."""

from __future__ import annotations

from console.ui.screens.alerts import AlertHistoryScreen
from console.ui.screens.main import MainScreen
from console.ui.widgets.panels import AlertsPanel
from tests.screens import states
from tests.screens.host import ScreenHost, settle


def _words(text: str) -> list[str]:
    return " ".join(text.split()).split(" ")


async def test_six_alerts_all_shown_at_160x48_with_their_advice_whole() -> None:
    state = states.six_alerts()
    app = ScreenHost(lambda: MainScreen(state))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        panel = app.top.query_one(AlertsPanel)
        shown = panel.text
        assert "more" not in shown, shown
        flat = " ".join(shown.split())
        for a in state.alerts:
            assert a.title in shown, (a.title, shown)
            if a.detail:  # the whole advice, in order, however it wrapped
                assert " ".join(a.detail.split()) in flat, (a.detail, shown)
        # every line of it is on screen: nothing below the terminal's last row
        assert panel.region.bottom <= 48 - 1 and panel.region.height >= len(
            panel.text.splitlines()) + 2


async def test_six_alerts_at_80x24_as_many_as_fit_and_the_rest_counted() -> None:
    state = states.six_alerts()
    app = ScreenHost(lambda: MainScreen(state))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        panel = app.top.query_one(AlertsPanel)
        shown = panel.text
        titles = [a.title for a in state.alerts]
        visible = [t for t in titles if t[:40] in shown]
        hidden = len(titles) - len(visible)
        assert len(visible) >= 2, shown
        if hidden:
            assert f"… and {hidden} more" in shown, shown
        assert panel.region.bottom <= 24 - 1, panel.region
        # no line is cut at the panel's edge: advice wraps onto lines of its own
        assert all(len(line) <= panel.content_size.width for line in shown.splitlines()), (
            panel.content_size.width, shown)
        flat = " ".join(shown.split())
        for a in state.alerts:  # an alert shown has its advice whole
            if a.title[:40] in shown and a.detail:
                assert " ".join(a.detail.split()) in flat, (a.detail, shown)


async def test_history_names_the_severity_that_fired() -> None:
    from console.ui.widgets.panels import history_line

    state = states.six_alerts()
    crit = [e for e in state.alert_history if e.kind == "firing" and e.severity == "crit"]
    assert crit
    line = history_line(crit[0]).plain
    assert "CRIT" in line and "▲" not in line, line
    warn = [e for e in state.alert_history if e.kind == "firing" and e.severity == "warn"]
    assert "WARN" in history_line(warn[0]).plain
    app = ScreenHost(lambda: AlertHistoryScreen(state))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        text = str(app.top.query_one("#aevents").render())
        assert "✖ CRIT FIRED" in text, text


def test_what_does_not_fit_is_counted_whole_alerts_first() -> None:
    from rich.text import Text

    from console.ui.widgets.panels import fit_alerts

    blocks = [[Text("a")], [Text("b"), Text("  advice b")], [Text("c")], [Text("d")]]
    assert [t.plain for t in fit_alerts(blocks, 5)[0]] == ["a", "b", "  advice b", "c", "d"]
    lines, hidden = fit_alerts(blocks, 4)  # one line kept to count the rest
    assert [t.plain for t in lines] == ["a", "b", "  advice b"] and hidden == 2
    lines, hidden = fit_alerts([[Text("x"), Text("1"), Text("2")]], 2)
    assert [t.plain for t in lines] == ["x"] and hidden == 0
