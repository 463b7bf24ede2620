"""PromQL windows read as written by hand (issue 30, #14): ``[5m]``, not ``[300000ms]``."""

from __future__ import annotations

from pathlib import Path

from console.sources.collect.promql import _w, figure_queries


def test_windows_in_the_largest_whole_unit() -> None:
    assert _w(300) == "5m" and _w(90) == "90s" and _w(3600) == "1h" and _w(7200) == "2h"
    assert _w(1.5) == "1500ms" and _w(45) == "45s" and _w(600.0) == "10m"
    text = " ".join(figure_queries(300).values())
    assert "[5m]" in text and "ms]" not in text


def test_plain_words_not_jargon() -> None:
    """Issue 30, #14: what the screens say in place of ``source direct · 58s``,
    ``no DCGM_FI_DEV_* series`` and "needs a second (util, tokens) point"."""
    from console.operations import capacity
    from console.sources.collect import gpu_metrics
    from console.ui.screens.detail import source_words

    assert source_words("direct", 58) == "the slot's own /metrics, over the last 58 s"
    assert source_words("prometheus", 300).startswith("Prometheus, over the last 5m")
    assert "DCGM_FI" not in gpu_metrics.NO_GPU_READINGS
    src = Path(capacity.__file__).read_text()
    assert "needs a second (util, tokens) point" not in src


def test_kv_p99_beside_kv_now_in_the_detail() -> None:
    """Issue 30, #14: the slot's detail shows KV p99 right after KV now, not at the end."""
    from console.ui.screens.detail import figures_table
    from tests.screens import states

    slot = states.slots()[0]
    table = figures_table(slot, states.NOW, 2)
    # row-major: the labels as they read, left to right then down
    rows = list(zip(*[list(map(str, col._cells)) for col in table.columns[::2]], strict=True))
    flat = [label for row in rows for label in row]
    assert flat.index("KV p99") == flat.index("KV now") + 1, flat
