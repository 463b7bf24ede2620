"""A console that starts beside a Prometheus shows its history at once (a wall's new
browser tab, a restarted console): real Prometheus scraping the demo's slots, the
console's own wall, the plots' history merged under what it polls live."""

from __future__ import annotations

import itertools
import os
import time

import pytest

from console.model.history import History
from console.ui.widgets.plot_widgets import SeriesPlot
from tests.support import prometheus_server
from tests.support.waits import wait_for


def test_backfill_merges_older_points_under_live_ones() -> None:
    h = History(600, 1)
    for t in (100.0, 102.0, 104.0):
        h.add("A", "kv", t, t / 1000)
    h.backfill("A", "kv", [(40.0, 0.5), (70.0, 0.6), (100.0, 9.9), (50.0, float("nan")),
                           (float("nan"), 1.0)])
    pts = list(h.series("A", "kv").points)
    assert pts == [(40.0, 0.5), (70.0, 0.6), (100.0, 0.1), (102.0, 0.102), (104.0, 0.104)]
    assert h.backfills == 1
    h.add("A", "kv", 106.0, 0.2)  # live polling goes on after it
    assert h.series("A", "kv").points[-1] == (106.0, 0.2)
    small = History(5, 1)  # bounded: the newest points win
    small.add("A", "kv", 100.0, 1.0)
    small.backfill("A", "kv", [(t, 0.0) for t in range(90, 100)])
    assert [t for t, _ in small.series("A", "kv").points] == [95, 96, 97, 98, 99, 100]


def test_a_young_plot_is_drawn_again_as_its_data_grows() -> None:
    from console.ui.widgets.plot_widgets import DRAW_EVERY_S, GROWTH, MIN_AXIS_S

    h = History(3600, 1)
    plot = SeriesPlot("KV", "kv")
    draws: list[float] = []
    spans: list[float] = []
    plot._paint = lambda: draws.append(now)  # type: ignore[method-assign]
    for now in range(1000, 1400, 2):
        h.add("A", "kv", float(now), 0.5)
        plot.show(h, ["A"], float(now))
        if plot.drawn is not None:
            spans.append(plot.drawn.span_s)
            # the axis holds the data and is at most half as long again
            data = plot.drawn.newest - 1000
            assert data <= plot.drawn.span_s <= max(MIN_AXIS_S, data * GROWTH)
    # new points are drawn as polls bring them, every DRAW_EVERY_S at most (not every
    # plot_refresh_s); the axis grows in a dozen steps, not at every poll
    assert all(b - a <= DRAW_EVERY_S + 2 for a, b in itertools.pairwise(draws))
    assert len(set(spans)) <= 6, sorted(set(spans))  # 90 s x 1.5^k past 400 s


@pytest.fixture
def prom_over_demo(demo, tmp_path):
    if not prometheus_server.available():
        if os.environ.get("CI"):  # a real part missing fails under CI, as everywhere
            raise AssertionError("prometheus (Debian package) is missing")
        pytest.skip("prometheus (Debian package) is not installed")
    srv = prometheus_server.PrometheusServer(
        tmp_path / "prom", [f"127.0.0.1:{p}" for p in demo.ports.values()],
        labels={"pod": demo.pod_id})
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


async def test_the_wall_starts_with_prometheus_history(demo, prom_over_demo, tmp_path,
                                                       monkeypatch) -> None:
    from console.commands.tui_cmd import full_context
    from console.demo.deployment import DEMO_KEY
    from console.ui.app import make_app

    # history the console never polled: two of its backfill steps (7.5 s) and more
    prom_over_demo.wait_scrapes(20)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {demo.profiles_dir}\nstate_dir: {tmp_path / 'state'}\n"
                   f"prometheus_url: {prom_over_demo.url}\nrefresh_s: 1\n"
                   f"pod:\n  runpod_id: {demo.pod_id}\n  host: 127.0.0.1\n")
    monkeypatch.setenv("RUNPOD_API_KEY", DEMO_KEY)
    monkeypatch.setenv("RUNPOD_API_BASE", demo.emulator.base_url)
    started = time.time()
    ctx = full_context(cfg, 1.0, True)
    assert ctx is not None
    app = make_app(ctx, wall=True)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.ready and ctx.history.backfills > 0, 30)
        series = ctx.history.series("FLASH", "kv_cache_usage")
        assert series.points[0][0] < started - 7, list(series.points)[:5]
        # and it polls Prometheus: a poll whose query outran its timeout on a loaded
        # machine reads the slots directly, rightly, so the wait is for one that did not
        def from_prometheus() -> bool:
            snap = app.snapshot
            return snap is not None and snap.slots[0].source == "prometheus"
        assert await wait_for(pilot, from_prometheus, 30), app.snapshot
        assert any("plots filled from Prometheus" in line for _, line, _ in app.log_lines)
