"""Help per screen (``?``): each screen's own keys, from its bindings, then a legend of
every state word and column that screen shows, thresholds as the values in force (never
a config key), escape, the replay's keys while a recording is shown and ``w``'s keys.
Snapshots: the help of each screen at 120×40 (its top; the rest scrolls)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from textual.screen import Screen
from textual.widgets import Static

from console.operations.specs import SPECS
from console.ui.screen_help import help_for
from console.ui.screens.alerts import AlertHistoryScreen
from console.ui.screens.detail import SlotDetailScreen
from console.ui.screens.fleet import FleetScreen
from console.ui.screens.gateway import GatewayScreen
from console.ui.screens.gpus import GpuScreen
from console.ui.screens.log import LogScreen
from console.ui.screens.main import MainScreen
from console.ui.screens.modals import HelpScreen
from tests.screens import states
from tests.screens.host import ScreenHost, run_before

UNDER: dict[str, Callable[[], Screen]] = {
    "main": lambda: MainScreen(states.state(), states.log_lines()),
    "detail": lambda: SlotDetailScreen(states.state(), "FLASH"),
    "gpus": lambda: GpuScreen(states.state(pod_=states.pod(gpus=states.faulty_gpus()))),
    "gateway": lambda: GatewayScreen(states.gateway_state()),
    "fleet": lambda: FleetScreen(states.state(contexts=("seoul", "tokyo"), context="seoul",
                                              fleet_=states.fleet())),
    "alert-history": lambda: AlertHistoryScreen(states.state(down=("Q27",))),
    "log": lambda: LogScreen(states.state(), states.log_lines()),
}


def _help_of(name: str, replay: bool = False) -> tuple[Screen, HelpScreen]:
    screen = UNDER[name]()
    allowed = screen.state.allowed if hasattr(screen, "state") else frozenset()
    return screen, help_for(screen, SPECS, lambda op: op in allowed, replay=replay,
                            live=not replay)


async def shown_help(name: str, replay: bool = False) -> str:
    screen, help_screen = _help_of(name, replay)
    app = ScreenHost(lambda: screen, lambda: help_screen)
    async with app.run_test(size=(120, 40)) as pilot:
        from tests.screens.host import settle

        await settle(pilot)
        return str(help_screen.query_one(Static).render())


async def test_the_main_help_explains_every_state_word_column_and_threshold() -> None:
    text = await shown_help("main")
    for word in ("GRAPH 42s", "LOAD 42s", "START", "PROBE✗", "STALLED", "UP HOT", "XID 79",
                 "STALE", "UTIL", "gpu_memory_utilization", "GPU", "HEALTH", "esc"):
        assert word in text, word
    # thresholds as values: TTFT p95 above 2.0s (the fixture's), KV p99 above 60%, stall
    assert "TTFT p95" in text and "above 2.0s" in text
    assert "KV p99" in text and "above 60" in text
    assert "no token for 30 s" in text or "no token for 30s" in text, text
    for key in ("ttft_p95_s", "stall_after_s", "kv_p99 ", "acceptance_baseline"):
        assert key not in text, key  # config keys are not words
    # w's own keys, taught where the warnings that name w are read
    assert "w opens the watchdog's menu" in text and "stop now" in text and "+1 h" in text


async def test_each_screen_has_its_own_help() -> None:
    main = await shown_help("main")
    gpus = await shown_help("gpus")
    for word in ("ECC sbe/dbe", "remap", "throttled", "HOT", "XID 79", "NVLink"):
        assert word in gpus, word
    assert "Keys of the GPU screen" in gpus
    assert "PROBE✗" not in gpus and "b " not in gpus.split("GPU columns")[0]
    assert "sbe/dbe" not in main
    detail = await shown_help("detail")
    assert "Keys of the slot detail screen" in detail and "reload logs" in detail
    assert "probe" in detail and "Home" in detail and "above 2.0s" in detail
    for name in ("gateway", "fleet", "alert-history", "log"):
        text = await shown_help(name)
        assert "back" in text and "esc" in text, (name, text)
        assert text != main


async def test_the_replay_keys_are_in_the_help_while_a_recording_is_shown() -> None:
    text = await shown_help("gpus", replay=True)
    assert "play/pause" in text and "one sample back" in text
    assert "play/pause" not in await shown_help("gpus")


@pytest.fixture
def _pinned(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TEXTUAL_COLOR_SYSTEM", "truecolor")
    monkeypatch.setenv("COLORTERM", "truecolor")
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("name", list(UNDER))
def test_help_snapshot(snap_compare, _pinned: Any, name: str) -> None:
    screen, help_screen = _help_of(name)
    assert snap_compare(ScreenHost(lambda: screen, lambda: help_screen),
                        terminal_size=(120, 40), run_before=run_before())
