"""No floods (issue 30, #11): a countdown is one line updated in place in its dialog, the
GPU types tried stay in view, and the header says the refresh rate."""

from __future__ import annotations

from console.ui.screens.main import MainScreen
from console.ui.screens.modals import ProgressScreen
from console.ui.widgets.header import PodHeader
from tests.screens import states
from tests.screens.host import ScreenHost, settle


async def test_a_countdown_updates_one_line_of_its_dialog() -> None:
    holder: dict[str, ProgressScreen] = {}

    def make() -> ProgressScreen:
        holder["p"] = ProgressScreen("Fallback to a new pod", clock=states.clock)
        return holder["p"]

    app = ScreenHost(lambda: MainScreen(states.state()), make)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        p = holder["p"]
        p.step("create", 0.1, "H100 SXM: sold out")
        p.step("create", 0.2, "A100 80GB: sold out")
        for left in range(60, 0, -1):
            p.step("wait", 1 - left / 60, f"everything sold out; round 2/3 in {left} s")
        await settle(pilot)
        shown = [line.plain for line in p.lines]
        assert shown == ["create: H100 SXM: sold out", "create: A100 80GB: sold out",
                         "wait: everything sold out; round 2/3 in 1 s"], shown
        log = p.query_one("#plog")
        text = "\n".join(strip.text for strip in log.lines)
        assert "H100 SXM" in text and "A100 80GB" in text and "in 1 s" in text
        assert "in 2 s" not in text, text


async def test_a_benchmarks_dialog_keeps_one_step_line_and_its_result() -> None:
    """Issue 30 #11: the benchmark's ~30 steps were 30 lines of its dialog; its result
    scrolled away under them."""
    holder: dict[str, ProgressScreen] = {}

    def make() -> ProgressScreen:
        holder["p"] = ProgressScreen("Benchmark", clock=states.clock, compact=True)
        return holder["p"]

    app = ScreenHost(lambda: MainScreen(states.state()), make)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        p = holder["p"]
        for i in range(30):
            p.step(f"config {i % 6}", i / 30, f"request {i} of 30 · 410 tok/s")
        for row in ("config  TTFT p50  tok/s", "c1-short  95ms  412.0"):
            p.step("", None, row)
        p.finish(True, "c1-short 412.0 tok/s; kept bench.json")
        await settle(pilot)
        shown = [line.plain for line in p.lines]
        assert shown == ["config 5: request 29 of 30 · 410 tok/s", "config  TTFT p50  tok/s",
                         "c1-short  95ms  412.0", "c1-short 412.0 tok/s; kept bench.json"], \
            shown


async def test_the_header_says_the_refresh_rate() -> None:
    app = ScreenHost(lambda: MainScreen(states.state()))
    # the refresh rate ranks last (issue 47): said where every other field fits
    async with app.run_test(size=(240, 48)) as pilot:
        await settle(pilot)
        assert "refresh 5s" in str(app.top.query_one(PodHeader).render())
