"""Every context's pod, polled for the fleet screen: one room of the session (issue 46).

A cycle runs beside the poll and never overlaps another; the collector is made on the
first cycle (it reads every context's settings and profiles: files, off the loop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from console.session.fleet import FleetCollector, FleetSnapshot

RunBlocking = Callable[..., Awaitable[Any]]
Note = Callable[[str, str], None]


class FleetPolling:
    """The fleet's last reading and the cycle that makes the next."""

    def __init__(self, *, run_blocking: RunBlocking, clock: Callable[[], float],
                 note: Note, on_change: Callable[[str], None]) -> None:
        self._run_blocking = run_blocking
        self._clock = clock
        self._note = note
        self._on_change = on_change
        self.fleet: FleetSnapshot | None = None
        self.busy = False
        self._collector: FleetCollector | None = None

    async def poll(self, config: Path | None, limit_s: float) -> FleetSnapshot | None:
        """One cycle (none while another runs: polls never overlap), at most
        ``limit_s`` long; the fleet as it stands after it."""
        if self.busy:
            return self.fleet
        self.busy = True
        try:
            if self._collector is None:
                from console.session.fleet import FleetCollector

                self._collector = await self._run_blocking(
                    FleetCollector, config=config, clock=self._clock)
            try:
                self.fleet = await asyncio.wait_for(self._collector.poll(), limit_s)
            except TimeoutError:
                self._note(f"fleet: no answer within {limit_s:g} s", "warn")
        finally:
            self.busy = False
        self._on_change("fleet")
        return self.fleet

    async def aclose(self) -> None:
        if self._collector is not None:
            await self._collector.aclose()
