"""One gateway cooldown is one alert with its consequences under it (issue 43, "Noise"
and item 7): the fallbacks and the 5xx figures a cooldown explains are shown under it
and are no WARN, no notification of their own while it is active; a 5xx rate no
cooldown explains still alerts alone; ``A`` acknowledges one alert or a group."""

from __future__ import annotations

from console.config.settings import AlertTiming, GatewaySettings
from console.model.alerts import AlertBook, grouped
from console.model.conditions import Condition
from console.model.gateway import DeploymentRow, GatewaySnapshot, conditions
from console.session.alertmanager import Where, api_alert

TIMING = AlertTiming(down_for_s=6, for_s=30, hold_s=30)
SETTINGS = GatewaySettings(error_5xx_ratio=0.05)


def _gw(cooling: bool, *, big_5xx: float = 0.3, small_5xx: float = 0.0) -> GatewaySnapshot:
    deps = (DeploymentRow("big-a", "big", "http://10.0.0.1:8001/v1",
                          {"requests": 10, "failures": 6},
                          "cooldown" if cooling else "healthy"),
            DeploymentRow("big-b", "big", "http://10.0.0.1:8002/v1",
                          {"requests": 10, "failures": 0}, "healthy"),
            DeploymentRow("small-a", "small", "http://10.0.0.1:8003/v1",
                          {"requests": 10, "failures": 0}, "healthy"))
    return GatewaySnapshot("http://gw", 0.0, True, True, deployments=deps,
                           total={"fallbacks_ok": 3.0, "error_5xx_ratio": 0.2},
                           groups={"big": {"error_5xx_ratio": big_5xx},
                                   "small": {"error_5xx_ratio": small_5xx}})


def _conds(gw: GatewaySnapshot) -> list[Condition]:
    return conditions(gw, None, SETTINGS, TIMING)


def test_a_cooldown_is_the_parent_of_what_it_explains() -> None:
    by = {c.key: c for c in _conds(_gw(True))}
    assert by["gw-cooldown:big-a"].parent is None
    assert by["gw-fallbacks"].parent == "gw-cooldown:big-a"
    assert by["gw-5xx:big"].parent == "gw-cooldown:big-a"
    assert by["gw-5xx:the gateway"].parent == "gw-cooldown:big-a"


def test_5xx_no_cooldown_explains_stands_alone() -> None:
    by = {c.key: c for c in _conds(_gw(False))}
    assert by["gw-5xx:big"].parent is None and by["gw-fallbacks"].parent is None
    # a cooldown in one group does not explain another group's 5xx, nor the whole
    # gateway's while that other group's is over too
    by = {c.key: c for c in _conds(_gw(True, small_5xx=0.4))}
    assert by["gw-5xx:small"].parent is None
    assert by["gw-5xx:the gateway"].parent is None
    assert by["gw-5xx:big"].parent == "gw-cooldown:big-a"


def _run(book: AlertBook, gw: GatewaySnapshot, t0: float, t1: float, step: float = 2.0
         ) -> tuple[list[str], list[str]]:
    raised: list[str] = []
    cleared: list[str] = []
    t = t0
    while t <= t1:
        r, c = book.update(_conds(gw), t)
        raised += [a.key for a in r]
        cleared += [a.key for a in c]
        t += step
    return raised, cleared


def test_one_cooldown_fires_one_alert_with_its_consequences_in_its_description() -> None:
    book = AlertBook()
    raised, cleared = _run(book, _gw(True), 0.0, 60.0)
    assert raised == ["gw-cooldown:big-a"] and cleared == []
    firing = {a.key: a for a in book.firing()}
    assert set(firing) == {"gw-cooldown:big-a", "gw-fallbacks", "gw-5xx:big",
                           "gw-5xx:the gateway"}  # all true, shown (A, the panel)
    assert [a.key for a in book.told()] == ["gw-cooldown:big-a"]  # one alert sent
    parent = firing["gw-cooldown:big-a"]
    assert [p.key for p, _ in grouped(book.sorted())] == ["gw-cooldown:big-a"]
    ((_, kids),) = grouped(book.sorted())
    assert {k.key for k in kids} == {"gw-fallbacks", "gw-5xx:big", "gw-5xx:the gateway"}
    desc = parent.description()
    assert "fallbacks rising" in desc and "5xx 30% of big calls" in desc, desc
    assert "5xx 20% of the gateway calls" in desc, desc
    ann = api_alert(parent, Where("p", "pod"), 60.0, ends_at=120.0)["annotations"]
    assert "fallbacks rising" in ann["description"]
    # the history (what the webhook is told) has one FIRED
    assert [e.title for e in book.history if e.kind == "firing"] == [parent.title]
    assert "with: " in next(e for e in book.history if e.kind == "firing").detail


def test_the_group_clears_as_one_and_what_outlives_the_cooldown_alerts_alone() -> None:
    book = AlertBook()
    _run(book, _gw(True), 0.0, 60.0)
    # the cooldown ends; the 5xx of the window outlasts it while the cooldown holds:
    # still under it, nothing new said
    raised, cleared = _run(book, _gw(False), 62.0, 80.0)
    assert raised == [] and cleared == []
    assert {a.parent for a in book.firing() if a.key != "gw-cooldown:big-a"} == {
        "gw-cooldown:big-a"}
    # past its hold the cooldown clears; a 5xx still over is unexplained now: an alert
    raised, cleared = _run(book, _gw(False), 82.0, 100.0)
    assert cleared == ["gw-cooldown:big-a"]
    assert set(raised) == {"gw-fallbacks", "gw-5xx:big", "gw-5xx:the gateway"}
    assert all(a.parent is None and a.told for a in book.firing())


def test_consequences_gone_with_their_cooldown_are_never_said() -> None:
    book = AlertBook()
    _run(book, _gw(True), 0.0, 60.0)
    quiet = GatewaySnapshot("http://gw", 0.0, True, True)
    raised, cleared = _run(book, quiet, 62.0, 140.0)
    assert raised == [] and cleared == ["gw-cooldown:big-a"]
    assert [e.kind for e in book.history] == ["firing", "resolved"]


def test_a_5xx_no_cooldown_explains_fires_on_its_own() -> None:
    book = AlertBook()
    raised, _ = _run(book, _gw(False), 0.0, 40.0)
    assert set(raised) == {"gw-fallbacks", "gw-5xx:big", "gw-5xx:the gateway"}


def test_acknowledging_a_group_by_its_parent_and_one_alert_alone() -> None:
    book = AlertBook()
    _run(book, _gw(True), 0.0, 60.0)
    book.update([*_conds(_gw(True)), Condition("hours", "warn", "outside hours")], 62.0)
    done = book.acknowledge("alice", 63.0, "gw-cooldown:big-a")
    assert {a.key for a in done} == {"gw-cooldown:big-a", "gw-fallbacks", "gw-5xx:big",
                                     "gw-5xx:the gateway"}
    assert book.active["hours"].acked_by is None
    done = book.acknowledge("bob", 64.0, "hours")
    assert [a.key for a in done] == ["hours"]
    # a child alone acknowledges only itself
    book2 = AlertBook()
    _run(book2, _gw(True), 0.0, 60.0)
    assert [a.key for a in book2.acknowledge("carol", 61.0, "gw-5xx:big")] == ["gw-5xx:big"]
    assert book2.active["gw-cooldown:big-a"].acked_by is None
    # an acknowledgement adopted from elsewhere (a silence on the parent) covers the group
    book3 = AlertBook()
    _run(book3, _gw(True), 0.0, 60.0)
    assert book3.adopt_ack("gw-cooldown:big-a", "dave", 61.0) is not None
    assert all(a.acked_by == "dave" for a in book3.firing())


def test_a_recording_marks_the_group_once() -> None:
    from console.session.record.store import alert_markers
    from tests.screens import states

    before, after = states.state(), states.cooldown_group()
    marks = [m for m in alert_markers(before, after) if m.kind == "alert"]
    assert [m.key for m in marks] == ["gw-cooldown:q27-a"], marks
