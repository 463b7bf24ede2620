"""Every operation, described once: its id, its key, what the footer, the help, the palette
and the confirmation say. Bindings are generated from this (``screens/main.py``); the
handlers are attached in ``console/operations/build.py``. Pure data: the first frame imports it."""

from __future__ import annotations

from console.operations.registry import ActionSpec

SPECS = {
    "refresh": ActionSpec("refresh", "ctrl+r", "Refresh", "poll every source now", False,
                          label="refresh"),
    "resume": ActionSpec(
        "resume", "r", "Resume pod", "start the stopped pod; on a capacity refusal, offer "
        "fallback provisioning", True,
        "Start pod {pod} ({profile}) and begin billing?", label="resume"),
    "fallback": ActionSpec(
        "fallback", "f", "Fallback provisioning", "create a pod on the next GPU kind in "
        "stock, in profile order, and bring every slot up", True,
        "Create a NEW pod, trying every profile in order? A failed attempt terminates "
        "its pod.", label="fallback"),
    "host_checks": ActionSpec(
        "host_checks", "h", "Host checks", "GPUs, driver CUDA, NCCL P2P probe, pidfd, disk "
        "and memory on the pod", True,
        "Run the host checks on pod {pod}? The P2P probe takes up to 90 s and rewrites "
        "NCCL_P2P_DISABLE in the pod's .env.", label="host checks"),
    "rebalance": ActionSpec(
        "rebalance", "b", "Rebalance gpu_util", "apply a new gpu_util split; the shrinking "
        "slot restarts first; a failure rolls back", True,
        "Restart slots on pod {pod} with {split}? Each restart takes the slot offline for "
        "its start-up time.", label="rebalance"),
    "ack": ActionSpec(
        "ack", "a", "Acknowledge alerts", "mark every firing alert as seen by you (audited); "
        "it stays on screen, dimmed, until it clears, and is not sent again", False,
        label="ack", audited=True),
    "smoke": ActionSpec(
        "smoke", "t", "Smoke test", "the field's eight checks through the gateway users "
        "call (else each slot): models and aliases listed, chat and streaming answer, an "
        "unknown model is a 4xx, Prometheus targets UP, the trace sink", False,
        label="smoke", audited=True, shows_progress=True),
    "bench": ActionSpec(
        "bench", "B", "Benchmark", "the field's protocol on the slot under the cursor, "
        "through the gateway users call: TTFT, TPOT, tok/s at concurrency 1 and 4, short "
        "and long inputs, speculative acceptance by task type; kept and compared with the "
        "last run", True,
        "Benchmark slot {slot} on pod {pod}? It sends {requests} streamed requests via "
        "{via} for a few minutes: users' requests to this slot slow down meanwhile.",
        label="bench", shows_progress=True, cancellable=True, per_slot=True),
    "watchdog": ActionSpec(
        "watchdog", "w", "Watchdog", "arm, disarm, or stop the pod now", True,
        "Watchdog: {cmd} on pod {pod}?", label="watchdog"),
}

