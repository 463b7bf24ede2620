"""What a series plot shows (issue 30, #8): its right edge is the last poll, its axis
spans the data, a percentage starts at 0, the KV plot's last point is the table's KV."""

from __future__ import annotations

from console.model import catalog
from console.model.history import History
from console.ui.widgets.plot_widgets import (
    DRAW_EVERY_S,
    GROWTH,
    MIN_AXIS_S,
    SPAN_S,
    YOUNG_STEPS,
    SeriesPlot,
    series_layout,
    thin,
)


def _history(start: float, end: float, step: float, value=lambda t: 0.05) -> History:
    h = History(3600, 1)
    t = start
    while t <= end:
        h.add("A", "kv_cache_usage", t, value(t))
        h.add("B", "kv_cache_usage", t, value(t) / 2)
        t += step
    return h


def test_the_newest_point_is_the_last_poll_and_the_axis_moves_in_steps() -> None:
    h = _history(1000, 2000, 5)
    lay = series_layout(h, ["A", "B"], "kv_cache_usage", 100, "%", now=2003, step_s=60)
    # the axis ends at the newest point rounded up to its step: 2040, the point at 2000
    assert lay is not None and lay.newest == 2000 and lay.end == 2040
    assert max(pts[-1][0] for _, pts in lay.series) == 2000 - lay.end
    # the plot draws the points polls bring (every DRAW_EVERY_S at most, not every
    # plot_refresh_s): the newest point drawn is never more than that behind the table
    plot = SeriesPlot("KV", "kv_cache_usage", scale=100, unit="%", every_s=60)
    plot._paint = lambda: None  # type: ignore[method-assign]
    behind, ends = [], set()
    for now in range(2001, 2300):
        h.add("A", "kv_cache_usage", float(now), 0.05)
        plot.show(h, ["A", "B"], float(now))
        assert plot.drawn is not None
        behind.append(now - plot.drawn.newest)
        ends.add(plot.drawn.end)
        assert plot.drawn.newest <= plot.drawn.end < plot.drawn.newest + 60
    assert max(behind) < DRAW_EVERY_S, behind  # was up to plot_refresh_s (60 s) behind
    assert ends == {2040, 2100, 2160, 2220, 2280, 2340}  # one step a minute, not per poll


def test_between_steps_a_poll_changes_the_points_at_the_right_edge_alone() -> None:
    h = _history(1000, 2000, 1)
    a = series_layout(h, ["A"], "kv_cache_usage", 100, "%", 2000, 60, columns=50)
    h.add("A", "kv_cache_usage", 2001.0, 0.3)
    b = series_layout(h, ["A"], "kv_cache_usage", 100, "%", 2001, 60, columns=50)
    assert a is not None and b is not None and a.end == b.end
    old, new = a.series[0][1], b.series[0][1]
    # every point drawn before is drawn again at the same place; the new one is added
    assert new[:len(old) - 2] == old[:len(old) - 2] and (2001 - b.end, 30.0) in new
    # thinned to two points a column of dots (900 points would cost ~50 ms a drawing)
    assert len(new) <= 2 * 2 * 50 + 2


def test_thin_keeps_each_columns_lowest_and_highest_in_order() -> None:
    pts = [(0.0, 1.0), (0.5, 5.0), (0.9, 3.0), (1.2, 2.0), (2.5, 7.0), (2.6, 0.0)]
    assert thin(pts, 0.0, 1.0) == [(0.0, 1.0), (0.5, 5.0), (1.2, 2.0), (2.5, 7.0),
                                   (2.6, 0.0)]
    assert thin(pts, 0.0, 0.0) == pts


def test_a_short_history_fills_the_axis_and_a_long_one_is_cut_at_15_minutes() -> None:
    lay = series_layout(_history(1000, 1120, 5), ["A"], "kv_cache_usage", 100, "%", 1120)
    # two minutes across most of the width, at most half as long again as the data; it
    # ends near now (issue 47: not a third of the axis in the future), the room left on
    # its left, before the data began
    assert lay is not None and 120 <= lay.span_s <= 120 * GROWTH
    assert lay.end - lay.span_s <= 1000
    for last in range(1010, 1900, 5):  # at every age of a young plot
        lay = series_layout(_history(1000, last, 5), ["A"], "kv_cache_usage", 100, "%", last)
        assert lay is not None, last
        assert last <= lay.end <= last + lay.span_s / YOUNG_STEPS, (last, lay.end)
        assert lay.end - lay.span_s <= 1000  # every point on it
    lay = series_layout(_history(1000, 1010, 5), ["A"], "kv_cache_usage", 100, "%", 1010)
    assert lay is not None and lay.span_s == MIN_AXIS_S
    lay = series_layout(_history(0, 3000, 5), ["A"], "kv_cache_usage", 100, "%", 3000)
    assert lay is not None and lay.span_s == SPAN_S
    assert min(t for _, pts in lay.series for t, _ in pts) >= -SPAN_S


def test_percentages_start_at_zero_and_the_kv_plot_agrees_with_the_table() -> None:
    # KV between 60 % and 70 %: a range of 60..70 would show a swing from empty to full
    h = _history(1000, 1300, 5, value=lambda t: 0.6 + 0.1 * ((t // 5) % 2))
    fig, plot = next((f, p) for f, p in catalog.plots() if f.key == "kv_cache_usage")
    lay = series_layout(h, ["A"], fig.key, plot.scale, plot.unit, 1300)
    assert lay is not None and lay.y_ticks[0] == 0 and lay.y_ticks[-1] >= 70
    last = lay.series[0][1][-1][1]
    # the table's KV cell for the same value says the same number
    table = catalog.cell_text(fig, lambda key: h.series("A", key).last())
    assert table == f"{last:.1f}%", (table, last)
    # not a percentage: a range that starts where the data does is kept
    t = History(3600, 1)
    for i in range(20):
        t.add("A", "ttft_p95_s", 1000 + i, 2.0 + 0.01 * i)
    lay = series_layout(t, ["A"], "ttft_p95_s", 1.0, "s", 1019)
    assert lay is not None and lay.y_ticks[0] > 1.0


def test_the_ttft_and_kv_plots_draw_their_thresholds_in_force() -> None:
    """Issue 47: a line at each threshold in force (TTFT p95's, KV p99's on the KV
    plot), the Y axis reaching it."""
    from console.config.settings import SlotThresholds
    from console.ui.widgets.plots import plot_limits

    th = {"A": SlotThresholds(ttft_p95_s=2.0, kv_p99=0.6),
          "B": SlotThresholds(ttft_p95_s=3.0, kv_p99=0.6)}
    assert plot_limits("ttft_p95_s", ["A", "B"], th) == (2.0, 3.0)
    assert plot_limits("kv_cache_usage", ["A", "B"], th) == (0.6,)
    assert plot_limits("acceptance_rate", ["A"], th) == ()  # no baseline set: none
    lay = series_layout(_history(1000, 1300, 5), ["A"], "kv_cache_usage", 100, "%", 1300,
                        limits=(0.6,))
    assert lay is not None and lay.limits == (60.0,) and lay.y_ticks[-1] >= 60
    plot = SeriesPlot("KV", "kv_cache_usage", scale=100, unit="%")
    plot.show(_history(1000, 1300, 5), ["A"], 1300.0, limits=(0.6,))
    fig = plot.figure(("blue",), limit="red")
    assert [(r.at, r.colour, r.label) for r in fig.across] == [(60.0, "red", "60")]
