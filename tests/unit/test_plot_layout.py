"""What a series plot shows (issue 30, #8): its right edge is the last poll, its axis
spans the data, a percentage starts at 0, the KV plot's last point is the table's KV."""

from __future__ import annotations

from console.model import catalog
from console.model.history import History
from console.ui.widgets.plot_widgets import (
    MIN_AXIS_S,
    SPAN_S,
    SeriesPlot,
    series_layout,
)


def _history(start: float, end: float, step: float, value=lambda t: 0.05) -> History:
    h = History(3600, 1)
    t = start
    while t <= end:
        h.add("A", "kv_cache_usage", t, value(t))
        h.add("B", "kv_cache_usage", t, value(t) / 2)
        t += step
    return h


def test_the_right_edge_is_the_last_poll_not_a_drawing_minutes_old() -> None:
    h = _history(1000, 2000, 5)
    lay = series_layout(h, ["A", "B"], "kv_cache_usage", 100, "%", now=2003)
    assert lay is not None and lay.end == 2000
    assert all(pts[-1][0] == 0.0 for _, pts in lay.series)
    # the plot draws new points as polls bring them (at its cadence), ending at each
    plot = SeriesPlot("KV", "kv_cache_usage", scale=100, unit="%", every_s=30)
    plot.paint = lambda draw: None  # type: ignore[method-assign]
    ends = []
    for now in range(2005, 2300, 5):
        h.add("A", "kv_cache_usage", float(now), 0.05)
        plot.show(h, ["A", "B"], float(now))
        assert plot.layout is not None
        ends.append(now - plot.layout.end)
    assert max(ends) < 30 + 5, ends  # never more than its cadence behind the last poll


def test_a_short_history_fills_the_axis_and_a_long_one_is_cut_at_15_minutes() -> None:
    lay = series_layout(_history(1000, 1120, 5), ["A"], "kv_cache_usage", 100, "%", 1120)
    assert lay is not None and lay.span_s == 120  # two minutes across the whole width
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
