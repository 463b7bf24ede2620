"""A data-parallel vLLM slot's ``/metrics``, built from the real vLLM 0.32 capture.

vLLM labels every series of an engine core with ``engine="<index>"``; with
``--data-parallel-size 2`` one API server exports both cores' series side by side
(``engine="0"`` and ``engine="1"``). The CPU server here runs one core, so the capture
(``tests/fixtures/vllm-0.32.0-cpu``) has ``engine="0"`` only: each of its ``vllm:``
samples is repeated for the second core with ``engine="1"``, and the four series the
stall detector reads (requests running, the two token counters, KV usage) get each
core's own value. Everything else (help, types, histograms) is the capture's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from tests.conftest import FIXTURES

CAPTURE = FIXTURES / "vllm-0.32.0-cpu" / "ngram" / "metrics-specdecode-after-basic-load.txt"
MODEL = "tiny-main"


@dataclass(frozen=True)
class Core:
    """One engine core's stall readings."""

    running: float
    generated: float
    prompted: float
    kv: float = 0.25


_SET = {"vllm:num_requests_running": "running", "vllm:generation_tokens_total": "generated",
        "vllm:prompt_tokens_total": "prompted", "vllm:kv_cache_usage_perc": "kv"}
_SAMPLE = re.compile(r'^(vllm:[^{\s]+)\{(.*)engine="0"(.*)\} (\S+)$')


def exposition(cores: Mapping[str, Core]) -> str:
    """The capture with one set of series per core (``cores``: engine index → its
    readings)."""
    out = []
    for line in CAPTURE.read_text().splitlines():
        m = _SAMPLE.match(line)
        if m is None:
            out.append(line)
            continue
        name, before, after, value = m.groups()
        for idx, core in cores.items():
            field = _SET.get(name)
            v = getattr(core, field) if field is not None else value
            out.append(f'{name}{{{before}engine="{idx}"{after}}} {v}')
    return "\n".join(out) + "\n"
