"""Alerts with Prometheus's timing: pending for ``for``, firing, held for ``hold``, cleared;
START is not DOWN; acknowledgements and one-off failures are history, not standing alerts."""

from __future__ import annotations

from console.config.settings import AlertTiming, Settings
from console.model.alerts import AlertBook, AlertEvent, Condition, evaluate
from console.model.snapshot import DeploymentSnapshot, PodSnapshot, SlotSnapshot
from pod_agent.profiles import load_profiles
from tests.conftest import PROFILES


def _c(key: str = "ttft:A", for_s: float = 30, hold_s: float = 30) -> Condition:
    return Condition(key, "warn", f"{key} title", "", for_s, hold_s)


def test_pending_until_for_then_firing_once() -> None:
    book = AlertBook()
    assert book.update([_c()], 0) == ([], [])
    assert book.active["ttft:A"].state == "pending"
    assert book.update([_c()], 29.9) == ([], [])
    raised, cleared = book.update([_c()], 30)
    assert [a.key for a in raised] == ["ttft:A"] and not cleared
    assert book.active["ttft:A"].state == "firing" and book.active["ttft:A"].since == 0
    assert book.update([_c()], 32) == ([], [])  # firing stays, never raised again
    assert [e.kind for e in book.history] == ["firing"]


def test_a_condition_gone_before_for_never_fires_nor_clears() -> None:
    book = AlertBook()
    book.update([_c()], 0)
    assert book.update([], 10) == ([], [])
    assert not book.active and not book.history


def test_hovering_at_a_threshold_does_not_flap() -> None:
    book = AlertBook()
    book.update([_c(for_s=0)], 0)
    # gone, back, gone, back inside the hold: one alert, no clear, no second raise
    for t, conds in ((2, []), (4, [_c(for_s=0)]), (6, []), (8, [_c(for_s=0)]), (10, [])):
        raised, cleared = book.update(conds, t)
        assert raised == [] and cleared == [], t
    assert book.active["ttft:A"].resolving(10)
    assert book.update([], 39.9) == ([], [])
    raised, cleared = book.update([], 40)  # gone for the whole hold (since 10)
    assert [a.key for a in cleared] == ["ttft:A"] and not book.active
    assert [e.kind for e in book.history] == ["firing", "resolved"]


def test_acknowledge_marks_firing_alerts_and_records_it() -> None:
    book = AlertBook()
    book.update([_c("a", for_s=0), _c("b", for_s=60)], 0)
    done = book.acknowledge("alice", 5)
    assert [a.key for a in done] == ["a"]  # the pending one is not covered
    assert book.active["a"].acked_by == "alice" and book.active["b"].acked_by is None
    assert book.acknowledge("bob", 6) == []  # nothing new to acknowledge
    assert book.sorted()[0].key == "a"  # firing before pending, acked or not
    assert book.history[-1] == AlertEvent(5, "acknowledged", "warn", "a title", "by alice")


def test_history_is_bounded() -> None:
    book = AlertBook()
    for i in range(2000):
        book.event(AlertEvent(i, "failed", "crit", "x"))
    assert len(book.history) == book.history.maxlen == 500


def _snap(health: str) -> DeploymentSnapshot:
    s = SlotSnapshot(slot="FLASH", served_model_name="m", port=1, url="u",
                     health=health, error="connection refused")  # type: ignore[arg-type]
    return DeploymentSnapshot("p", (s,))


def test_a_slot_the_agent_is_starting_is_not_down() -> None:
    lp = next(p for p in load_profiles(PROFILES) if "FLASH" in p.profile.slots)
    settings = Settings(profiles_dir=PROFILES, alerts=AlertTiming(down_for_s=6))
    starting = PodSnapshot(status="RUNNING", agent_slots={"FLASH": {"state": "starting"}})
    conds = {c.key: c for c in evaluate(_snap("down"), starting, lp.profile, settings, 0)}
    assert "down:FLASH" not in conds
    assert conds["starting:FLASH"].severity == "info"
    ready = PodSnapshot(status="RUNNING", agent_slots={"FLASH": {"state": "ready"}})
    conds = {c.key: c for c in evaluate(_snap("down"), ready, lp.profile, settings, 0)}
    down = conds["down:FLASH"]
    assert down.severity == "crit" and down.for_s == 6  # one failed poll is not an outage


def test_a_stopped_pod_is_one_line_not_a_crit_per_slot() -> None:
    lp = next(p for p in load_profiles(PROFILES) if "FLASH" in p.profile.slots)
    settings = Settings(profiles_dir=PROFILES)
    stopped = PodSnapshot(status="EXITED")
    conds = evaluate(_snap("down"), stopped, lp.profile, settings, 0)
    assert [c.key for c in conds if c.severity == "crit"] == []
    # nothing says who stopped it: one WARN line (a planned stop's is an INFO)
    assert [(c.key, c.severity) for c in conds if c.severity != "info"] == [("stopped", "warn")]


def test_stale_figures_of_a_down_slot_raise_no_figure_alert() -> None:
    from msgspec.structs import replace

    from console.sources.collect.exposition import parse
    from console.sources.collect.figures import compute
    from tests.conftest import FIXTURES

    text = (FIXTURES / "vllm-0.32.0-cpu" / "plain" / "metrics-after-load.txt").read_text()
    f = compute(parse(text))["tiny-main"]
    lp = next(p for p in load_profiles(PROFILES) if "FLASH" in p.profile.slots)
    settings = Settings(profiles_dir=PROFILES, thresholds={"default": {"ttft_p95_s": 0.01}})
    for health, expect in (("up", True), ("down", False)):
        s = replace(_snap(health).slots[0], figures=f, stale_since=None if health == "up"
                    else 1.0)
        conds = evaluate(DeploymentSnapshot("p", (s,)), PodSnapshot(status="RUNNING"),
                         lp.profile, settings, 0)
        assert any(c.key == "ttft:FLASH" for c in conds) is expect, health
