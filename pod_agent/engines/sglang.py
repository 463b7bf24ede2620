"""SGLang on the pod: ``python3 -m sglang.launch_server`` with ``--enable-metrics`` (the
console reads its ``/metrics``); ``--mem-fraction-static`` is the slot's gpu_util, so
the rebalancer moves it as it moves vLLM's ``--gpu-memory-utilization``."""

from __future__ import annotations

import re
from typing import List

from .base import Phase, PodEngine, ServedSlot, fmt_util

_SPEC_ALGO = {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "EAGLE", "ngram": "NGRAM",
              "draft_model": "STANDALONE"}
"""vLLM's method names (the profile's) as SGLang's ``--speculative-algorithm``."""


def argv(slot: ServedSlot, *, exe: str, model: str, host: str, p2p_disabled: bool) -> List[str]:
    out: List[str] = [
        exe, "-m", "sglang.launch_server",
        "--model-path", model,
        "--served-model-name", slot.served_model_name,
        "--host", host,
        "--port", str(slot.port),
        "--tp-size", str(slot.tensor_parallel_size),
        "--mem-fraction-static", fmt_util(slot.gpu_util),
        "--context-length", str(slot.max_model_len),
        "--enable-metrics",
    ]
    spec = slot.speculative
    if spec is not None:
        out += ["--speculative-algorithm", _SPEC_ALGO.get(spec.method, spec.method.upper()),
                "--speculative-num-draft-tokens", str(spec.num_speculative_tokens + 1),
                "--speculative-num-steps", str(spec.num_speculative_tokens)]
        if spec.model:
            out += ["--speculative-draft-model-path", spec.model]
    if p2p_disabled and slot.tensor_parallel_size >= 2:
        out.append("--disable-custom-all-reduce")
    return out


# SGLang 0.5's start-up lines (model runner and scheduler)
PHASES = (
    Phase("downloading", re.compile(r"Downloading|Fetching \d+ files")),
    Phase("loading weights", re.compile(r"Load weight begin|Loading safetensors")),
    Phase("KV-cache init", re.compile(r"Memory pool end|KV Cache is allocated")),
    Phase("capturing CUDA graphs", re.compile(r"Capture cuda graph begin|"
                                              r"Capture CUDA graph begin")),
    Phase("ready", re.compile(r"The server is fired up and ready to roll|"
                              r"Application startup complete")),
)

SGLANG = PodEngine(
    name="sglang", argv=argv, exe="python3", package="sglang",
    running=("sglang:num_running_reqs", "sglang:num_queue_reqs"),
    finished="sglang:num_requests_total",
    managed_flags=frozenset({
        "--port", "--host", "--served-model-name", "--tp-size", "--tp",
        "--tensor-parallel-size", "--mem-fraction-static", "--context-length",
        "--model-path", "--model", "--enable-metrics", "--disable-custom-all-reduce",
        "--api-key", "--speculative-algorithm", "--speculative-num-draft-tokens",
        "--speculative-num-steps", "--speculative-draft-model-path"}),
    phases=PHASES,
)
