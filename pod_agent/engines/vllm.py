"""vLLM on the pod: ``vllm serve``, its start-up log, its traffic families."""

from __future__ import annotations

import json
import re
from typing import List

from .base import Phase, PodEngine, ServedSlot, fmt_util


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
        "--model", "--disable-custom-all-reduce", "--api-key"}),
    phases=PHASES,
)
