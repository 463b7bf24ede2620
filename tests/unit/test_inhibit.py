"""``model/inhibit.py`` alone: what the gateway says of a slot an operation restarted
lags the slot's return (LiteLLM cools a route down, counts failures over a window), so
the gateway's alerts of that slot that became true while it was held stay held while
they stay true, to the deadline; one that appears after its release is news."""

from __future__ import annotations

from console.model.conditions import Condition
from console.model.gateway import DeploymentRow, GatewaySnapshot
from console.model.inhibit import SETTLE_S, InhibitBook
from console.model.snapshot import DeploymentSnapshot, SlotSnapshot

GW = GatewaySnapshot("http://gw", 0.0, True, True, deployments=(
    DeploymentRow("q27-a", "qwen", "http://pod:8002/v1", {}, "cooldown"),
    DeploymentRow("flash-a", "flash", "http://pod:8001/v1", {}, "ok")))
COOL = Condition("gw-cooldown:q27-a", "warn", "qwen/q27-a cooling down at the gateway")
FIVE = Condition("gw-5xx:qwen", "warn", "qwen 5xx 40 %")
FLASH = Condition("gw-cooldown:flash-a", "warn", "flash/flash-a cooling down")


def snap(down: set[str]) -> DeploymentSnapshot:
    return DeploymentSnapshot("p", tuple(
        SlotSnapshot(slot=name, served_model_name=name, port=port, url="",
                     health="down" if name in down else "up")
        for name, port in (("FLASH", 8001), ("Q27", 8002))))


def keys(out: list[Condition]) -> set[str]:
    return {c.key for c in out if c.severity != "info"}


def test_the_gateways_view_of_a_restarted_slot_is_held_while_it_lags() -> None:
    book = InhibitBook()
    x = book.begin("Restart slot", ["Q27"], False, 0.0)
    assert keys(book.apply([COOL, FIVE], snap({"Q27"}), GW, 2.0)) == set()
    book.end(x, True, 5.0)
    # up again: its own alerts are released, the gateway's (true since held) are not
    assert keys(book.apply([COOL, FIVE], snap(set()), GW, 7.0)) == set()
    assert keys(book.apply([COOL], snap(set()), GW, 19.0)) == set()
    # another slot's gateway alert is news
    assert keys(book.apply([COOL, FLASH], snap(set()), GW, 21.0)) == {FLASH.key}
    # the deadline: a gateway still cooling the route down is said
    assert keys(book.apply([COOL], snap(set()), GW, 5.0 + SETTLE_S + 1)) == {COOL.key}


def test_a_slot_alert_after_the_slots_release_is_news() -> None:
    book = InhibitBook()
    x = book.begin("Restart slot", ["Q27"], False, 0.0)
    down = Condition("down:Q27", "crit", "Q27 down")
    assert keys(book.apply([down], snap({"Q27"}), None, 2.0)) == set()
    book.end(x, True, 5.0)
    assert keys(book.apply([], snap(set()), None, 7.0)) == set()  # up: released
    probe = Condition("probe:Q27", "crit", "Q27 up but completions fail")
    assert keys(book.apply([probe], snap(set()), None, 9.0)) == {probe.key}
