"""vLLM as the console reads it: each catalog figure's source, current names first and
the older vLLM names after. Data-parallel engines carry an ``engine`` label: counters
and request gauges are summed across it; the KV usage, a fraction of each engine's own
pool, is the fullest engine's (two engines 60 % full are 60 %, not 120 %), on both
paths (``Gauge.across``)."""

from __future__ import annotations

from console.model.engines.base import Engine, Gauge, Increase, OverTime, Quantile, Ratio
from pod_agent.engines.vllm import ITL_EDGES, TTFT_EDGES

KV = Gauge(("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), across="max")
SPEC_DRAFTS = "vllm:spec_decode_num_drafts_total"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
SPEC_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
GENERATION = ("vllm:generation_tokens_total",)
PROMPT = ("vllm:prompt_tokens_total",)

VLLM = Engine(
    name="vllm", title="vLLM", prefix="vllm:",
    partitions=("engine",),
    finished=("vllm:request_success_total", "finished_reason"),
    per_position=(SPEC_PER_POS, "position"),
    cache_config="vllm:cache_config_info",
    slo={"ttft": "vllm:time_to_first_token_seconds",
         "tpot": "vllm:request_time_per_output_token_seconds"},
    # vLLM 0.32's default buckets, as the pod agent renders them (a profile's ``slo:``
    # adds its targets to them through --custom-histogram-buckets)
    slo_edges={"ttft": TTFT_EDGES, "tpot": ITL_EDGES},
    sources={
        "kv_cache_usage": KV,
        "running": Gauge(("vllm:num_requests_running",)),
        "waiting": Gauge(("vllm:num_requests_waiting",)),
        # vLLM 0.32+: why requests wait (the two sum to ``waiting``); absent on older servers
        "waiting_capacity": Gauge(("vllm:num_requests_waiting_by_reason",),
                                  where=("reason", "capacity")),
        "waiting_deferred": Gauge(("vllm:num_requests_waiting_by_reason",),
                                  where=("reason", "deferred")),
        "preemptions": Increase(("vllm:num_preemptions_total",)),
        "prompt_tokens": Increase(PROMPT),
        "generation_tokens": Increase(GENERATION),
        "ttft_p50_s": Quantile(0.5, ("vllm:time_to_first_token_seconds",)),
        "ttft_p95_s": Quantile(0.95, ("vllm:time_to_first_token_seconds",)),
        "ttft_p99_s": Quantile(0.99, ("vllm:time_to_first_token_seconds",)),
        "itl_p95_s": Quantile(0.95, ("vllm:inter_token_latency_seconds",
                                     "vllm:time_per_output_token_seconds")),
        "e2e_p95_s": Quantile(0.95, ("vllm:e2e_request_latency_seconds",)),
        "queue_p95_s": Quantile(0.95, ("vllm:request_queue_time_seconds",)),
        "prefix_cache_hit_rate": Ratio(
            ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
            ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")),
        "spec_drafts": Increase((SPEC_DRAFTS,)),
        "spec_draft_tokens": Increase((SPEC_DRAFT_TOKENS,)),
        "spec_accepted": Increase((SPEC_ACCEPTED,)),
        "acceptance_rate": Ratio((SPEC_ACCEPTED,), (SPEC_DRAFT_TOKENS,)),
        "mean_acceptance_length": Ratio((SPEC_ACCEPTED,), (SPEC_DRAFTS,), plus=1.0),
        "prefill_p95_s": Quantile(0.95, ("vllm:request_prefill_time_seconds",)),
        "decode_p95_s": Quantile(0.95, ("vllm:request_decode_time_seconds",)),
        "prompt_tps": Increase(PROMPT, per_second=True),
        "generation_tps": Increase(GENERATION, per_second=True),
        "spec_drafts_per_s": Increase((SPEC_DRAFTS,), per_second=True),
        # the counters as they stand: the stall detector asks whether they moved
        "generation_total": Gauge(GENERATION),
        "prompt_total": Gauge(PROMPT),
        "kv_p99": OverTime(0.99, KV),
    },
)
