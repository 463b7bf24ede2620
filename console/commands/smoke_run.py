"""The smoke test of a configuration's deployment: what ``pod-console smoke`` runs and what
``pod-console up`` runs last. Its own module so that ``verify_cmd`` and ``pod_cmd``, which
both run it, need not import each other."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console.config.settings import Settings
    from console.operations.smoke import SmokeReport


async def smoke_for_settings(settings: Settings,
                             on_check: Callable[[Any], None] | None = None) -> SmokeReport:
    """The smoke test of the settings' deployment (today's profile, the pod's address)."""
    from console.operations.smoke import plan_for, run_smoke
    from console.session.deployment import open_deployment
    from console.sources.collect.http import HttpClient

    dep = open_deployment(settings)
    client = HttpClient()
    try:
        return await run_smoke(plan_for(dep.today.profile, dep.targets, settings, client), client,
                               on_check)
    finally:
        await client.aclose()
