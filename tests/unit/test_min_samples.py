"""A ratio needs a sample: below the least the catalog declares (draft tokens for the
acceptance, drafts for the mean acceptance length, prompt tokens for the prefix hit
rate), it is undefined on both paths, never 100 % from a probe's four tokens."""

from __future__ import annotations

import re

from console.model.catalog import BY_KEY, describe
from console.sources.collect.exposition import parse
from console.sources.collect.figures import compute
from console.sources.collect.promql import figure_queries, figures_from_answers
from tests.conftest import FIXTURES

NGRAM = FIXTURES / "vllm-0.32.0-cpu" / "ngram"
LOAD = (NGRAM / "metrics-specdecode-after-basic-load.txt").read_text()
IDLE = (NGRAM / "metrics-specdecode-idle.txt").read_text()
RATIOS = ("acceptance_rate", "mean_acceptance_length", "prefix_cache_hit_rate")


def _grown(text: str, by: dict[str, float]) -> str:
    """``text`` with each named counter's series grown by ``by[name]``."""
    for name, inc in by.items():
        text = re.sub(rf"^({re.escape(name)}\{{[^}}]*\}}) (\S+)$",
                      lambda m, inc=inc: f"{m[1]} {float(m[2]) + inc!r}", text, flags=re.M)
    return text


PROBE = {  # one probe's completion: 4 tokens, 3 drafted, all accepted; a short prompt
    "vllm:spec_decode_num_drafts_total": 1, "vllm:spec_decode_num_draft_tokens_total": 3,
    "vllm:spec_decode_num_accepted_tokens_total": 3,
    "vllm:spec_decode_num_accepted_tokens_per_pos_total": 1,
    "vllm:prompt_tokens_total": 25, "vllm:prefix_cache_queries_total": 25,
    "vllm:prefix_cache_hits_total": 25, "vllm:generation_tokens_total": 4,
}


def test_probe_only_traffic_leaves_the_ratios_undefined_on_the_direct_path() -> None:
    f = compute(parse(_grown(LOAD, PROBE)), parse(LOAD), 300.0)["tiny-main"]
    assert f.spec_draft_tokens == 3 and f.spec_drafts == 1 and f.prompt_tokens == 25
    for key in RATIOS:
        assert f.value(key) is None, key
    assert f.spec_decode is not None and f.per_position == (None, None, None)
    # the counts themselves stand, and so does a window with a real load in it
    assert f.generation_tokens == 4
    busy = compute(parse(LOAD), parse(IDLE), 300.0)["tiny-main"]
    assert busy.acceptance_rate == 1.0 and busy.mean_acceptance_length is not None
    assert busy.prefix_cache_hit_rate == 0.0 and all(p is not None for p in busy.per_position)


def _answers(values: dict[str, float], per_pos: dict[str, float]) -> dict[str, list]:
    r: dict[str, list] = {k: [] for k in figure_queries(300.0)}
    for key, v in values.items():
        r[key] = [{"metric": {"model_name": "m"}, "value": [1.0, repr(v)]}]
    r["spec_per_pos"] = [{"metric": {"model_name": "m", "position": p}, "value": [1.0, repr(v)]}
                         for p, v in per_pos.items()]
    return r


def test_probe_only_traffic_leaves_the_ratios_undefined_through_prometheus() -> None:
    few = _answers({"spec_drafts": 1, "spec_draft_tokens": 3, "spec_accepted": 3,
                    "acceptance_rate": 1.0, "mean_acceptance_length": 4.0,
                    "prompt_tokens": 25, "prefix_cache_hit_rate": 1.0}, {"0": 1, "1": 1})
    figs, _ = figures_from_answers(few, 300.0)
    f = figs[("m",)]
    for key in RATIOS:
        assert f.value(key) is None, key
    assert f.per_position == (None, None) and f.spec_drafts == 1
    enough = _answers({"spec_drafts": 351, "spec_draft_tokens": 1027, "spec_accepted": 1027,
                       "acceptance_rate": 1.0, "mean_acceptance_length": 3.93,
                       "prompt_tokens": 611, "prefix_cache_hit_rate": 0.0},
                      {"0": 351, "1": 325})
    g = figures_from_answers(enough, 300.0)[0][("m",)]
    assert g.acceptance_rate == 1.0 and g.mean_acceptance_length == 3.93
    assert g.prefix_cache_hit_rate == 0.0 and g.per_position == (1.0, 325 / 351)


def test_the_least_sample_is_declared_in_the_catalog_and_told_in_the_legend() -> None:
    for key in RATIOS:
        ms = BY_KEY[key].min_sample
        assert ms is not None and ms.key in BY_KEY and ms.least > 0
        assert f"below {ms.least:g} {ms.what}" in describe(BY_KEY[key])
