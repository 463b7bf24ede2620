"""Issue 30 #13: the demo teaches what a healthy pod looks like. Its simulated vLLM
(``console/demo/fake_vllm.py``) read through the console's own parsing and window
figures (as a poll reads it) stays below the console's TTFT threshold, and a request a
benchmark sends takes as long to its first token as the same prompt in the simulated
traffic the table shows: one prefill model for both (``Engine.first_token_s``). Before,
a healthy demo's TTFT p95 read 2.0-2.4 s against the 2 s threshold (two flapping
warnings) while a benchmark measured 103 ms."""

from __future__ import annotations

from msgspec.structs import asdict

from console.config.settings import SlotThresholds
from console.demo.fake_vllm import Engine, Hist
from console.operations.benchmark.prompts import prompt_for
from console.sources.collect.exposition import parse
from console.sources.collect.slot import FAMILIES, ScrapeWindow

DEMO_RATE = 0.6  # DemoDeployment's default request rate
DEMO_WINDOW_S = 60.0  # DemoDeployment.settings(): window_s
SPEC_TOKENS = 3


def _traffic(seed: int, seconds: int, observe: list[float] | None = None
             ) -> tuple[Engine, list[float]]:
    """An engine ticked once a second for ``seconds``; the TTFT p95 the console reads
    every other second (after the first two minutes)."""
    e = Engine("m", 200_000, SPEC_TOKENS, seed, DEMO_RATE)
    if observe is not None:
        seen = observe

        class Seen(Hist):
            def observe(self, v: float) -> None:
                seen.append(v)
                super().observe(v)

        e.h["ttft"] = Seen(**asdict(e.h["ttft"]))
    win = ScrapeWindow(DEMO_WINDOW_S)
    p95s: list[float] = []
    t = 1_000_000.0
    for step in range(seconds):
        t += 1.0
        e.tick(t, 1.0)
        if step >= 120 and step % 2 == 0:
            exp = parse(e.exposition(0.76), FAMILIES, "m")
            win.add(t, exp, "m")
            figs = win.figures(t, exp, "m")
            v = figs.value("ttft_p95_s") if figs is not None else None
            if v is not None:
                p95s.append(v)
    return e, p95s


def test_a_healthy_demo_stays_below_its_ttft_threshold() -> None:
    limit = SlotThresholds().ttft_p95_s  # the demo's thresholds keep the default
    for seed in range(7, 12):  # the demo's seeds: one per slot from --seed (7), and more
        _, p95s = _traffic(seed, 1800)
        assert len(p95s) > 500
        worst = max(p95s)
        # below, with room: a warning fires at the limit, held for_s; no flapping
        assert worst < 0.8 * limit, f"seed {seed}: TTFT p95 reached {worst:.2f} s"


def test_a_benchmark_measures_the_ttft_the_table_shows() -> None:
    seen: list[float] = []
    engine, p95s = _traffic(7, 600, seen)
    seen.sort()
    short = engine.answer(prompt_for("short", 3000), 1024).ttft
    long = engine.answer(prompt_for("long", 3000), 1024).ttft
    # a short question: as quick as the traffic's quickest (its short questions)
    assert seen[0] * 0.8 <= short <= seen[0] * 1.5, (short, seen[:3])
    # a 3,000-token document: as slow as the traffic's long documents, no slower than
    # the p95 the table shows, and not an order of magnitude faster
    assert seen[len(seen) // 10] < long <= max(p95s[-30:]), (long, p95s[-30:])
    assert long >= 0.5 * max(p95s[-30:])
