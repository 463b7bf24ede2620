"""Parsing real vLLM 0.32.0 captures, malformed input, and the metrics --json contract."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.sources.collect.exposition import parse
from console.sources.collect.figures import compute
from tests.conftest import FIXTURES

CAP = FIXTURES / "vllm-0.32.0-cpu"
NGRAM_IDLE = CAP / "ngram" / "metrics-specdecode-idle.txt"
NGRAM_LOAD = CAP / "ngram" / "metrics-specdecode-after-basic-load.txt"
PLAIN_IDLE = CAP / "plain" / "metrics-idle.txt"
PLAIN_LOAD = CAP / "plain" / "metrics-after-load.txt"

CONTRACT_KEYS = {"kv_cache_usage", "running", "waiting", "preemptions", "prompt_tokens",
                 "generation_tokens", "ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "itl_p95_s",
                 "e2e_p95_s", "queue_p95_s", "prefix_cache_hit_rate", "spec_decode"}
SPEC_KEYS = {"drafts", "draft_tokens", "accepted_tokens", "acceptance_rate",
             "mean_acceptance_length", "per_position"}


def run_metrics(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console.cli", "metrics", *args, "--json"],
                          capture_output=True, text=True, timeout=60)


def test_real_capture_parses_cleanly() -> None:
    exp = parse(NGRAM_LOAD.read_text())
    assert exp.error_count == 0
    assert exp.types["vllm:time_to_first_token_seconds"] == "histogram"
    assert exp.types["vllm:num_preemptions_total"] == "counter"


def test_lifetime_figures_from_one_capture() -> None:
    r = run_metrics(str(NGRAM_LOAD))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    fig = out["tiny-main"]
    assert set(fig) == CONTRACT_KEYS
    assert set(fig["spec_decode"]) == SPEC_KEYS
    s = fig["spec_decode"]
    assert (s["drafts"], s["draft_tokens"], s["accepted_tokens"]) == (351.0, 1027.0, 1027.0)
    assert s["acceptance_rate"] == 1.0
    assert s["mean_acceptance_length"] == pytest.approx(1 + 1027 / 351)
    assert s["per_position"] == pytest.approx([351 / 351, 351 / 351, 325 / 351])
    assert fig["prompt_tokens"] == 611.0 and fig["generation_tokens"] == 3060.0
    # TTFT buckets of this capture: hand-computed p50 falls in (0.01, 0.02]
    assert 0.01 < fig["ttft_p50_s"] <= 0.02


def test_window_between_two_captures_and_null_when_undefined() -> None:
    r = run_metrics(str(NGRAM_IDLE), str(NGRAM_LOAD))
    assert r.returncode == 0, r.stderr
    fig = json.loads(r.stdout)["tiny-main"]
    idle = compute(parse(NGRAM_IDLE.read_text()))["tiny-main"]
    load = compute(parse(NGRAM_LOAD.read_text()))["tiny-main"]
    assert fig["generation_tokens"] == load.generation_tokens - idle.generation_tokens


def test_plain_server_has_null_spec_decode() -> None:
    out = json.loads(run_metrics(str(PLAIN_LOAD)).stdout)
    (fig,) = out.values()
    assert fig["spec_decode"] is None


def test_idle_capture_has_null_quantiles_not_zero() -> None:
    out = json.loads(run_metrics(str(PLAIN_IDLE)).stdout)
    (fig,) = out.values()
    assert fig["ttft_p95_s"] is None and fig["e2e_p95_s"] is None
    assert fig["prefix_cache_hit_rate"] is None


def test_unreadable_input_is_one_line_exit_1(tmp_path: Path) -> None:
    junk = tmp_path / "junk.txt"
    junk.write_bytes(b"\xff\xfe\x00garbage")
    r = run_metrics(str(junk))
    assert r.returncode == 1 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1
    r = run_metrics("http://127.0.0.1:9/metrics")
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    r = run_metrics(str(empty))
    assert r.returncode == 1 and "no vLLM metrics" in r.stderr


def test_counter_reset_between_two_captures(tmp_path: Path) -> None:
    """A restart between scrapes: the later (smaller) counters are the increase."""
    later = NGRAM_IDLE.read_text()
    # Same process would have equal _created stamps; a restart changes them.
    earlier = NGRAM_LOAD.read_text().replace("e+09", "e+08")
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(earlier)
    b.write_text(later)
    fig = json.loads(run_metrics(str(a), str(b)).stdout)["tiny-main"]
    idle = compute(parse(later))["tiny-main"]
    assert fig["generation_tokens"] == idle.generation_tokens
    assert fig["spec_decode"]["drafts"] == idle.spec_decode.drafts


MALFORMED = {
    "truncated": NGRAM_LOAD.read_text()[:20_011],
    "nan": 'vllm:kv_cache_usage_perc{engine="0",model_name="m"} NaN\n',
    "inf_gauge": 'vllm:num_requests_running{engine="0",model_name="m"} +Inf\n',
    "missing_inf_bucket": "".join(
        f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="{le}",model_name="m"}} {c}\n'
        for le, c in (("0.1", 1), ("1.0", 5))),
    "duplicate": 'vllm:num_requests_running{model_name="m"} 1\n'
                 'vllm:num_requests_running{model_name="m"} 2\n',
    "unknown_type": "# TYPE vllm:foo bizarre\nvllm:foo{model_name=\"m\"} 1\n",
    "bad_labels": 'vllm:num_requests_running{model_name="m} 1\nvllm:x{=1} 2\n',
    "escapes": 'vllm:num_requests_running{model_name="a\\"b\\\\c\\nd"} 3\n',
    "garbage_value": 'vllm:num_requests_running{model_name="m"} twelve\n',
    "binary": "\x00\x01\x02{}}}{{=\"\n",
    "only_braces": "{}\n}\n{\n",
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_expositions_never_raise(name: str) -> None:
    exp = parse(MALFORMED[name])
    figs = compute(exp)
    for f in figs.values():
        d = f.contract_dict()
        assert set(d) == CONTRACT_KEYS
        json.dumps(d, allow_nan=False)  # no NaN/Inf escapes into JSON


def test_specific_malformed_semantics() -> None:
    assert compute(parse(MALFORMED["nan"]))["m"].kv_cache_usage is None
    assert compute(parse(MALFORMED["missing_inf_bucket"]))["m"].ttft_p95_s is None
    dup = parse(MALFORMED["duplicate"])
    assert dup.error_count == 1 and compute(dup)["m"].running == 1
    assert parse(MALFORMED["bad_labels"]).error_count == 2
    esc = parse(MALFORMED["escapes"])
    # the escapes are read (a quote, a backslash); the line break they spell is a
    # control character, and label values are outside text: one space (issue 44)
    assert compute(esc)['a"b\\c d'].running == 3


def test_older_vllm_names_are_read() -> None:
    text = (PLAIN_LOAD.read_text()
            .replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
            .replace("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"))
    new = compute(parse(PLAIN_LOAD.read_text()))
    old = compute(parse(text))
    (m,) = new
    assert old[m].kv_cache_usage == new[m].kv_cache_usage
    assert old[m].itl_p95_s == new[m].itl_p95_s and new[m].itl_p95_s is not None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_fuzz_parse_and_compute_never_raise(text: str) -> None:
    compute(parse(text))


@settings(max_examples=100, deadline=None)
@given(st.integers(0, len(NGRAM_LOAD.read_text())), st.integers(0, 200))
def test_fuzz_mutated_real_capture(cut: int, junk: int) -> None:
    text = NGRAM_LOAD.read_text()
    mutated = text[:cut] + "\x00{=\"" * (junk % 3) + text[cut + junk:]
    for f in compute(parse(mutated)).values():
        json.dumps(f.contract_dict(), allow_nan=False)


def _same(a, b) -> None:
    assert a.values == b.values and a.per_position == b.per_position
    assert a.requests_by_reason == b.requests_by_reason and a.cache == b.cache
    assert a.spec == b.spec and a.window_s == b.window_s


@pytest.mark.parametrize("earlier,later", [(None, NGRAM_LOAD), (NGRAM_IDLE, NGRAM_LOAD),
                                           (PLAIN_IDLE, PLAIN_LOAD)])
def test_a_slots_parse_keeps_exactly_what_its_figures_need(earlier, later) -> None:
    """A slot's poll parses the catalog's families of its own model only: the figures are
    those of the whole parse, to the bit."""
    from console.sources.collect.slot import FAMILIES

    def both(path):
        text = path.read_text()
        return parse(text), parse(text, FAMILIES, "tiny-main")

    full_l, part_l = both(later)
    full_e, part_e = both(earlier) if earlier else (None, None)
    window = 10.0 if earlier else None
    _same(compute(full_l, full_e, window, only="tiny-main")["tiny-main"],
          compute(part_l, part_e, window, only="tiny-main")["tiny-main"])
    assert len(part_l.samples) < len(full_l.samples)  # process_*, python_* … are not read


def test_other_models_and_families_are_skipped_unread() -> None:
    from console.sources.collect.slot import FAMILIES

    text = NGRAM_LOAD.read_text()
    foreign = "".join(f'vllm:num_requests_running{{engine="0",model_name="tiny-main-{i}"}} 7\n'
                      for i in range(2000))
    broken_foreign = 'vllm:num_requests_running{model_name="other" 3\n'
    exp = parse(text + foreign + broken_foreign + 'python_gc{"unclosed 1\n', FAMILIES,
                "tiny-main")
    assert exp.error_count == 0  # lines left out are not read, so not judged either
    running = exp.by_label("vllm:num_requests_running", "model_name")
    assert set(running) == {"tiny-main"}
    # a broken line of a kept family and model is counted, at its line in the text
    n = len(text.split("\n"))
    exp = parse(text + 'vllm:num_requests_running{model_name="tiny-main" 3\n', FAMILIES,
                "tiny-main")
    assert exp.errors == (f"line {n}: unclosed label set",)
    # a model name that needs escaping in the exposition is matched escaped
    odd = 'we"ird\\name'
    esc = odd.replace("\\", "\\\\").replace('"', '\\"')
    exp = parse(f'vllm:num_requests_running{{model_name="{esc}"}} 2\n', FAMILIES, odd)
    assert compute(exp, only=odd)[odd].value("running") == 2.0


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet='ab_1= ",\\\t{}x', max_size=40))
def test_the_label_fast_path_reads_as_the_long_way(body: str) -> None:
    from console.model.printable import printable
    from console.sources.collect.exposition import _parse_labels, _parse_labels_slow

    slow = _parse_labels_slow(body)
    # what both read, then cleaned as every outside word is at this boundary (issue 44)
    want = None if slow is None else tuple((printable(k), printable(v)) for k, v in slow)
    assert _parse_labels(body) == want


def test_remembered_label_sets_stay_bounded(monkeypatch) -> None:
    from console.sources.collect import exposition

    monkeypatch.setattr(exposition, "LABEL_CACHE_MAX", 100)
    monkeypatch.setattr(exposition, "_label_cache", {})
    text = "".join(f'vllm:num_requests_running{{model_name="m{i}"}} {i}\n' for i in range(1000))
    exp = parse(text)
    assert len(exp.samples["vllm:num_requests_running"]) == 1000
    assert 0 < len(exposition._label_cache) <= 100
    again = parse(text)  # the same values from remembered and fresh label sets alike
    assert again.samples == exp.samples


# A small exposition grammar for the memo: every shape the long way tells apart, so a
# line read from what its head meant last scrape must read exactly as the long way reads it.
_KEPT = frozenset({"vllm:a_total", "vllm:b_bucket", "vllm:c"})
_NAMES = [*sorted(_KEPT), "vllm:other", "python_gc", "process_x_total"]
_line = st.one_of(
    st.tuples(st.sampled_from(_NAMES),
              st.sampled_from(['', '{model_name="m"}', '{engine="0",model_name="m"}',
                               '{le="+Inf",model_name="m"}', '{model_name="x"}',
                               '{le="0.5"}', '{a="q\\"t",model_name="m"}', '{bad',
                               '{a="}",model_name="m"}', ' {model_name="m"}']),
              st.sampled_from([" ", "  ", "\t", " "]),
              st.sampled_from(["1", "2.5", "NaN", "+Inf", "x", "", "1 17", "3 ", "4}",
                               "7\r"]),
              st.sampled_from(["", " ", "\t"]))
    .map(lambda t: t[4] + t[0] + t[1] + t[2] + t[3]),
    st.sampled_from(["# HELP vllm:c help text", "# TYPE vllm:c gauge", "", "   ",
                     "vllm:c", "#", "vllm:c{model_name=\"m\"}"]),
)


def _canon(samples: dict) -> dict:
    return {n: {k: repr(v) for k, v in fam.items()} for n, fam in samples.items()}  # NaN


@settings(max_examples=400, deadline=None)
@given(st.lists(_line, max_size=14), st.lists(_line, max_size=14),
       st.lists(st.integers(0, 13), max_size=4), st.sampled_from(["m", None]))
def test_a_memo_reads_every_scrape_as_the_long_way(first, extra, swaps, model) -> None:
    """Scrapes share a memo, the second one the first with lines added, moved and
    values changed, the next ones the second with only values changed (read by its
    layout when it has one), then one with a value that does not read: each reads
    exactly as it reads with no memo, errors and line numbers included, and its model
    index is the one built from its samples."""
    from console.sources.collect.exposition import ParseMemo
    from console.sources.collect.figures import _View

    second = list(first) + list(extra)
    for i in swaps:
        if second:
            j = i % len(second)
            second[0], second[j] = second[j], second[0]
    second = [ln.replace("2.5", "3.75") for ln in second]
    third = [ln.replace("3.75", "6") for ln in second]
    fourth = [ln.replace("NaN", "y") for ln in third]
    memo = ParseMemo()
    for lines in (first, second, second, third, fourth, third):
        text = "\n".join(lines) + "\n"
        long_way = parse(text, _KEPT, model)
        got = parse(text, _KEPT, model, memo)
        assert _canon(got.samples) == _canon(long_way.samples)
        assert (got.errors, got.error_count) == (long_way.errors, long_way.error_count)
        for name in _KEPT:  # the figures' sums, read by a layout or not
            for group in (None, "le", "engine", "a"):
                assert repr(_View(got).by_model(name, "m", group)) == repr(
                    _View(long_way).by_model(name, "m", group))
        for name, fam in got.samples.items():
            want: dict = {}
            for labels, v in fam.items():
                want.setdefault(dict(labels).get("model_name"), []).append((labels, v))
            assert {k: sorted(map(repr, v)) for k, v in got.by_label(
                name, "model_name").items()} == {k: sorted(map(repr, v)) for k, v in want.items()}


def test_a_scrape_with_the_last_ones_heads_is_read_by_its_layout() -> None:
    """vLLM's next scrape has the same lines with other values: it is read by the layout
    (and reads as the long way does); one line more, or a value that is not a number,
    and it goes the long way again, and says what is wrong."""
    from console.sources.collect.exposition import ParseMemo
    from console.sources.collect.slot import FAMILIES

    text = NGRAM_LOAD.read_text()
    later = re.sub(r"_(total|bucket|count)\{([^}]*)\} (\d+)\.0$",
                   lambda m: f"_{m[1]}{{{m[2]}}} {int(m[3]) + 5}.0", text, flags=re.M)
    assert later != text
    memo = ParseMemo()
    parse(text, FAMILIES, "tiny-main", memo)
    assert memo.layout is not None and memo.layout_reads == 0
    for scrape in (later, text, later):
        got = parse(scrape, FAMILIES, "tiny-main", memo)
        want = parse(scrape, FAMILIES, "tiny-main")
        assert got == want and got.error_count == 0
        assert {n: got.by_label(n, "model_name") for n in got.samples} == {
            n: want.by_label(n, "model_name") for n in want.samples}
    assert memo.layout_reads == 3
    # a window between two scrapes read by the layout: the figures the long way gives
    ends = [parse(x, FAMILIES, "tiny-main", memo) for x in (text, later)]
    assert ends[1]._layout is not None and memo.layout_reads == 5
    long_ends = [parse(x, FAMILIES, "tiny-main") for x in (text, later)]
    got_f = compute(ends[1], ends[0], 10.0, only="tiny-main")["tiny-main"]
    want_f = compute(long_ends[1], long_ends[0], 10.0, only="tiny-main")["tiny-main"]
    assert repr(got_f) == repr(want_f) and got_f.ttft_p95_s is not None
    # a restart of one family between the ends (its counter lower, its *_created later):
    # read by the layout too, and what the long way makes of it; as Prometheus reads
    # it: a drop is a reset (7 counted from 0), a rise is an increase (7 -> 616: 609),
    # whatever the *_created stamps say
    restarted = later.replace(
        'vllm:prompt_tokens_total{engine="0",model_name="tiny-main"} 616.0',
        'vllm:prompt_tokens_total{engine="0",model_name="tiny-main"} 7.0').replace(
        "prompt_tokens_created{engine=\"0\",model_name=\"tiny-main\"} 1.7959417587544973e+09",
        "prompt_tokens_created{engine=\"0\",model_name=\"tiny-main\"} 1.7959418e+09")
    assert restarted.count("7.0\n") > later.count("7.0\n") and "1.7959418e+09" in restarted
    for e_text, l_text, want_prompt, want_gen in ((text, restarted, 7.0, 5.0),
                                                  (restarted, later, 609.0, 0.0)):
        pair = [parse(x, FAMILIES, "tiny-main", memo) for x in (e_text, l_text)]
        assert pair[0]._layout is pair[1]._layout is not None
        longs = [parse(x, FAMILIES, "tiny-main") for x in (e_text, l_text)]
        f = compute(pair[1], pair[0], 10.0, only="tiny-main")["tiny-main"]
        assert repr(f) == repr(compute(longs[1], longs[0], 10.0, only="tiny-main")["tiny-main"])
        assert f.prompt_tokens == want_prompt
        assert f.generation_tokens == want_gen  # a family that did not restart: its increase
    # figures ask families one at a time: the scrape's dict of every family is never built
    assert ends[1]._samples is None
    for name in long_ends[1].samples:
        assert ends[1].series(name) == long_ends[1].series(name) and name in ends[1]
    assert ends[1].names() == list(long_ends[1].samples) and "vllm:nothing" not in ends[1]
    assert ends[1].series("vllm:nothing") == {} and ends[1]._samples is None
    assert got_f.value("prompt_tps") == 0.5
    running = 'vllm:num_requests_running{engine="0",model_name="tiny-main"} '
    assert running in text
    odd = re.sub(re.escape(running) + r"\S+", running + "many", text)
    reads = memo.layout_reads
    got = parse(odd, FAMILIES, "tiny-main", memo)
    assert got == parse(odd, FAMILIES, "tiny-main") and got.error_count == 1
    assert got.errors[0].endswith("unreadable value") and memo.layout_reads == reads
    assert memo.layout is None  # a scrape with an error is no layout
    parse(text, FAMILIES, "tiny-main", memo)
    more = text.replace(running, running + "1\n" + running.replace('"0"', '"1"'), 1)
    got = parse(more, FAMILIES, "tiny-main", memo)
    assert got == parse(more, FAMILIES, "tiny-main") and memo.layout_reads == reads
    assert len(got.samples["vllm:num_requests_running"]) == 2
    # a target that also exports other models every scrape: the layout is the one of
    # the lines kept, and the next scrape is read by it after the others are dropped
    other = 'vllm:num_requests_running{engine="0",model_name="other"} 4\n'
    for scrape in (text + other, later + other, text + other):
        got = parse(scrape, FAMILIES, "tiny-main", memo)
        assert got == parse(scrape, FAMILIES, "tiny-main")
    assert memo.layout_reads == reads + 2


def test_a_memo_stays_bounded_and_follows_its_families_and_model() -> None:
    from console.sources.collect.exposition import ParseMemo
    from console.sources.collect.slot import FAMILIES

    memo = ParseMemo(limit=50)
    text = NGRAM_LOAD.read_text()
    for _ in range(3):  # 661 lines against a 50-head memo: emptied, refilled, still right
        assert parse(text, FAMILIES, "tiny-main", memo).samples == parse(
            text, FAMILIES, "tiny-main").samples
        assert len(memo.heads) <= 50 + len(text.split("\n"))
    big = ParseMemo(max_chars=1000)  # and so do its characters, however long a line
    for i in range(5):
        long_line = f'vllm:c{{model_name="m",pad="{"x" * 3000}{i}"}} 1\n'
        assert parse(long_line, _KEPT, "m", big).samples == parse(long_line, _KEPT, "m").samples
        assert len(big.heads) <= 1
    # asked for another model, it forgets what the lines meant for the first one
    other = text.replace('model_name="tiny-main"', 'model_name="other"')
    assert parse(other, FAMILIES, "other", memo).samples == parse(
        other, FAMILIES, "other").samples
    back = parse(text, FAMILIES, "other", memo)
    assert back.samples == parse(text, FAMILIES, "other").samples
    assert set(back.samples) == {"vllm:cache_config_info"}  # the one family without a model
