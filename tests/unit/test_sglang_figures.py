"""SGLang slots: the figures from SGLang 0.5.23's own exposition (its metrics collector,
instantiated and fed in ``tests/support/sglang_exposition.py``; the values fed are in
``fed.json`` beside it), and a hostile SGLang: ranks missing, a gauge without its
counter, NaN, a counter reset. Never a crash, never a wrong number."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from console.model.engines import SGLANG, VLLM
from console.model.numbers import bucket_quantile, cumulative_buckets
from console.sources.collect.exposition import parse
from console.sources.collect.figures import compute, engine_of
from console.sources.collect.promql import figure_queries
from tests.conftest import FIXTURES

SGL = FIXTURES / "sglang-0.5.23"
MODEL = "sgl-tiny"
FED = json.loads((SGL / "fed.json").read_text())
VENV = Path(os.environ.get("POD_CONSOLE_SGLANG_VENV", "/opt/sglang-venv"))


def _figs(name: str, window: bool = True, before: str | None = None,
          after: str | None = None):
    later = parse(after if after is not None else (SGL / f"{name}-after.txt").read_text())
    if not window:
        return compute(later, engine=SGLANG)[MODEL]
    earlier = parse(before if before is not None
                    else (SGL / f"{name}-before.txt").read_text())
    return compute(later, earlier, 10.0, only=MODEL, engine=SGLANG)[MODEL]


def _expected_quantile(text: str, hist: str, q: float) -> float | None:
    """histogram_quantile from the fixture's buckets as the test reads them itself
    (one series; the numbers code is the one vLLM's figures use)."""
    pairs = []
    for m in re.finditer(rf'^{re.escape(hist)}_bucket{{[^}}]*le="([^"]+)"[^}}]*}} (\S+)$',
                         text, re.M):
        pairs.append((float(m.group(1)), float(m.group(2))))
    return bucket_quantile(q, cumulative_buckets(pairs))


def test_the_engine_is_told_by_its_families() -> None:
    assert engine_of(parse((SGL / "single-after.txt").read_text())) is SGLANG
    assert engine_of(parse((FIXTURES / "vllm-0.32.0-cpu/plain/metrics-idle.txt")
                           .read_text())) is VLLM


def test_single_scheduler_figures_are_the_values_fed() -> None:
    fed = FED["single"]["after"]
    reqs = fed["requests"]
    f = _figs("single")
    assert f.engine == "sglang"
    assert f.running == fed["running"][0] == 3
    assert f.waiting == fed["queue"][0] == 2
    assert f.kv_cache_usage == 0.25
    assert f.kv_used_tokens == 25000 and f.kv_available_tokens == 75000
    assert f.preemptions == 1  # retracted requests
    assert f.prompt_tokens == sum(r["prompt"] for r in reqs) == 10000
    assert f.generation_tokens == sum(r["gen"] for r in reqs) == 2000
    # prefix hits: Δcached / Δprompt
    assert f.prefix_cache_hit_rate == pytest.approx(4000 / 10000)
    # acceptance LENGTH from counters: Δgeneration tokens / Δverify calls, no "1 +"
    assert f.mean_acceptance_length == pytest.approx(2000 / 800)
    assert f.spec_drafts == 800
    assert f.generation_tps == pytest.approx(2000 / 10.0)
    # not exported by SGLang: undefined, never 0
    assert f.acceptance_rate is None and f.spec_draft_tokens is None
    assert f.per_position == ()
    assert f.spec_decode is not None and f.spec_decode.per_position == ()
    assert f.waiting_capacity is None and f.prefill_p95_s is None
    text = (SGL / "single-after.txt").read_text()
    for key, hist, q in (("ttft_p50_s", "sglang:time_to_first_token_seconds", 0.5),
                         ("ttft_p95_s", "sglang:time_to_first_token_seconds", 0.95),
                         ("itl_p95_s", "sglang:inter_token_latency_seconds", 0.95),
                         ("e2e_p95_s", "sglang:e2e_request_latency_seconds", 0.95),
                         ("queue_p95_s", "sglang:queue_time_seconds", 0.95)):
        want = _expected_quantile(text, hist, q)
        assert want is not None and f.value(key) == pytest.approx(want), key
    # the one 1.5 s TTFT of ten is past p50 and inside p95's bucket (1, 2]
    assert f.ttft_p50_s < 0.1 and 1.0 < f.ttft_p95_s <= 2.0


def test_lifetime_counters_read_as_they_stand() -> None:
    f = _figs("single", window=False)
    assert f.generation_total == 2000 and f.prompt_total == 10000
    assert f.window_s is None and f.generation_tps is None


def test_dp2_tp2_sums_data_parallel_ranks_and_maxes_the_tensor_parallel_ones() -> None:
    fed = FED["dp2tp2"]["after"]
    f = _figs("dp2tp2")
    # running: the two tp ranks of dp 0 both say 4, of dp 1 both 2: 4 + 2, not 12
    assert f.running == 6 and f.waiting == 1
    # KV usage: the fullest data-parallel pool, not a sum over ranks
    assert f.kv_cache_usage == pytest.approx(max(fed["token_usage"])) == 0.6
    assert f.kv_used_tokens == 40000 and f.kv_available_tokens == 60000
    # retracted: 2 on dp 0 (told by both of its tp ranks), none on dp 1
    assert f.preemptions == 2
    assert f.prompt_tokens == 20 * 500 and f.generation_tokens == 20 * 50
    assert f.prefix_cache_hit_rate == pytest.approx(100 / 500)
    # no speculative decoding: no verify calls, so no length (not 0)
    assert f.mean_acceptance_length is None and not f.spec


def test_promql_maxes_replicas_and_maxes_kv_across_ranks() -> None:
    q = figure_queries(60.0)
    assert ("sum by (model_name) (max without (tp_rank, pp_rank, moe_ep_rank) "
            "(sglang:num_running_reqs))") in q["running"]
    assert "max by (model_name) (max without (tp_rank, pp_rank, moe_ep_rank) " \
           "(sglang:token_usage))" in q["kv_cache_usage"]
    assert "sglang:generation_tokens_total" in q["mean_acceptance_length"]
    assert "acceptance_rate" in q and "sglang" not in q["acceptance_rate"]
    assert q["engine:sglang"] == "group by (model_name) (sglang:num_running_reqs)"


def test_the_detail_shows_sglangs_figures_and_says_what_it_does_not_export() -> None:
    from rich.console import Console

    from console.model.snapshot import SlotSnapshot
    from console.ui.screens.detail import figures_table

    snap = SlotSnapshot(slot="SG", served_model_name=MODEL, port=1, url="u", health="up",
                        figures=_figs("single"), engine="sglang")
    con = Console(width=200, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    con.print(figures_table(snap, 0.0))
    text = con.export_text()
    assert re.search(r"per position\s+not exported by SGLang", text)
    assert re.search(r"engine\s+SGLang", text)
    assert re.search(r"mean accept len\s+2\.50", text)
    assert re.search(r"KV free tokens\s+75\.0k", text), text
    assert re.search(r"running\s+3\b", text)
    # what SGLang does not export is no row, not a 0 or a dash
    assert "acceptance " not in text and "prefill p95" not in text
    assert "waiting: capacity" not in text


# -- a hostile SGLang -------------------------------------------------------------------

def _drop(text: str, pattern: str) -> str:
    return "\n".join(line for line in text.split("\n") if not re.search(pattern, line))


def test_a_missing_tp_rank_changes_no_figure() -> None:
    text = (SGL / "dp2tp2-after.txt").read_text()
    whole = _figs("dp2tp2")
    thin = _figs("dp2tp2", after=_drop(text, r'tp_rank="1"'))
    for key in ("running", "waiting", "kv_cache_usage", "kv_used_tokens", "preemptions",
                "queue_p95_s", "generation_tokens"):
        assert thin.value(key) == whole.value(key), key


def test_a_data_parallel_rank_gone_from_the_later_scrape_is_no_decrease() -> None:
    # dp 1's scheduler died: its series vanish; dp 0's retractions still count once, and
    # nothing reads the vanished rank as a reset (the whole lifetime again) or negative
    text = (SGL / "dp2tp2-after.txt").read_text()
    f = _figs("dp2tp2", after=_drop(text, r'dp_rank="1"'))
    assert f.running == 4 and f.preemptions == 2
    assert f.kv_cache_usage == pytest.approx(0.6)


def test_a_gauge_without_its_counter_is_undefined_not_zero() -> None:
    text = _drop((SGL / "single-after.txt").read_text(),
                 r"^sglang:(generation_tokens|spec_verify_calls)_total")
    f = _figs("single", after=text)
    assert f.running == 3  # the gauges still read
    assert f.generation_tokens is None and f.generation_tps is None
    assert f.mean_acceptance_length is None and f.generation_total is None


def test_nan_on_one_rank_is_that_rank_left_out_and_nan_alone_is_undefined() -> None:
    text = (SGL / "dp2tp2-after.txt").read_text()
    one = re.sub(r'^(sglang:token_usage\{dp_rank="0"[^}]*tp_rank="1"\}) \S+$', r"\1 NaN",
                 text, flags=re.M)
    assert one != text
    assert _figs("dp2tp2", after=one).kv_cache_usage == pytest.approx(0.6)
    single = re.sub(r"^(sglang:token_usage\{[^}]*\}) \S+$", r"\1 NaN",
                    (SGL / "single-after.txt").read_text(), flags=re.M)
    f = _figs("single", after=single)
    assert f.kv_cache_usage is None
    nan_counter = re.sub(r"^(sglang:generation_tokens_total\{[^}]*\}) \S+$", r"\1 NaN",
                         (SGL / "single-after.txt").read_text(), flags=re.M)
    g = _figs("single", after=nan_counter)
    assert g.generation_tokens is None and g.mean_acceptance_length is None


def test_a_counter_reset_counts_from_zero() -> None:
    # the server restarted between the scrapes: its counters start again. Prometheus'
    # increase() reads a drop as a reset and the later value as the increase
    before = (SGL / "single-after.txt").read_text()
    after = re.sub(r"^(sglang:generation_tokens_total\{[^}]*\}) \S+$", r"\1 300.0", before,
                   flags=re.M)
    f = _figs("single", before=before, after=after)
    assert f.generation_tokens == 300
    assert f.prompt_tokens == 0  # unchanged counters: no increase


def test_garbage_never_crashes() -> None:
    text = (SGL / "dp2tp2-after.txt").read_text()
    for junk in ("sglang:num_running_reqs{dp_rank=\"0\"} lots",
                 "sglang:token_usage{model_name=\"sgl-tiny\",tp_rank=\"x\"} +Inf",
                 "sglang:num_queue_reqs{model_name=\"sgl-tiny\"} -1e308",
                 "sglang:queue_time_seconds_bucket{model_name=\"sgl-tiny\",le=\"oops\"} 3"):
        f = _figs("dp2tp2", after=text + junk + "\n")
        assert f.kv_cache_usage is None or f.kv_cache_usage >= 0
