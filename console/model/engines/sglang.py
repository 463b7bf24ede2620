"""SGLang (0.5.23) as the console reads it, with the names of its metrics collector
(``sglang/srt/observability/metrics_collector.py``). Run with ``--enable-metrics``.

The scheduler's gauges carry ``tp_rank``, ``pp_rank``, ``moe_ep_rank`` and, with data
parallelism, ``dp_rank``. Only the rank-0 scheduler of each data-parallel group exports
unless ``--enable-metrics-for-all-schedulers``; then the tensor-parallel ranks repeat
one scheduler's figures, so they are maxed (a replica), and the ``dp_rank`` groups,
each with its own requests and KV pool, are summed (a partition) or, for the KV usage
ratio, maxed (the fullest pool decides). The tokenizer's counters and histograms
(TTFT, ITL, e2e, tokens) carry no rank at all.

Not exported: speculative draft and accepted token counts, hence per-position
acceptance and the acceptance rate; the prefill/decode split of a request; why requests
wait. The mean acceptance length is Δgeneration tokens / Δverify calls (SGLang's own
definition, the bonus token included), not the gauge over its last 40 steps.
"""

from __future__ import annotations

from console.model.engines.base import Engine, Gauge, Increase, OverTime, Quantile, Ratio

KV = Gauge(("sglang:token_usage",), across="max")
GENERATION = ("sglang:generation_tokens_total",)
PROMPT = ("sglang:prompt_tokens_total",)
VERIFY = ("sglang:spec_verify_calls_total",)
STARTUP = "sglang:startup_time_seconds"

SGLANG = Engine(
    name="sglang", title="SGLang", prefix="sglang:",
    partitions=("dp_rank",),
    replicas=("tp_rank", "pp_rank", "moe_ep_rank"),
    extra_families=(STARTUP,),
    slo={"ttft": "sglang:time_to_first_token_seconds"},  # no per-request TPOT histogram
    # SGLang 0.5.23's default TTFT buckets (its collector; tests/fixtures/sglang-0.5.23)
    slo_edges={"ttft": (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0,
                        60.0, 80.0, 100.0, 200.0, 400.0)},
    # the tokenizer counts a request's tokens when it finishes: a long generation shows
    # as nothing, then all at once
    notes={k: "counted at request end" for k in (
        "prompt_tps", "generation_tps", "prompt_tokens", "generation_tokens")},
    sources={
        "kv_cache_usage": KV,
        "kv_used_tokens": Gauge(("sglang:kv_used_tokens", "sglang:num_used_tokens")),
        "kv_available_tokens": Gauge(("sglang:kv_available_tokens",)),
        "running": Gauge(("sglang:num_running_reqs",)),
        "waiting": Gauge(("sglang:num_queue_reqs",)),
        # SGLang retracts (and later resumes) a running request when the pool is full
        "preemptions": Increase(("sglang:num_retracted_requests_total",)),
        "prompt_tokens": Increase(PROMPT),
        "generation_tokens": Increase(GENERATION),
        "ttft_p50_s": Quantile(0.5, ("sglang:time_to_first_token_seconds",)),
        "ttft_p95_s": Quantile(0.95, ("sglang:time_to_first_token_seconds",)),
        "ttft_p99_s": Quantile(0.99, ("sglang:time_to_first_token_seconds",)),
        "itl_p95_s": Quantile(0.95, ("sglang:inter_token_latency_seconds",)),
        "e2e_p95_s": Quantile(0.95, ("sglang:e2e_request_latency_seconds",)),
        "queue_p95_s": Quantile(0.95, ("sglang:queue_time_seconds",)),
        "prefix_cache_hit_rate": Ratio(("sglang:cached_tokens_total",), PROMPT),
        "spec_drafts": Increase(VERIFY),
        "mean_acceptance_length": Ratio(GENERATION, VERIFY),
        "prompt_tps": Increase(PROMPT, per_second=True),
        "generation_tps": Increase(GENERATION, per_second=True),
        "spec_drafts_per_s": Increase(VERIFY, per_second=True),
        "generation_total": Gauge(GENERATION),
        "prompt_total": Gauge(PROMPT),
        "kv_p99": OverTime(0.99, KV),
    },
)
