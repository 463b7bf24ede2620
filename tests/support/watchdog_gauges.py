"""The agent's watchdog section as the pod's exporter publishes it (its ``pod_agent_*``
gauges, made by the agent's own code) and the console reads it back: the samples
``console.sources.collect.gpu_metrics.stop_plan`` takes."""

from __future__ import annotations

from typing import Any


def exporter_samples(wd: dict[str, Any]) -> list[tuple[str, dict[str, str], float]]:
    from prometheus_client import CollectorRegistry
    from prometheus_client.exposition import generate_latest

    from console.sources.collect.exposition import parse
    from pod_agent.exporter import watchdog_families

    class _Plan:
        def collect(self) -> Any:
            return watchdog_families(wd)

    reg = CollectorRegistry()
    reg.register(_Plan())  # type: ignore[arg-type]
    exp = parse(generate_latest(reg).decode())
    return [(n, dict(lbl), v) for n in exp.samples if n.startswith("pod_agent_")
            for lbl, v in exp.samples[n].items()]
