"""The smaller exactness findings of issue 45: what SGLang does not export is null in
the JSON contract, a rate is a rate, the gateway's window is the slots' and as short
as the captures say, a stalled row serves nothing now, two captures are a window even
when their times are equal, and a fresh proxy's capture is a window's start."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from console.config.settings import GatewaySettings
from console.model import fmt
from console.model.snapshot import SlotSnapshot
from console.sources.collect.exposition import parse
from console.sources.collect.figures import compute
from console.sources.collect.gateway import FAMILIES, GatewayCollector
from tests.conftest import FIXTURES

SGL = FIXTURES / "sglang-0.5.23"
PLAIN = FIXTURES / "vllm-0.32.0-cpu" / "plain"
GW = (FIXTURES / "litellm_metrics.txt").read_text()


def _metrics(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console.cli", "metrics", *args],
                          capture_output=True, text=True, timeout=60)


def test_sglang_counts_it_does_not_export_are_null_in_the_contract() -> None:
    f = compute(parse((SGL / "single-after.txt").read_text()),
                parse((SGL / "single-before.txt").read_text()), 60.0)["sgl-tiny"]
    spec = f.contract_dict()["spec_decode"]
    assert isinstance(spec, dict)
    assert spec["draft_tokens"] is None and spec["accepted_tokens"] is None
    assert isinstance(spec["drafts"], float) and spec["drafts"] > 0  # verify calls
    # vLLM exports them: numbers, 0.0 when none moved
    v = compute(parse((FIXTURES / "vllm-0.32.0-cpu/ngram/metrics-specdecode-idle.txt")
                      .read_text()))["tiny-main"].contract_dict()["spec_decode"]
    assert isinstance(v, dict) and v["draft_tokens"] == 0.0 and v["accepted_tokens"] == 0.0


def test_sglangs_token_rates_say_they_count_at_request_end() -> None:
    from console.ui.screens.detail import figures_table

    f = compute(parse((SGL / "single-after.txt").read_text()),
                parse((SGL / "single-before.txt").read_text()), 60.0)["sgl-tiny"]
    snap = SlotSnapshot(slot="SG", served_model_name="sgl-tiny", port=1, url="u",
                        health="up", figures=f, engine="sglang")
    con = Console(width=200, record=True)
    con.print(figures_table(snap, 0.0))
    text = con.export_text()
    assert "gen tok/s (counted at request end)" in text
    assert "prompt tok/s (counted at request end)" in text


def test_rates_requests_by_reason_are_per_second() -> None:
    after = compute(parse((PLAIN / "metrics-after-load.txt").read_text()),
                    parse((PLAIN / "metrics-idle.txt").read_text()), 40.0)["tiny-main"]
    counts = after.requests_by_reason
    assert sum(counts.values()) > 0
    snap = SlotSnapshot(slot="A", served_model_name="tiny-main", port=1, url="u",
                        health="up", figures=after)
    rates = snap.to_json()["rates"]
    assert isinstance(rates, dict)
    assert rates["requests_by_reason"] == {k: v / 40.0 for k, v in counts.items()}
    assert sum(rates["requests_by_reason"].values()) == rates["requests_per_s"]


def test_a_stalled_row_serves_no_tokens_now() -> None:
    from console.ui.widgets.slots import FIGURE_COLUMNS, row

    f = compute(parse((PLAIN / "metrics-after-load.txt").read_text()),
                parse((PLAIN / "metrics-idle.txt").read_text()), 40.0)["tiny-main"]
    assert f.generation_tps and f.generation_tps > 10
    s = SlotSnapshot(slot="A", served_model_name="tiny-main", port=1, url="u", health="up",
                     figures=f)
    at = 6 + [fig.key for fig, _ in FIGURE_COLUMNS].index("generation_tps")
    assert str(row(s, "0", None, None)[at]) == "76"
    stalled = row(s, "0", None, None, stalled=True)
    assert str(stalled[at]) == fmt.rate(0.0) and "STALLED" in str(stalled[5])


def test_two_captures_with_equal_times_are_a_window_of_unknown_length(tmp_path: Path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text((PLAIN / "metrics-idle.txt").read_text())
    b.write_text((PLAIN / "metrics-after-load.txt").read_text())
    os.utime(a, (1_800_000_000, 1_800_000_000))
    os.utime(b, (1_800_000_000, 1_800_000_000))
    r = _metrics(str(a), str(b))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("figures between the two captures")
    got = json.loads(_metrics(str(a), str(b), "--json").stdout)["tiny-main"]
    assert got["prompt_tokens"] == 611.0  # the window's increase


def test_metrics_gateway_reads_a_fresh_proxys_capture_as_the_start(tmp_path: Path) -> None:
    """Before its first request a proxy exports no litellm_ series: as the earlier file
    it is the window's start (every counter from zero), and a window of 0.63 s is
    0.63 s, not a second."""
    fresh = "\n".join(ln for ln in GW.splitlines() if "litellm_" not in ln) + "\n"
    a, b = tmp_path / "fresh.txt", tmp_path / "later.txt"
    a.write_text(fresh)
    b.write_text(GW)
    os.utime(a, (1_800_000_000.0, 1_800_000_000.0))
    os.utime(b, (1_800_000_000.63, 1_800_000_000.63))
    r = _metrics(str(a), str(b), "--gateway", "--json")
    assert r.returncode == 0, r.stderr
    snap = json.loads(r.stdout)
    assert abs(snap["window_s"] - 0.63) < 1e-3
    total = snap["total"]
    assert total["requests"] > 0
    assert abs(total["requests_per_s"] - total["requests"] / snap["window_s"]) < 1e-9
    head = _metrics(str(a), str(b), "--gateway").stdout.splitlines()[0]
    assert head == "gateway figures over 0.63 s"


def test_the_gateways_window_is_the_slots_at_any_poll_rate() -> None:
    grows = re.compile(r"^(litellm_\S*(?:_total|_bucket|_count|_sum)(?:\{[^}]*\})?) (\S+)$",
                       re.M)
    col = GatewayCollector("http://127.0.0.1:4000", GatewaySettings(), 300.0, 1.0,
                           zone=dt.UTC)
    t0 = 1_800_000_000.0
    snap = None
    for k in range(400):  # a poll every 2 s for 800 s
        text = grows.sub(lambda m, k=k: f"{m[1]} {float(m[2]) * (1 + 0.01 * k)!r}", GW)
        snap = col.read(parse(text, FAMILIES), t0 + 2.0 * k)
    assert snap is not None and snap.window_s is not None
    # its far end is a kept scrape: they are kept a spacing apart (a 6 MB exposition
    # each: issue 44), so the window is the slots' within one spacing, never 2m08s
    from console.sources.collect.gateway import KEEP_SPACING

    assert 300.0 - 300.0 / KEEP_SPACING <= snap.window_s <= 300.0


def test_kv_usage_is_declared_the_fullest_engines_for_every_engine() -> None:
    from console.model.catalog import BY_KEY, describe
    from console.model.engines import ENGINES, Gauge

    for eng in ENGINES.values():
        src = eng.sources["kv_cache_usage"]
        assert isinstance(src, Gauge) and src.across == "max", eng.name
    assert "the fullest engine's" in describe(BY_KEY["kv_cache_usage"])


def test_slo_attainment_counts_the_windows_requests_under_the_target() -> None:
    """From the window's bucket increases of the per-request histograms, the target
    snapped down to a bucket edge (a request counted was under it): an independent
    count from the capture's raw bucket lines, "no requests" in an idle window."""
    idle_text = (PLAIN / "metrics-idle.txt").read_text()
    load_text = (PLAIN / "metrics-after-load.txt").read_text()
    f = compute(parse(load_text), parse(idle_text), 40.0)["tiny-main"]

    def raw(text: str, le: str) -> float:
        m = re.search(r'^vllm:time_to_first_token_seconds_bucket\{engine="0",le="'
                      + re.escape(le) + r'",model_name="tiny-main"\} (\S+)$', text, re.M)
        assert m is not None
        return float(m[1])

    n = raw(load_text, "+Inf") - raw(idle_text, "+Inf")
    under = raw(load_text, "0.01") - raw(idle_text, "0.01")
    assert f.attainment("ttft", 0.015) == (under / n, 0.01, n) and 0 < under < n
    assert f.attainment("ttft", 0.01) == (under / n, 0.01, n)  # an edge is its own
    assert f.attainment("ttft", 0.0005) == (None, None, n)  # under every edge
    assert f.attainment("tpot", 0.12) == (1.0, 0.1, n)
    quiet = compute(parse(load_text), parse(load_text), 40.0)["tiny-main"]
    assert quiet.attainment("ttft", 0.015) == (None, 0.01, 0.0)  # no requests
    sgl = compute(parse((SGL / "single-after.txt").read_text()),
                  parse((SGL / "single-before.txt").read_text()), 60.0)["sgl-tiny"]
    assert sgl.attainment("ttft", 1.0)[0] is not None
    assert sgl.attainment("tpot", 1.0) == (None, None, 0.0)  # SGLang has no TPOT histogram


def test_the_polls_settle_is_read_from_the_global_scrape_timeout() -> None:
    from console.sources.collect.promql import prom_duration, scrape_settle_s

    assert prom_duration("1m30s") == 90.0 and prom_duration("500ms") == 0.5
    assert prom_duration("15s") == 15.0 and prom_duration("soon") is None
    cfg = ("global:\n  scrape_interval: 15s\n  scrape_timeout: 10s\n"
           "scrape_configs:\n- job_name: vllm\n  scrape_timeout: 3s\n")
    assert scrape_settle_s(cfg) == 10.0  # the global block's, not a job's
    assert scrape_settle_s("scrape_configs: []\n") is None
