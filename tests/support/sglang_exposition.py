"""SGLang 0.5.23's /metrics, produced by SGLang's own metrics code.

Run with the SGLang venv's Python (``tests/support/sglang_venv.sh``):

    /opt/sglang-venv/bin/python tests/support/sglang_exposition.py OUTDIR

It does what a running SGLang server does for its ``/metrics``: each scheduler process
makes its ``SchedulerMetricsCollector`` (labels ``model_name``, ``engine_type``,
``tp_rank``, ``pp_rank``, ``moe_ep_rank``, ``dp_rank`` as ``init_new`` builds them) and
logs ``SchedulerStats``; the tokenizer process makes its ``TokenizerMetricsCollector``
and observes finished requests; all write prometheus_client's multiprocess files under
``PROMETHEUS_MULTIPROC_DIR``, and the exposition is a ``MultiProcessCollector`` over
them (``sglang/srt/utils/common.py: add_prometheus_middleware``). Nothing is written by
hand: the values fed are in ``FED`` (and written beside the expositions, as JSON).

Two deployments, two scrapes each (``before``, then ``after`` some traffic):

- ``single``: one scheduler (tp 1, the default: only rank 0 exports), speculative on;
- ``dp2tp2``: data parallel 2 × tensor parallel 2 with
  ``--enable-metrics-for-all-schedulers``: four schedulers, the two tp ranks of each
  dp rank logging the same stats.

SGLang's package imports torchvision through its model configs (never used by the
metrics code); the CUDA torchvision wheel cannot load beside the CPU torch, so a stub
module stands in for it, in this process only.
"""

from __future__ import annotations

import importlib.machinery
import json
import multiprocessing
import os
import sys
import tempfile
import types
from pathlib import Path

MODEL = "sgl-tiny"

FED = {
    "single": {
        "schedulers": [{"dp_rank": None, "tp_rank": 0}],
        "before": {"running": [0], "queue": [0], "token_usage": [0.0],
                   "kv_used": [0], "kv_available": [100000], "retracted": [0],
                   "queue_times": [[]], "requests": []},
        "after": {"running": [3], "queue": [2], "token_usage": [0.25],
                  "kv_used": [25000], "kv_available": [75000], "retracted": [1],
                  "queue_times": [[0.01] * 8 + [0.5] * 2],
                  "requests": [{"prompt": 1000, "cached": 400, "gen": 200, "verify": 80,
                                "ttft": 0.05, "e2e": 3.0, "itl": 0.02}] * 9
                  + [{"prompt": 1000, "cached": 400, "gen": 200, "verify": 80,
                      "ttft": 1.5, "e2e": 3.0, "itl": 0.02}]},
    },
    "dp2tp2": {
        "schedulers": [{"dp_rank": 0, "tp_rank": 0}, {"dp_rank": 0, "tp_rank": 1},
                       {"dp_rank": 1, "tp_rank": 0}, {"dp_rank": 1, "tp_rank": 1}],
        # per scheduler, in the order above: the tp ranks of a dp rank log the same
        "before": {"running": [0, 0, 0, 0], "queue": [0, 0, 0, 0],
                   "token_usage": [0.0] * 4, "kv_used": [0] * 4,
                   "kv_available": [50000] * 4, "retracted": [0] * 4,
                   "queue_times": [[], [], [], []], "requests": []},
        "after": {"running": [4, 4, 2, 2], "queue": [1, 1, 0, 0],
                  "token_usage": [0.6, 0.6, 0.2, 0.2],
                  "kv_used": [30000, 30000, 10000, 10000],
                  "kv_available": [20000, 20000, 40000, 40000], "retracted": [2, 2, 0, 0],
                  "queue_times": [[0.02] * 5, [0.02] * 5, [0.3] * 5, [0.3] * 5],
                  "requests": [{"prompt": 500, "cached": 100, "gen": 50, "verify": 0,
                                "ttft": 0.1, "e2e": 1.0, "itl": 0.03}] * 20},
    },
}


def _stub_torchvision() -> None:
    class _Any(type):
        def __getattr__(cls, name: str) -> type:
            if name.startswith("__"):
                raise AttributeError(name)
            return _Any(name, (), {})

        def __call__(cls, *a: object, **k: object) -> type:
            return cls

    class _Stub(types.ModuleType):
        def __getattr__(self, name: str) -> type:
            if name.startswith("__"):
                raise AttributeError(name)
            return _Any(name, (), {})

    for name in ("torchvision", "torchvision.transforms", "torchvision.transforms.functional",
                 "torchvision.transforms.v2", "torchvision.transforms.v2.functional",
                 "torchvision.io", "torchvision.ops"):
        m = _Stub(name)
        m.__path__ = []  # type: ignore[attr-defined]
        m.__spec__ = importlib.machinery.ModuleSpec(name, None)
        m.__version__ = "0.28.0"  # type: ignore[attr-defined]
        sys.modules[name] = m


def _publish(role: str, model_dir: Path, rank: dict | None = None) -> None:
    """The process's runtime config, as SGLang's launcher publishes it (the collectors
    read the served model name and the observability flags from it)."""
    from sglang.srt import runtime_context
    from sglang.srt.server_args import ServerArgs

    args = ServerArgs(model_path=str(model_dir), served_model_name=MODEL, device="cpu",
                      enable_metrics=True, enable_metrics_for_all_schedulers=True)
    runtime_context.publish(args, role=role)


def _scheduler(model_dir: Path, rank: dict, phase: dict, i: int, first: bool) -> None:
    """One scheduler process: its collector, its stats, its retractions and queue times
    (counters and histograms get the phase's increments; the files sum them)."""
    _publish("scheduler", model_dir, rank)
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.observability.metrics_collector import (
        QueueCount,
        SchedulerMetricsCollector,
        SchedulerStats,
    )

    labels: dict[str, object] = {
        "model_name": MODEL,
        "engine_type": DisaggregationMode.to_engine_type(DisaggregationMode.NULL),
        "tp_rank": rank["tp_rank"], "pp_rank": 0, "moe_ep_rank": 0}
    if rank["dp_rank"] is not None:
        labels["dp_rank"] = rank["dp_rank"]
    c = SchedulerMetricsCollector(labels=labels, server_args=None)  # type: ignore[arg-type]
    used, avail = phase["kv_used"][i], phase["kv_available"][i]
    c.log_stats(SchedulerStats(
        num_running_reqs=QueueCount(total=phase["running"][i]),
        num_queue_reqs=QueueCount(total=phase["queue"][i]),
        token_usage=phase["token_usage"][i], full_token_usage=phase["token_usage"][i],
        num_used_tokens=used, kv_used_tokens=used, kv_available_tokens=avail))
    if phase["retracted"][i]:
        c.increment_retracted_reqs(phase["retracted"][i], 0, 0)
    for t in phase["queue_times"][i]:
        c.observe_queue_time(t)


def _tokenizer(model_dir: Path, phase: dict, first: bool) -> None:
    _publish("tokenizer", model_dir)
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.observability.metrics_collector import TokenizerMetricsCollector

    labels = {"model_name": MODEL,
              "engine_type": DisaggregationMode.to_engine_type(DisaggregationMode.NULL)}
    c = TokenizerMetricsCollector(server_args=None, labels=labels)
    if first:
        c.emit_startup_time({"load_weight": 12.5, "kv_cache_allocation": 3.25,
                             "scheduler_e2e": 31.0, "tokenizer_e2e": 33.0,
                             "cuda_graph": {"capture": 9.5}})
    for r in phase["requests"]:
        c.observe_time_to_first_token(labels, r["ttft"], stream=True)
        for _ in range(r["gen"] - 1):
            c.observe_inter_token_latency(labels, r["itl"], 1)
        c.observe_one_finished_request(
            labels, prompt_tokens=r["prompt"], generation_tokens=r["gen"],
            cached_tokens=r["cached"], e2e_latency=r["e2e"], has_grammar=False,
            cached_tokens_details={"device": r["cached"]}, spec_verify_ct=r["verify"],
            is_streaming=True)


def _run(target, *args: object) -> None:
    p = multiprocessing.get_context("fork").Process(target=target, args=args)
    p.start()
    p.join()
    if p.exitcode != 0:
        raise SystemExit(f"{target.__name__} failed: exit {p.exitcode}")


def _scrape() -> str:
    from prometheus_client import CollectorRegistry, generate_latest, multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return generate_latest(registry).decode()


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.support.tiny_model import build

    model_dir = build(Path(tempfile.mkdtemp()) / "sgl-tiny")
    for name, dep in FED.items():
        with tempfile.TemporaryDirectory() as mpdir:
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = mpdir
            for step, first in (("before", True), ("after", False)):
                phase = dep[step]
                for i, rank in enumerate(dep["schedulers"]):
                    _run(_scheduler, model_dir, rank, phase, i, first)
                _run(_tokenizer, model_dir, phase, first)
                (out / f"{name}-{step}.txt").write_text(_scrape())
    (out / "fed.json").write_text(json.dumps(FED, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    _stub_torchvision()
    main(Path(sys.argv[1]))
