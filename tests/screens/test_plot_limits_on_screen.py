"""The main screen's plots as drawn (issue 47, plots): the TTFT p95 and KV plots carry a
line at the threshold in force, on the Y axis's row of that value, and every plot's time
axis ends at now (it ran up to 3 minutes into the future, now two-thirds across)."""

from __future__ import annotations

import datetime as dt
import math
import re
import time

import pytest
from msgspec.structs import replace

from console.model.history import History
from console.ui.screens.main import MainScreen
from console.ui.widgets.plot_widgets import YOUNG_STEPS, SeriesPlot
from tests.screens import states
from tests.screens.host import ScreenHost, settle

LIMIT_ROW = re.compile(r"^\s*(?P<label>[\d.]+) ┤.*([⠁⠂⠄⡀])\2{11,}.*│\s*$")
"""A plot row with a long dotted line across the frame (one braille dot a cell, the same
in each), labelled with its value."""


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


async def _plots(st) -> dict[str, list[str]]:
    app = ScreenHost(lambda: MainScreen(st, ()))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        out: dict[str, list[str]] = {}
        for _ in range(100):  # the plots are mounted after the first frame
            out = {p.metric: p.text.splitlines() for p in app.top.query(SeriesPlot)
                   if p.text}
            if {"ttft_p95_s", "kv_cache_usage"} <= set(out):
                return out
            await pilot.pause()
    raise AssertionError(f"plots never drawn: {sorted(out)}")


TICK = re.compile(r"\d\d:\d\d(?::\d\d)?")


def _ticks(lines: list[str]) -> list[str]:
    """The X axis's time labels (its last line that has any)."""
    return next(found for line in reversed(lines) if (found := TICK.findall(line)))


def _at(label: str) -> float:
    """A label's time, on the day of ``states.NOW`` (UTC)."""
    day = dt.datetime.fromtimestamp(states.NOW, dt.UTC).date()
    parts = [int(x) for x in label.split(":")] + [0]
    return dt.datetime(day.year, day.month, day.day, parts[0], parts[1], parts[2],
                       tzinfo=dt.UTC).timestamp()


@pytest.mark.parametrize(("ttft", "want"), [(2.0, "2.0"), (1.5, "1.5")])
async def test_the_ttft_and_kv_plots_draw_their_limits_and_end_at_now(ttft: float,
                                                                      want: str) -> None:
    from console.config.settings import SlotThresholds

    th = {t.slot: SlotThresholds(ttft_p95_s=ttft, kv_p99=0.6) for t in states.view().targets}
    # 460 s of data: the young axis grows to 683 s (90 s × 1.5ⁿ), which once ended
    # 223 s after now
    h = History(3600, 1)
    for i in range(93):
        t = states.NOW - 460 + i * 5
        for k, name in enumerate(th):
            h.add(name, "ttft_p95_s", t, 0.9 + 0.1 * math.sin(i / 9 + k))
            h.add(name, "kv_cache_usage", t, 0.02 + 0.015 * math.sin(i / 13 + k))
    st = replace(states.state(), thresholds=th, history=h)
    plots = await _plots(st)
    for metric, label in (("ttft_p95_s", want), ("kv_cache_usage", "60")):
        rows = [m["label"] for line in plots[metric] if (m := LIMIT_ROW.match(line))]
        assert rows == [label], (metric, "\n".join(plots[metric]))
        # the axis ends at now: its last label within a young step of it
        ticks = _ticks(plots[metric])
        span = _at(ticks[-1]) - _at(ticks[0])
        assert span > 0 and abs(_at(ticks[-1]) - states.NOW) <= span / YOUNG_STEPS, (metric, ticks)
