"""The benchmark's result fits a 160-column terminal (issue 30, #12): the dialog takes the
width its table needs, no row wraps, the headline is whole, the table near the top."""

from __future__ import annotations

from console.ui.screens.main import MainScreen
from tests.screens import states
from tests.screens.host import ScreenHost, run_before
from tests.screens.test_snapshots import _bench


def _rows(app: ScreenHost) -> list[str]:
    return ["".join(seg.text for seg in strip if not seg.control)
            for strip in app.screen._compositor.render_strips()]


async def test_the_bench_result_fits_160_columns() -> None:
    from console.operations.benchmark.record import lines

    make, drive = _bench()
    app = ScreenHost(lambda: MainScreen(states.state()), make)
    async with app.run_test(size=(160, 48)) as pilot:
        await run_before(drive)(pilot)
        dialog = app.top
        assert dialog.done and dialog.outcome is not None
        rows = _rows(app)
        screen = "\n".join(rows)
        # every line of the record that can fit (the dialog's frame and padding take 8
        # columns) on one row of its own: the table's header and rows do not wrap
        for line in lines(states.bench_record()):
            text = line.rstrip()
            if text.strip() and len(text) <= 160 - 8:
                assert text.strip() in screen, (text, screen)
        # the headline whole
        headline = dialog.outcome[1]
        assert "✓ " + headline in screen, screen
        # the table's header near the top of the dialog, not 40 lines down
        top = next(y for y, r in enumerate(rows) if "Benchmark" in r)
        header = next(y for y, r in enumerate(rows) if "config" in r and "tok/s" in r)
        assert header - top <= 12, (top, header)
