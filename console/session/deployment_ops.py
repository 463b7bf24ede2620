"""What the console's operations ask of today's deployment: a smoke test, a benchmark
of one slot, and a rebalanced split written back into the profile on this machine.

Each reads the deployment when it runs, never when the console started: a fallback or
a resume may have moved it to another pod, profile and address since.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    """The benchmark of one slot of today's deployment, kept under the state dir (with
    where it ran, when the pod can be read within its timeout)."""
    from console.operations.benchmark.measure import PodFacts
    from console.operations.benchmark.runner import baseline_of, bench_and_record, plans_for
    from console.sources.collect.http import HttpClient

    settings, prof, parts = dep.settings, dep.today.profile, _parts(dep)
    plan = plans_for(dep.today.name, prof, dep.targets, settings, [slot])[0]
    pod = None
    if parts.reads_the_pod:
        with contextlib.suppress(Exception):  # where it ran is worth knowing, not vital
            pod = await asyncio.wait_for(parts.pods.poll(), parts.pods.timeout_s * 2)
    client = HttpClient()
    try:
        return await bench_and_record(plan, client, PodFacts.from_pod(pod),
                                      settings.state_dir, baseline_of(prof, slot),
                                      settings.bench.regression_pct, progress)
    finally:
        await client.aclose()


async def write_back_split(dep: Deployment, values: dict[str, float]) -> str:
    """An applied gpu_util split into today's profile on this machine (a backup kept);
    what it did, said."""
    from console.config.profile_file import write_split

    return await asyncio.to_thread(write_split, dep.today.path, values,
                                   dep.settings.state_dir / "profile-backups")
