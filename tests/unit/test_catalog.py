"""The metric catalog: one entry per figure, read by every path and every view.

The two entries added to prove it (``waiting_capacity``/``waiting_deferred`` from
``vllm:num_requests_waiting_by_reason``, and the generation tokens/s plot) must reach
the direct path, the PromQL, the detail screen, the plots and the history with nothing
but their catalog entry; the table's colours must follow the configured thresholds."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from msgspec.structs import replace
from rich.text import Text

from console.config.settings import SlotThresholds
from console.model import catalog
from console.model.engines import VLLM
from console.model.snapshot import SlotSnapshot
from console.sources.collect.exposition import parse
from console.sources.collect.figures import compute
from console.sources.collect.poller import PLOTTED, plotted_values
from console.sources.collect.promql import (
    engines_query,
    figure_queries,
    history_queries,
    source_query,
)
from console.ui.screens.detail import figures_table
from console.ui.widgets.slots import COLUMNS, fit_columns, row
from tests.conftest import FIXTURES

CAP = FIXTURES / "vllm-0.32.0-cpu"
LOAD = CAP / "ngram" / "metrics-specdecode-after-basic-load.txt"
IDLE = CAP / "ngram" / "metrics-specdecode-idle.txt"


def _with_waiting(text: str, capacity: float, deferred: float) -> str:
    """The real capture with requests waiting (its server was idle when captured)."""
    text = re.sub(r'(vllm:num_requests_waiting_by_reason\{[^}]*reason="capacity"\}) \S+',
                  rf"\g<1> {capacity}", text)
    text = re.sub(r'(vllm:num_requests_waiting_by_reason\{[^}]*reason="deferred"\}) \S+',
                  rf"\g<1> {deferred}", text)
    return re.sub(r"(vllm:num_requests_waiting\{[^}]*\}) \S+", rf"\g<1> {capacity + deferred}",
                  text)


def test_waiting_by_reason_is_one_entry_read_by_the_direct_path() -> None:
    assert "vllm:num_requests_waiting_by_reason" in LOAD.read_text()
    f = compute(parse(_with_waiting(LOAD.read_text(), 3, 1)))["tiny-main"]
    assert (f.waiting_capacity, f.waiting_deferred, f.waiting) == (3.0, 1.0, 4.0)


def test_a_server_without_the_family_leaves_it_undefined_not_zero() -> None:
    old = "\n".join(ln for ln in LOAD.read_text().splitlines()
                    if "waiting_by_reason" not in ln)
    f = compute(parse(old))["tiny-main"]
    assert f.waiting_capacity is None and f.waiting_deferred is None
    assert f.waiting == 0.0


def test_older_names_are_read_when_the_current_are_absent() -> None:
    text = LOAD.read_text()
    renamed = (text.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
               .replace("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
               .replace("vllm:prefix_cache_", "vllm:gpu_prefix_cache_"))
    a = compute(parse(text))["tiny-main"]
    b = compute(parse(renamed))["tiny-main"]
    for key in ("kv_cache_usage", "itl_p95_s", "prefix_cache_hit_rate"):
        assert a.value(key) is not None and a.value(key) == b.value(key), key


def test_every_entry_has_promql_and_old_names_join_with_or() -> None:
    queries = figure_queries(300)
    for fig in catalog.CATALOG:
        if fig.key == "slo_attainment":  # per latency, from its histogram's buckets
            assert {"slo:ttft", "slo:tpot"} <= set(queries)
            continue
        # vLLM's query (when vLLM exports it) first; another engine's joins with or
        vllm = fig.source_for(VLLM)
        if vllm is not None:
            assert queries[fig.key].startswith(f"({source_query(vllm, 300)})") or \
                queries[fig.key] == source_query(vllm, 300)
        assert queries[fig.key] == engines_query(fig.key, 300)
    assert "vllm:gpu_prefix_cache_hits_total" in queries["prefix_cache_hit_rate"]
    assert 'reason="capacity"' in queries["waiting_capacity"]
    # a source's match is PromQL's =~, joined with a selector into one matcher list
    five = catalog.GATEWAY_BY_KEY["error_5xx_ratio"].source
    q = source_query(five, 60, '{job="litellm"}', by=("model_id",))
    assert q == ('sum by (model_id) (increase(litellm_deployment_failure_responses_total'
                 '{job="litellm",exception_status=~"5.."}[1m])) / sum by (model_id) '
                 '(increase(litellm_deployment_total_requests_total{job="litellm"}[1m]))')
    assert source_query(catalog.GATEWAY_BY_KEY["errors_4xx"].source, 60) == (
        'sum by (model_name) (increase(litellm_deployment_failure_responses_total'
        '{exception_status=~"4.."}[1m]))')
    # a selector and the entry's own label join into one matcher list
    q = source_query(catalog.BY_KEY["waiting_deferred"].source, 60, '{pod="abc"}')
    assert '{pod="abc",reason="deferred"}' in q


def test_generation_tps_is_plotted_recorded_and_backfilled() -> None:
    plotted = [f.key for f, _ in catalog.plots()]
    assert "generation_tps" in plotted and list(PLOTTED) == plotted
    later, earlier = parse(LOAD.read_text()), parse(IDLE.read_text())
    f = compute(later, earlier, window_s=30.0)["tiny-main"]
    assert f.generation_tps == f.generation_tokens / 30.0 > 0
    assert plotted_values(f)["generation_tps"] == f.generation_tps
    assert "rate(vllm:generation_tokens_total" in history_queries(300)["generation_tps"]


def test_detail_screen_lists_every_detail_entry() -> None:
    from rich.console import Console

    f = compute(parse(_with_waiting(LOAD.read_text(), 3, 1)))["tiny-main"]
    snap = SlotSnapshot(slot="S", served_model_name="tiny-main", port=1, url="u",
                        health="up", figures=f)
    con = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    con.print(figures_table(snap, 0.0))
    text = con.export_text()
    for fig in catalog.CATALOG:
        if fig.detail and fig.source_for(VLLM) is not None:  # vLLM's figures, each a row
            assert fig.label in text, fig.label
    assert re.search(r"waiting: capacity\s+3\b", text)


def _cells(snap: SlotSnapshot, th: SlotThresholds | None) -> dict[str, Text]:
    cells = row(snap, "0", 0.5, None, th)
    return {k: c for (k, _, _), c in zip(COLUMNS, cells, strict=True) if isinstance(c, Text)}


def test_table_colours_follow_the_configured_thresholds() -> None:
    f = compute(parse(LOAD.read_text()))["tiny-main"]
    # a draft that has gone bad (the captured ngram drafts were all accepted)
    f = replace(f, values={**f.values, "acceptance_rate": 0.3})
    assert f.ttft_p95_s is not None
    snap = SlotSnapshot(slot="S", served_model_name="tiny-main", port=1, url="u",
                        health="up", figures=f, kv_p99=0.5)
    loose = _cells(snap, SlotThresholds(ttft_p95_s=f.ttft_p95_s * 2, kv_p99=0.9))
    tight = _cells(snap, SlotThresholds(ttft_p95_s=f.ttft_p95_s / 2, kv_p99=0.4,
                                        acceptance_baseline=1.0))
    assert "warn" not in str(loose["ttft_p95_s"].style)
    assert "warn" in str(tight["ttft_p95_s"].style)
    assert "warn" not in str(loose["kv_p99"].style)
    assert "warn" in str(tight["kv_p99"].style)
    # acceptance far below a configured baseline (it has no literal limit at all)
    assert f.acceptance_rate < 1.0 * catalog.ACCEPTANCE_DROP
    assert "warn" in str(tight["acceptance_rate"].style)
    assert "warn" not in str(loose["acceptance_rate"].style)


def test_columns_are_chosen_by_priority_and_always_fit_whole() -> None:
    widths = {k: w for k, _, w in COLUMNS}
    seen_counts = []
    for term in (60, 80, 100, 120, 160, 220):
        keys = fit_columns(term - 2)
        narrow = term - 2 < 100  # as fit_columns judges the width it is given
        used = sum((3 if narrow and k == "preemptions" else widths[k]) + 2 for k in keys)
        assert used <= term - 2, (term, keys)
        assert {"slot", "health", "ttft_p95_s", "kv_cache_usage", "kv_p99"} <= set(keys), term
        order = [k for k, _, _ in COLUMNS]
        assert list(keys) == [k for k in order if k in keys]  # usual order kept
        seen_counts.append(len(keys))
    assert seen_counts == sorted(seen_counts) and seen_counts[-1] == len(COLUMNS)
    # at 120 columns every column that has a threshold is still there, whole
    for fig, _ in catalog.thresholds():
        if fig.column:
            assert fig.key in fit_columns(118), fig.key


def test_metrics_all_prints_every_model_figure() -> None:
    r = subprocess.run([sys.executable, "-m", "console.cli", "metrics", str(LOAD), "--json",
                        "--all"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)["tiny-main"]
    assert set(out) == {f.key for f in catalog.MODEL_FIGURES}
    r = subprocess.run([sys.executable, "-m", "console.cli", "catalog", "--json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    every = json.loads(r.stdout)
    rows = {x["key"]: x for x in every if x["family"] == "slot"}
    assert set(rows) == set(catalog.BY_KEY)
    # the gateway's figures follow, with their sources and PromQL (issue 34)
    gw = {x["key"]: x for x in every if x["family"] == "gateway"}
    assert set(gw) == set(catalog.GATEWAY_BY_KEY)
    assert gw["error_5xx_ratio"]["threshold"] == "gateway.error_5xx_ratio"
    assert gw["errors_5xx"]["definition"]["match"] == ["exception_status", "5.."]
    assert 'exception_status=~"5.."' in gw["errors_5xx"]["promql"]
    assert gw["state"]["promql"] == "max by (model_id) (litellm_deployment_state)"
    usage = {x["key"] for x in every if x["family"] == "gateway usage"}
    assert usage == {f.key for f in catalog.GATEWAY_USAGE}
    assert rows["ttft_p95_s"]["threshold"] == "ttft_p95_s"
    assert rows["generation_tps"]["plot"] == "generation"


def test_a_slot_that_is_not_up_shows_no_live_looking_figures() -> None:
    f = compute(parse(LOAD.read_text()))["tiny-main"]
    for health in ("down", "starting", "unknown"):
        snap = SlotSnapshot(slot="S", served_model_name="tiny-main", port=1, url="u",
                            health=health, figures=f, kv_p99=0.5,  # type: ignore[arg-type]
                            stale_since=1.0)
        cells = _cells(snap, SlotThresholds())
        assert all(cells[fig.key].plain == "–" for fig, _ in catalog.columns()), health
    up = _cells(SlotSnapshot(slot="S", served_model_name="tiny-main", port=1, url="u",
                             health="up", figures=f), SlotThresholds())
    assert up["ttft_p95_s"].plain not in ("–", "")


def test_metrics_without_json_is_a_table_of_every_figure() -> None:
    r = subprocess.run([sys.executable, "-m", "console.cli", "metrics", str(LOAD)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("lifetime figures") and "tiny-main" in lines[1]
    for fig in catalog.MODEL_FIGURES:
        assert any(ln.startswith(fig.label + " ") for ln in lines), fig.label
    assert any(re.match(r"TTFT p95\s+\d", ln) for ln in lines)
