"""An alert's text says what was compared (issue 43, "Noise"): a value that crossed its
threshold never prints as the threshold itself (``5 % … > 5 %``). The comparison stays
on the raw value; the text takes the digits it needs."""

from __future__ import annotations

import re

from console.config.settings import AlertTiming, GatewaySettings, SlotThresholds
from console.model import catalog
from console.model.gateway import GatewaySnapshot, conditions

TIMING = AlertTiming(down_for_s=6, for_s=30, hold_s=30)


def _numbers(title: str) -> list[float]:
    return [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)\s*(?:%|s\b)", title)]


def test_gateway_5xx_just_over_its_threshold_says_so() -> None:
    gw = GatewaySnapshot("http://gw", 0.0, True, True, total={"error_5xx_ratio": 0.0504})
    conds = {c.key: c for c in conditions(gw, None, GatewaySettings(error_5xx_ratio=0.05),
                                           TIMING)}
    title = conds["gw-5xx:the gateway"].title
    value, limit = _numbers(title)
    assert value > limit, title
    assert "5.04%" in title and title.endswith("> 5%")


def test_every_threshold_rule_prints_its_value_beyond_its_limit() -> None:
    th = SlotThresholds()
    gws = GatewaySettings(error_5xx_ratio=0.05, overhead_p95_s=0.5)
    for fig, rule in [*catalog.thresholds(), *((f, f.threshold) for f in catalog.GATEWAY
                                               if f.threshold is not None)]:
        settings = gws if fig in catalog.GATEWAY else th
        limit = rule.limit(settings)
        if limit is None or not limit or "{limit" not in rule.text:
            continue
        value = limit * (1 - 1e-4) if rule.below else limit * (1 + 1e-4)
        assert rule.breached(value, settings)
        nums = _numbers(rule.title("S1", value, settings))
        assert len(nums) == 2 and (nums[0] < nums[1] if rule.below else nums[0] > nums[1]), (
            rule.alert, rule.title("S1", value, settings))


def test_a_value_well_over_keeps_its_format() -> None:
    rule = catalog.GATEWAY_BY_KEY["error_5xx_ratio"].threshold
    assert rule is not None
    assert rule.title("tiny", 0.2, GatewaySettings(error_5xx_ratio=0.05)) == \
        "gateway 5xx 20% of tiny calls > 5%"
    assert f"{catalog.Beyond(0.055):.0%}" == "5.5%"  # a limit as configured, not 6 %
    assert f"{catalog.Beyond(0.29 + 1e-7, 0.29):.0%}" != "29%"  # 0.29 x 100 < 29 in floats


def test_gpu_overcommit_text() -> None:
    assert f"{catalog.Beyond(0.951, 0.95):.2f}" == "0.951"
