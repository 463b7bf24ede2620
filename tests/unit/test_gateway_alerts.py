"""The gateway's alert rules (``console/model/gateway.py``): each condition true exactly
when its rule says, with the ``for:`` of its kind; none without a gateway."""

from __future__ import annotations

from console.config.settings import AlertTiming, GatewaySettings
from console.model.alerts import AlertBook
from console.model.gateway import DeploymentRow, GatewaySnapshot, conditions
from console.model.snapshot import DeploymentSnapshot, SlotSnapshot

TIMING = AlertTiming(down_for_s=6, for_s=30, hold_s=30)
SETTINGS = GatewaySettings(error_5xx_ratio=0.05, overhead_p95_s=0.5)


def _dep(mid: str, port: int, requests: float, failures: float, status: str = "healthy",
         **values: float) -> DeploymentRow:
    return DeploymentRow(mid, "tiny", f"http://10.0.0.1:{port}/v1",
                         {"requests": requests, "failures": failures, **values},
                         status)  # type: ignore[arg-type]


def _gw(**kw: object) -> GatewaySnapshot:
    base: dict[str, object] = {"url": "http://gw", "t": 0.0, "live": True, "ready": True}
    base.update(kw)
    return GatewaySnapshot(**base)  # type: ignore[arg-type]


def _slots(*ports: int) -> DeploymentSnapshot:
    return DeploymentSnapshot(profile="p", fetched_at=0.0, slots=tuple(
        SlotSnapshot(slot=f"S{p}", served_model_name="tiny", port=p,
                     url=f"http://10.0.0.1:{p}", health="up") for p in ports))


def _keys(gw: GatewaySnapshot | None, snap: DeploymentSnapshot | None = None) -> dict:
    return {c.key: c for c in conditions(gw, snap, SETTINGS, TIMING)}


def test_quiet_gateway_raises_nothing() -> None:
    assert _keys(None) == {}
    assert _keys(_gw(deployments=(_dep("a", 8001, 10, 0),),
                     total={"error_5xx_ratio": 0.0, "overhead_p95_s": 0.01})) == {}


def test_down_and_not_ready() -> None:
    down = _keys(_gw(live=False, ready=False, ready_detail="connection refused"))
    assert set(down) == {"gw-down"} and down["gw-down"].for_s == TIMING.down_for_s
    assert down["gw-down"].severity == "crit"
    assert set(_keys(_gw(ready=False))) == {"gw-ready"}


def test_cooldown_fallbacks_5xx_overhead() -> None:
    k = _keys(_gw(deployments=(_dep("b", 8002, 4, 4, "cooldown"),
                               _dep("c", 8003, 4, 0, "outage-past")),
                  total={"fallbacks_ok": 2.0, "error_5xx_ratio": 0.2,
                         "overhead_p95_s": 0.9},
                  groups={"tiny": {"error_5xx_ratio": 0.01, "overhead_p95_s": 0.7}}))
    assert "gw-cooldown:b" in k and "gw-cooldown:c" not in k  # state 2 of the past: not down
    assert k["gw-fallbacks"].for_s == TIMING.for_s
    assert "gw-5xx:the gateway" in k and "gw-5xx:tiny" not in k
    assert "gw-overhead:the gateway" in k and "gw-overhead:tiny" in k
    assert "0.70s" in k["gw-overhead:tiny"].title


def test_a_slot_healthy_alone_while_the_gateway_fails_for_it() -> None:
    gw = _gw(deployments=(_dep("a", 8001, 10, 9, "failing"), _dep("b", 8002, 10, 0)))
    k = _keys(gw, _slots(8001, 8002))
    assert "gw-route:a" in k and "gw-route:b" not in k
    assert k["gw-route:a"].severity == "crit" and "S8001" in k["gw-route:a"].title
    # the slot down too: the slot's own alert says it, not a routing mismatch
    assert "gw-route:a" not in _keys(gw, _slots(8002))
    # fires after for:, as every figure alert does
    book = AlertBook()
    book.update(k.values(), 0.0)
    assert not [a for a in book.active.values() if a.state == "firing"
                and a.key == "gw-route:a"]
    fired, _ = book.update(k.values(), 31.0)
    assert "gw-route:a" in {a.key for a in fired}
