"""The stall detector on an injected clock: the real vLLM 0.32 exposition (captured from
the CPU server) with its running gauge and token counters set per reading, read through
the catalog's figures as the direct path reads them, judged by ``StallWatch``; and the
same figures as the Prometheus path asks for them."""

from __future__ import annotations

import re

import pytest

from console.config.settings import AlertTiming
from console.model import catalog, fmt
from console.model.snapshot import SlotSnapshot
from console.model.stall import StallWatch, counters
from console.sources.collect.exposition import parse
from console.sources.collect.figures import compute
from console.sources.collect.promql import figure_queries
from tests.conftest import FIXTURES

LOAD = FIXTURES / "vllm-0.32.0-cpu" / "ngram" / "metrics-specdecode-after-basic-load.txt"
T0 = 1_800_000_000.0
AFTER = 30.0


def _exposition(running: float, generated: float, prompted: float, kv: float) -> str:
    text = LOAD.read_text()
    for name, value in (("vllm:num_requests_running", running),
                        ("vllm:generation_tokens_total", generated),
                        ("vllm:prompt_tokens_total", prompted),
                        ("vllm:kv_cache_usage_perc", kv)):
        text, n = re.subn(rf"^({re.escape(name)}\{{[^}}]*\}}) \S+$", rf"\g<1> {value}",
                          text, flags=re.M)
        assert n == 1, name
    return text


def _slot(running: float, generated: float, prompted: float, health: str = "up",
          stale_since: float | None = None, kv: float = 0.25) -> SlotSnapshot:
    figs = compute(parse(_exposition(running, generated, prompted, kv)))["tiny-main"]
    return SlotSnapshot(slot="S", served_model_name="tiny-main", port=1, url="u",
                        health=health, figures=figs,  # type: ignore[arg-type]
                        stale_since=stale_since)


class Run:
    """A watch on a clock that moves only when told, polled every ``step`` seconds."""

    def __init__(self, step: float = 2.0) -> None:
        self.watch = StallWatch()
        self.t = T0
        self.step = step

    def poll(self, slot: SlotSnapshot, advance: bool = True) -> bool:
        if advance:
            self.t += self.step
        return "S" in self.watch.observe([slot], self.t, AFTER)

    def polls(self, seconds: float, slot: SlotSnapshot) -> list[bool]:
        return [self.poll(slot) for _ in range(round(seconds / self.step))]


def test_the_counters_are_catalog_figures_read_as_they_stand() -> None:
    s = _slot(3, 5000, 700)
    assert counters(s) == (3.0, 5000.0, 700.0, 0.25)
    # both paths ask for them: the PromQL sums the counter itself, not an increase
    q = figure_queries(60.0)
    # vLLM's or SGLang's (each model answers from its own engine's families)
    assert q["generation_total"].startswith(
        "(sum by (model_name) (vllm:generation_tokens_total)) or ")
    assert "sglang:generation_tokens_total" in q["generation_total"]
    assert q["prompt_total"].startswith("(sum by (model_name) (vllm:prompt_tokens_total)) or ")
    assert not catalog.BY_KEY["generation_total"].detail  # not a row of the detail screen


def test_frozen_counters_with_requests_running_stall_after_stall_after() -> None:
    r = Run()
    assert not r.poll(_slot(4, 5000, 700))  # first reading: the clock starts
    start = r.t
    frozen = _slot(4, 5000, 700)
    seen = r.polls(AFTER, frozen)
    # not before stall_after, and at the first poll at or past it
    assert seen[:-1] == [False] * (len(seen) - 1) and seen[-1] is True
    st = r.watch.stalls["S"]
    assert st.running == 4 and st.since == start and st.for_s == AFTER
    cond = st.condition()
    assert cond.key == "stall:S" and cond.severity == "crit"
    assert "4 request(s) stuck since" in cond.title and "STALLED" in cond.title
    assert "/health says 200" in cond.detail and "R restarts" in cond.detail


def test_a_prompt_counter_that_moves_is_progress_not_a_stall() -> None:
    r = Run()
    r.poll(_slot(2, 5000, 700))
    # a long prefill: no new token out for two minutes, prompts read all along
    assert not any(r.poll(_slot(2, 5000, 700 + 512 * i)) for i in range(1, 61))
    assert r.watch.stalls == {}


def test_one_long_prefill_moves_kv_usage_chunk_by_chunk_and_is_not_a_stall() -> None:
    """vLLM 0.32 counts a prompt's tokens when its prefill is done; until then its
    scheduler's stats move the KV usage with every chunk it prefills."""
    r = Run()
    r.poll(_slot(1, 5000, 700, kv=0.01))
    assert not any(r.poll(_slot(1, 5000, 700, kv=0.01 + 0.004 * i)) for i in range(1, 46))
    # the chunks stop too (the engine hangs mid-prefill): stalled after stall_after
    last = r.t
    seen = r.polls(AFTER, _slot(1, 5000, 700, kv=0.01 + 0.004 * 45))
    assert seen[-1] and r.watch.stalls["S"].since == last


def test_no_request_running_is_never_a_stall() -> None:
    r = Run()
    assert not any(r.polls(10 * AFTER, _slot(0, 5000, 700)))
    # busy from now on, counters still: the clock starts at the last idle reading
    idle_until = r.t
    seen = r.polls(AFTER, _slot(1, 5000, 700))
    assert seen[-1] and r.watch.stalls["S"].since == idle_until


def test_a_counter_reset_is_progress_and_the_clock_starts_again() -> None:
    r = Run()
    r.poll(_slot(3, 5000, 700))
    r.polls(AFTER - r.step, _slot(3, 5000, 700))
    assert r.watch.stalls == {}
    # the engine restarted between two polls: its counters start from (near) zero
    assert not r.poll(_slot(3, 12, 40))
    restarted = r.t
    assert not any(r.polls(AFTER - r.step, _slot(3, 12, 40)))
    assert r.poll(_slot(3, 12, 40))
    assert r.watch.stalls["S"].since == restarted


def test_it_clears_when_progress_resumes() -> None:
    r = Run()
    r.poll(_slot(4, 5000, 700))
    assert r.polls(AFTER, _slot(4, 5000, 700))[-1]
    assert r.watch.conditions() and r.watch.stalls
    assert not r.poll(_slot(4, 5003, 700))  # three tokens: it decodes again
    assert r.watch.stalls == {} and r.watch.conditions() == []


def test_a_slot_not_up_or_stale_is_not_judged() -> None:
    r = Run()
    r.poll(_slot(4, 5000, 700))
    r.polls(AFTER - r.step, _slot(4, 5000, 700))
    # a failed scrape repeats the last good figures: not a reading of the engine
    assert not any(r.polls(AFTER, _slot(4, 5000, 700, stale_since=T0)))
    # fresh again and still frozen: stalled, counted from when they last moved
    assert r.poll(_slot(4, 5000, 700)) and r.watch.stalls["S"].since == T0 + r.step
    # a slot that goes down (the restart) begins a new record once it is back
    assert not r.poll(_slot(4, 5000, 700, health="down"))
    assert not r.poll(_slot(4, 5000, 700))
    assert not any(r.polls(AFTER - r.step, _slot(4, 5000, 700)))


def test_stall_after_is_a_validated_setting() -> None:
    assert AlertTiming().stall_after_s == 30.0
    assert AlertTiming(stall_after_s=5).stall_after_s == 5.0
    for bad in (0, -1, 0.5, 7200, float("nan")):
        with pytest.raises(ValueError):
            AlertTiming(stall_after_s=bad)


def test_the_stall_is_counted_on_the_monotonic_clock_and_said_at_the_boundary() -> None:
    """Issue 42: durations run on the monotonic clock. The wall clock here steps +60 s
    at every poll (a VM resumed, again and again) while 2 monotonic seconds pass: no
    stall until the monotonic clock says ``stall_after``, and then at that very poll
    (``>=``: exactly ``stall_after`` is stalled)."""
    watch = StallWatch()
    frozen = _slot(4, 5000, 700)
    wall, mono = T0, 100.0
    assert watch.observe([frozen], wall, AFTER, mono) == {}
    started_wall = wall
    for _ in range(round(AFTER / 2) - 1):
        wall, mono = wall + 60.0, mono + 2.0
        assert watch.observe([frozen], wall, AFTER, mono) == {}, mono - 100.0
    wall, mono = wall + 60.0, mono + 2.0
    assert mono - 100.0 == AFTER
    st = watch.observe([frozen], wall, AFTER, mono)["S"]
    assert st.for_s == AFTER and st.since == started_wall  # shown: the wall clock's time
    assert f"for {fmt.duration(AFTER)} while" in st.condition().detail
    # and a wall clock stepped back an hour hides nothing: still stalled next poll
    wall, mono = wall - 3600.0, mono + 2.0
    assert set(watch.observe([frozen], wall, AFTER, mono)) == {"S"}


def test_a_poll_a_little_early_says_a_stall_that_is_due_not_one_refresh_later() -> None:
    """The timer's beat and the poll's own time move each poll's instant by a fraction
    of a refresh: a stall due at a poll is said at it (the session's slack is half a
    refresh), never a refresh late."""
    watch = StallWatch()
    frozen = _slot(2, 5000, 700)
    watch.observe([frozen], T0, AFTER, 0.0)
    assert watch.observe([frozen], T0 + 28.4, AFTER, 28.4, slack=1.0) == {}
    assert set(watch.observe([frozen], T0 + 29.7, AFTER, 29.7, slack=1.0)) == {"S"}


def _dp_slot(cores: dict[str, tuple[float, float, float]], source: str = "direct"
             ) -> SlotSnapshot:
    from tests.support.dp_exposition import Core, exposition

    text = exposition({k: Core(*v) for k, v in cores.items()})
    figs = compute(parse(text))["tiny-main"]
    return SlotSnapshot(slot="S", served_model_name="tiny-main", port=1, url="u",
                        health="up", figures=figs, source=source)  # type: ignore[arg-type]


def test_one_hung_engine_of_a_data_parallel_slot_is_a_stall_of_the_slot() -> None:
    """Issue 44: one ``engine`` label's counters frozen with requests running while the
    other engine decodes: the slot's sums move, the hung engine does not."""
    s = _dp_slot({"0": (3, 5000, 700), "1": (2, 4000, 600)})
    assert s.figures is not None and set(s.figures.ranks) == {"0", "1"}
    assert s.figures.value("running") == 5.0  # the sums, as the screens show them
    assert s.figures.ranks["1"]["generation_total"] == 4000.0
    watch = StallWatch()
    mono = 0.0
    watch.observe([s], T0 + mono, AFTER, mono)
    for i in range(1, round(AFTER / 2) + 1):
        mono += 2.0
        moving = _dp_slot({"0": (3, 5000 + 40 * i, 700 + 10 * i), "1": (2, 4000, 600)})
        got = watch.observe([moving], T0 + mono, AFTER, mono)
    assert set(got) == {"S"}
    st = got["S"]
    assert st.engine == "1" and st.running == 2 and st.for_s == AFTER
    assert "engine 1" in st.condition().title
    # both engines decoding: never stalled
    watch = StallWatch()
    for i in range(3 * round(AFTER / 2)):
        both = _dp_slot({"0": (3, 5000 + 40 * i, 700), "1": (2, 4000 + 30 * i, 600)})
        assert watch.observe([both], T0 + 2 * i, AFTER, 2.0 * i) == {}
    # the idle engine of a busy slot (nothing running on it) is not stalled either
    watch = StallWatch()
    for i in range(3 * round(AFTER / 2)):
        half = _dp_slot({"0": (3, 5000 + 40 * i, 700), "1": (0, 4000, 600)})
        assert watch.observe([half], T0 + 2 * i, AFTER, 2.0 * i) == {}


def test_the_prometheus_path_asks_each_engine_and_reads_the_answers() -> None:
    from console.sources.collect.promql import figures_from_answers

    q = figure_queries(60.0)
    assert q["ranks:vllm:generation_total"] == (
        "sum by (model_name, engine) (vllm:generation_tokens_total)")
    assert q["ranks:vllm:running"] == "sum by (model_name, engine) (vllm:num_requests_running)"
    answers: dict[str, list] = {name: [] for name in q}

    def put(name: str, engine: str | None, value: float) -> None:
        metric = {"model_name": "tiny-main"} | ({"engine": engine} if engine else {})
        answers[name].append({"metric": metric, "value": [T0, str(value)]})

    for key, per in (("running", (3, 2)), ("generation_total", (5000, 4000)),
                     ("prompt_total", (700, 600)), ("kv_cache_usage", (0.2, 0.3))):
        put(key, None, float(sum(per)))
        for eng, v in zip(("0", "1"), per, strict=True):
            put(f"ranks:vllm:{key}", eng, float(v))
    figs, _ = figures_from_answers(answers, 60.0)
    f = figs[("tiny-main",)]
    assert f.value("running") == 5.0
    assert f.ranks == {"0": {"running": 3.0, "generation_total": 5000.0, "prompt_total": 700.0,
                             "kv_cache_usage": 0.2},
                       "1": {"running": 2.0, "generation_total": 4000.0, "prompt_total": 600.0,
                             "kv_cache_usage": 0.3}}
    # a recording made before these queries were asked: no ranks, the sums still judge
    old = {k: v for k, v in answers.items() if not k.startswith("ranks:")}
    figs, _ = figures_from_answers(old, 60.0)
    assert figs[("tiny-main",)].ranks == {} and figs[("tiny-main",)].value("running") == 5.0
