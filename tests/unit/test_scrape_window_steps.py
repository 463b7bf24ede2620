"""Issue 42: a slot's scrape window counts its seconds on the monotonic clock.

Rates (tokens/s, TTFT p95 over the window) are increases between two scrapes divided by
the seconds between them. The scrapes are stamped with the wall clock (the plots and
the recording show those times); were the window's seconds the wall clock's, a step
back of an hour would leave no earlier scrape behind the new ones for an hour (every
rate undefined) and a step forward would read as a window of minutes. The real vLLM
0.32 capture, its generation counter moved 100 tokens every 2 s."""

from __future__ import annotations

import pytest

from console.sources.collect.exposition import parse
from console.sources.collect.slot import ScrapeWindow
from tests.support.dp_exposition import MODEL, Core, exposition

T0 = 1_796_000_400.0


def _scrape(tokens: float):  # type: ignore[no-untyped-def]
    return parse(exposition({"0": Core(2, tokens, 500)}))


@pytest.mark.parametrize("step", [-3600.0, 60.0, 8 * 86400.0])
def test_a_wall_step_leaves_the_rates_as_they_were(step: float) -> None:
    win = ScrapeWindow(60.0)
    wall, mono, tokens = T0, 100.0, 1000.0
    for _ in range(10):
        wall, mono, tokens = wall + 2.0, mono + 2.0, tokens + 100.0
        exp = _scrape(tokens)
        win.add(wall, exp, MODEL, mono)
    figs = win.figures(wall, exp, MODEL)
    assert figs is not None and figs.value("generation_tps") == pytest.approx(50.0)
    wall += step  # NTP, a VM resumed, a wall display learning the date
    for _ in range(3):
        wall, mono, tokens = wall + 2.0, mono + 2.0, tokens + 100.0
        exp = _scrape(tokens)
        win.add(wall, exp, MODEL, mono)
        figs = win.figures(wall, exp, MODEL)
        assert figs is not None and figs.window_s is not None
        assert figs.value("generation_tps") == pytest.approx(50.0), step
