"""A plot is a function of its data and its size: the same in every process.

The plots were plotext figures once: given more y ticks than rows (or time labels that
collide), plotext kept the ones that won a hash-ordered contest, so two processes (two
string-hash seeds) labelled the same data differently: snapshots flaked and a wall could
re-label itself after a restart. The drawing now is the console's own; this holds it to
the same promise."""

from __future__ import annotations

import os
import subprocess
import sys

from console.ui.widgets.plot_widgets import X_LABEL_ROOM, fit_ticks, time_ticks
from tests.conftest import REPO

SCRIPT = r"""
import asyncio, math
from textual.app import App
from console.model.history import History
from console.ui.widgets.plot_widgets import SeriesPlot
from console.ui.widgets.position_bars import PositionBars

class A(App):
    def compose(self):
        yield SeriesPlot("TTFT p95", "ttft_p95_s", unit="s", every_s=0, id="s")
        yield PositionBars(id="b")

async def main():
    app = A()
    async with app.run_test(size=(38, 14)) as pilot:
        h = History(3600, 1)
        for i in range(120):
            h.add("A", "ttft_p95_s", 1000.0 + i * 5, 0.9 + 0.1 * math.sin(i / 9))
        app.query_one("#s").show(h, ["A"], 1600.0)
        app.query_one("#b").show({"A": (1.0, 0.93, 0.71)}, 1600.0)
        # laid out (a plot is drawn for its size): a condition, not a delay
        while not all(app.query_one(w).size.width for w in ("#s", "#b")):
            await pilot.pause()
        print(app.query_one("#s").text)
        print(app.query_one("#b").text)
asyncio.run(main())
"""


def test_the_same_plot_in_processes_with_different_hash_seeds() -> None:
    outs = set()
    for seed in ("1", "2", "3", "4"):
        env = dict(os.environ, PYTHONHASHSEED=seed, TZ="UTC", PYTHONPATH=str(REPO))
        r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                           env=env, timeout=120, cwd=REPO)
        assert r.returncode == 0, r.stderr
        assert "draft position" in r.stdout and "TTFT" in r.stdout
        outs.add(r.stdout)
    assert len(outs) == 1, "\n=====\n".join(outs)


def test_ticks_fit_the_rows_and_labels_the_width() -> None:
    assert fit_ticks([0, 25, 50, 75, 100], 3) == [0, 100]
    assert fit_ticks([0, 25, 50, 75, 100], 5) == [0, 50, 100]
    assert fit_ticks([0, 25, 50, 75, 100], 9) == [0, 25, 50, 75, 100]
    assert len(fit_ticks([0, 1, 2, 3, 4, 5, 6], 1)) <= 2
    for width in (20, 38, 53, 80, 200):
        xs = time_ticks(width)
        assert xs[-1] == 0.0 and len(xs) >= 2
        if len(xs) > 2:
            assert (width - 6) / (len(xs) - 1) >= X_LABEL_ROOM
