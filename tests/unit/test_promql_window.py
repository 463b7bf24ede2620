"""PromQL windows read as written by hand (issue 30, #14): ``[5m]``, not ``[300000ms]``."""

from __future__ import annotations

from console.sources.collect.promql import _w, figure_queries


def test_windows_in_the_largest_whole_unit() -> None:
    assert _w(300) == "5m" and _w(90) == "90s" and _w(3600) == "1h" and _w(7200) == "2h"
    assert _w(1.5) == "1500ms" and _w(45) == "45s" and _w(600.0) == "10m"
    text = " ".join(figure_queries(300).values())
    assert "[5m]" in text and "ms]" not in text
