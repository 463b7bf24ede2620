"""What the console's operations ask of today's deployment: a smoke test, a benchmark
of one slot, and a rebalanced split written back into the profile on this machine.

Each reads the deployment when it runs, never when the console started: a fallback or
a resume may have moved it to another pod, profile and address since.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console.operations.benchmark.measure import PodFacts
    from console.session.deployment import Deployment, Parts


def _parts(dep: Deployment) -> Parts:
    if dep.parts is None:
        raise RuntimeError("the deployment is not wired (Deployment.wire)")
    return dep.parts


async def smoke(dep: Deployment, on_check: Callable[[Any], None]) -> Any:
    """The smoke test of today's deployment as it is now."""
    from console.operations.smoke import plan_for, run_smoke

    client = _parts(dep).poller.client
    return await run_smoke(plan_for(dep.today.profile, dep.targets, dep.settings, client),
                           client, on_check)


async def bench(dep: Deployment, slot: str, progress: Any) -> tuple[dict[str, Any], Path]:
    """The benchmark of one slot of today's deployment, kept under the state dir with
    where it ran (``pod_facts``)."""
    from console.operations.benchmark.runner import baseline_of, bench_and_record, plans_for
    from console.sources.collect.http import HttpClient

    settings, prof = dep.settings, dep.today.profile
    plan = plans_for(dep.today.name, prof, dep.targets, settings, [slot])[0]
    facts = await pod_facts(dep)
    client = HttpClient()
    try:
        return await bench_and_record(plan, client, facts,
                                      settings.state_dir, baseline_of(prof, slot),
                                      settings.bench.regression_pct, progress)
    finally:
        await client.aclose()


async def pod_facts(dep: Deployment) -> PodFacts:
    """Where a benchmark runs, all of one reading: the pod read now, or — its agent not
    answering in time (a loaded machine, a slot restarting) — the last reading of the same
    pod in which it did, the one the console shows (P2P, the GPUs and the pod do not
    change under a running pod). What is unknown says why."""
    from console.operations.benchmark.measure import PodFacts

    parts = _parts(dep)
    if not parts.reads_the_pod:
        return PodFacts.from_pod(None, "no source reads the pod (no provider, agent or "
                                       "GPU endpoint configured)")
    limit = parts.pods.timeout_s * 2
    pod, unread = None, ""
    try:
        pod = await asyncio.wait_for(parts.pods.poll(), limit)
    except TimeoutError:
        unread = f"the pod was not read within {limit:g} s"
    except Exception as exc:  # the collector says its sources' failures; anything else
        unread = f"the pod's reading failed: {type(exc).__name__}: {exc}"[:200]
    if pod is None or pod.agent_error:
        seen = dep.pod_seen()
        pod_id = pod.pod_id if pod is not None else parts.pods.pod_id
        if seen is not None and seen.pod_id == pod_id:
            pod = seen
    return PodFacts.from_pod(pod, unread)


async def write_back_split(dep: Deployment, values: dict[str, float]) -> str:
    """An applied gpu_util split into today's profile on this machine (a backup kept);
    what it did, said."""
    from console.config.profile_file import write_split

    return await asyncio.to_thread(write_split, dep.today.path, values,
                                   dep.settings.state_dir / "profile-backups")
