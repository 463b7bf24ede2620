"""The gateway on screen (issue 34): ``G`` shows model groups, deployments (the cooldown
trap read right) and users; the header carries the gateway's state; the watchdog dialog
says who used the gateway in the last hour. The reading is a real LiteLLM capture
(``tests/fixtures/litellm_metrics.txt``) read by the collector."""

from __future__ import annotations

import re

from msgspec.structs import replace

from console.config.settings import GatewaySettings
from console.model.gateway import GatewaySnapshot, idle_for, who_text
from console.sources.collect.exposition import parse
from console.sources.collect.gateway import FAMILIES, GatewayCollector
from console.ui.screens.gateway import GatewayScreen
from console.ui.screens.main import COMMON_BINDINGS, OPERATION_BINDINGS, MainScreen
from console.ui.screens.modals import WatchdogScreen
from tests.conftest import FIXTURES
from tests.screens import states
from tests.screens.host import ScreenHost, settle

CAPTURE = (FIXTURES / "litellm_metrics.txt").read_text()
T = 1_796_178_400.0
"""Just after the capture was taken (its series' ``_created`` times)."""


def _reading() -> GatewaySnapshot:
    col = GatewayCollector("http://127.0.0.1:4000", GatewaySettings(cooldown_s=30),
                           300.0, 1.0)
    now = T
    col.read(parse(CAPTURE, FAMILIES), now - 10)
    later = re.sub(r'(litellm_deployment_cooled_down_total\{[^}]*\}) (\S+)',
                   lambda m: f"{m.group(1)} {float(m.group(2)) + 1}", CAPTURE)
    later = re.sub(r'(litellm_proxy_total_requests_metric_total\{[^}]*end_user="alice"'
                   r'[^}]*model_id="tiny-a"[^}]*\}) (\S+)',
                   lambda m: f"{m.group(1)} {float(m.group(2)) + 2}", later)
    return col.read(parse(later, FAMILIES), now)


def _text(app: ScreenHost) -> str:
    return "\n".join(s.text for s in app.screen._compositor.render_strips())


def test_g_is_a_free_key() -> None:
    keys = [k for b in (*OPERATION_BINDINGS, *COMMON_BINDINGS) for k in b.key.split(",")]
    assert keys.count("G") == 1


async def test_gateway_screen_shows_groups_deployments_and_users() -> None:
    gw = _reading()
    state = replace(states.state(), gateway=gw, now=T)
    app = ScreenHost(lambda: GatewayScreen(state))
    async with app.run_test(size=(160, 44)) as pilot:
        await settle(pilot)
        text = _text(app)
    assert "gateway up · ready" in text
    assert "tiny-b" in text and "COOLDOWN" in text  # a cooldown seen to happen
    assert "tiny-a" in text and "healthy" in text
    assert "small-c" in text
    assert "alice" in text and "bob" in text and "users / keys today" in text
    assert "OVERHEAD" in text and "FB ok" in text
    assert "sk-" not in text


async def test_header_carries_the_gateway() -> None:
    state = replace(states.state(), gateway=_reading(), now=T)
    app = ScreenHost(lambda: MainScreen(state))
    async with app.run_test(size=(240, 40)) as pilot:
        await settle(pilot)
        first = _text(app).splitlines()[0]
    assert "gateway up · ready" in first and "cooldown: tiny-b" in first
    assert "2 users 1h00m" in first  # who used it in the last hour, beside the idle time


async def test_watchdog_dialog_says_who_used_it() -> None:
    gw = _reading()
    who = who_text(gw, T, 3600)
    assert who is not None and who.startswith("used in the last 1 h: alice")
    app = ScreenHost(lambda: MainScreen(states.state()),
                     lambda: WatchdogScreen(True, "2026-11-18T20:00:00+09:00", states.NOW,
                                            None, who))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        text = _text(app)
    assert "used in the last 1 h: alice" in text


def test_idle_source() -> None:
    gw = _reading()
    now = T + 600
    assert idle_for(3000.0, gw, "slots", now) == 3000.0
    assert idle_for(3000.0, gw, "gateway", now) == 600.0
    assert idle_for(300.0, gw, "both", now) == 300.0
    assert idle_for(None, None, "gateway", now) is None


async def test_wall_shows_the_gateway_line() -> None:
    from console.ui.screens.wall import WallScreen

    state = replace(states.state(read_only=True), gateway=_reading(), now=T)
    app = ScreenHost(lambda: WallScreen(state, rotate_s=0))
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot)
        text = _text(app)
    assert "view: overview" in text and "gateway up · ready" in text


def test_a_narrow_gateway_table_keeps_its_first_columns_whole() -> None:
    """At 80 columns the deployments' table drops its lowest-priority figures instead of
    squeezing every header and state to an ellipsis."""
    from rich.console import Console

    from console.ui.screens.gateway import groups_table
    from tests.screens.states import gateway_state

    state = gateway_state()
    assert state.gateway is not None
    out = Console(width=76, record=True, color_system=None)
    out.print(groups_table(state.gateway, state, 76))
    text = out.export_text()
    assert all(len(line) <= 76 for line in text.splitlines())
    header = text.splitlines()[0]
    for whole in ("REQ/s", "5xx", "p95", "OVERHEAD", "COOL", "state"):
        assert whole in header, header
    assert "…" not in header and "COOLDOWN" in text and "healthy" in text
    wide = Console(width=200, record=True, color_system=None)
    wide.print(groups_table(state.gateway, state, 200))
    shown = wide.export_text()
    assert "TOKENS" in shown and "SPEND" in shown


def test_the_header_says_a_healthy_gateway_briefly_and_a_sick_one_whole() -> None:
    """The header's room goes to the pod's facts while the gateway is well (``gw ok``);
    a cooldown, an outage or a missing reading is said in full, in red."""
    from msgspec.structs import replace

    from tests.screens.states import gateway_reading

    sick = gateway_reading()
    assert sick.brief() == sick.headline() and "cooldown: tiny-b" in sick.brief()
    well = replace(sick, deployments=tuple(d for d in sick.deployments
                                           if d.status not in ("cooldown", "failing")))
    assert well.brief().startswith("gw ok") and "req/s" in well.brief()
    assert len(well.brief()) < len(well.headline())
    assert replace(well, ready=False).brief() == replace(well, ready=False).headline()
