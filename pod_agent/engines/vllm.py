"""vLLM on the pod: ``vllm serve``, its start-up log, its traffic families."""

from __future__ import annotations

import json
import re
from typing import Dict, List

from .base import Phase, PodEngine, ServedSlot, fmt_util, with_edge


def argv(slot: ServedSlot, *, exe: str, model: str, host: str, p2p_disabled: bool) -> List[str]:
    out: List[str] = [
        exe, "serve", model,
        "--served-model-name", slot.served_model_name,
        "--host", host,
        "--port", str(slot.port),
        "--tensor-parallel-size", str(slot.tensor_parallel_size),
        "--gpu-memory-utilization", fmt_util(slot.gpu_util),
        "--max-model-len", str(slot.max_model_len),
    ]
    if slot.speculative is not None:
        spec = slot.speculative.model_dump(exclude_none=True)
        out += ["--speculative-config", json.dumps(spec, sort_keys=True, separators=(",", ":"))]
    if p2p_disabled and slot.tensor_parallel_size >= 2:
        out.append("--disable-custom-all-reduce")
    buckets = slo_buckets(slot)
    if buckets:
        out += ["--custom-histogram-buckets",
                json.dumps(buckets, sort_keys=True, separators=(",", ":"))]
    return out


TTFT_EDGES = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
              5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
"""vLLM 0.32's default TTFT buckets (``vllm/v1/metrics/buckets.py``)."""
ITL_EDGES = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
             7.5, 10.0, 20.0, 40.0, 80.0)
"""vLLM 0.32's default ``inter_token_latency`` buckets: its per-request TPOT histogram
(``request_time_per_output_token_seconds``) uses them too."""


def slo_buckets(slot: ServedSlot) -> Dict[str, List[float]]:
    """``--custom-histogram-buckets``' families for the slot's SLO targets: a family's
    list *replaces* vLLM's defaults, so each is the defaults plus the target (nothing
    where the target already is an edge, or ``add_bucket_edges`` is off)."""
    t = slot.slo
    if t is None or not t.add_bucket_edges:
        return {}
    out: Dict[str, List[float]] = {}
    for family, edges, target in (("time_to_first_token", TTFT_EDGES, t.ttft_s),
                                  ("inter_token_latency", ITL_EDGES, t.tpot_s)):
        if target is not None and target not in edges:
            out[family] = list(with_edge(edges, target))
    return out


# vLLM 0.32's own start-up lines (the worker's and the engine core's INFO lines)
PHASES = (
    Phase("downloading", re.compile(r"Downloading|Fetching \d+ files")),
    Phase("loading weights", re.compile(r"Starting to load model|Loading weights|"
                                        r"Loading safetensors|Loading model weights")),
    # not "Enforce eager set, disabling torch.compile, CUDAGraphs…": an eager start
    # compiles nothing (it says so twice, once before the weights load, once after the
    # KV cache is sized)
    Phase("compiling", re.compile(r"(?<!disabling )torch\.compile|Compiling a graph|"
                                  r"Dynamo bytecode")),
    Phase("KV-cache init", re.compile(r"GPU KV cache size|KV cache size|"
                                      r"Maximum concurrency for|num_gpu_blocks")),
    Phase("capturing CUDA graphs", re.compile(r"Capturing CUDA graph|CUDA graphs|"
                                              r"Graph capturing")),
    Phase("ready", re.compile(r"Application startup complete|Starting vLLM API server")),
)

VLLM = PodEngine(
    name="vllm", argv=argv, exe="vllm", package="vllm",
    running=("vllm:num_requests_running", "vllm:num_requests_waiting"),
    finished="vllm:request_success_total",
    managed_flags=frozenset({
        "--port", "--host", "--served-model-name", "--tensor-parallel-size", "-tp",
        "--gpu-memory-utilization", "--max-model-len", "--speculative-config", "-sc",
        "--model", "--disable-custom-all-reduce", "--api-key",
        # from the slot's ``slo:`` (its targets added to vLLM's default edges)
        "--custom-histogram-buckets"}),
    phases=PHASES,
)
