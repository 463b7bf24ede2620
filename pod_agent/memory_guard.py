"""The memory guard: below a floor of MemAvailable it stops the slot holding the most
memory (one a tick), never the host, and starts it again once the floor allows; it warns
first, near the floor. The floor is set with ``watchdog mem-floor``."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any, Dict

from . import audit, hostcheck, slots, stoppolicy
from .requests import MEM_FLOOR_MAX_GIB, Refused
from .slot_keeper import SlotKeeper
from .watchdog import WatchdogState

Warn = Callable[[Dict[str, Any], str], Awaitable[None]]


def mem_floor_problem(floor: float, avail: float | None) -> str | None:
    """Why ``floor`` would stop running slots at once: it is above what they leave free
    (MemAvailable now). None when it is a floor the host meets, or nothing is known."""
    if avail is None or floor <= avail:
        return None
    return (f"mem-floor {floor:g} GiB is above the {avail:.1f} GiB the running slots "
            f"leave free (MemAvailable): the memory guard would stop them one by one. "
            f"Choose at most {math.floor(avail * 10) / 10:g} GiB.")


class MemoryGuard:
    def __init__(self, keeper: SlotKeeper, state: WatchdogState, stopping: asyncio.Event,
                 warn: Warn) -> None:
        self.keeper = keeper
        self.state = state
        self.stopping = stopping
        self.warn = warn
        self.stopped: Dict[str, float] = {}
        """Slots the guard stopped → the GiB each held then (what it needs back)."""
        self._warned = False
        self.warning: str | None = None
        """Said while MemAvailable is near the floor."""

    def set_floor(self, floor: float) -> Dict[str, Any]:
        """The floor from now on, or :class:`Refused` when this host could never meet it
        or the running slots would be stopped at once."""
        top = min(MEM_FLOOR_MAX_GIB, hostcheck.mem_total_gib() or MEM_FLOOR_MAX_GIB)
        if not 0 <= floor <= top:  # above the host's whole memory: never met
            raise Refused(f"mem-floor needs a number of GiB from 0 to {top:.1f} (this "
                          f"host's memory), got {floor:g}")
        problem = mem_floor_problem(floor, hostcheck.mem_available_gib())
        if problem:  # the guard would stop slot after slot at its next ticks
            raise Refused(problem)
        self.state.mem_floor_gib = floor
        audit.record({"op": "watchdog", "cmd": "mem-floor", "value": floor})
        waiting = sorted(self.stopped)
        return {"mem_floor_gib": floor, "guard_stopped": waiting,
                "message": (f"{', '.join(waiting)} (stopped by the memory guard) start "
                            "again once the floor allows" if waiting else "")}

    async def tick(self, avail: float | None, now: float) -> None:
        """Below the floor, stop the slot holding the most memory (one a tick). A slot
        the guard stopped starts again once MemAvailable, less what it held, is back at
        the floor (the floor lowered, or memory freed): never sooner, or it would be
        stopped again at the next tick."""
        wd = self.state
        procs = self.keeper.procs
        for name in [n for n in self.stopped
                     if procs[n].running() or n in self.keeper.tasks]:
            del self.stopped[name]  # started again by someone else (restart)
        if avail is None:
            return
        if avail < wd.mem_floor_gib:
            pids = {n: p.running_pid() for n, p in procs.items()}
            rss = {n: slots.group_rss_kib(pid) for n, pid in pids.items() if pid is not None}
            if rss:
                biggest = max(rss, key=rss.__getitem__)
                await self.keeper.pause(biggest)
                held = rss[biggest] / 2**20
                self.stopped[biggest] = held
                procs[biggest].state.detail = (
                    f"stopped by the memory guard (it held {held:.1f} GiB); it starts again "
                    f"once MemAvailable would stay at the floor ({wd.mem_floor_gib:g} GiB) "
                    "with it back")
                wd.last_mem_action = (f"{stoppolicy.iso(now)}: MemAvailable {avail:.1f} GiB "
                                      f"< {wd.mem_floor_gib:g}: stopped {biggest}")
                audit.record({"op": "memory-guard", "slot": biggest,
                              "mem_available_gib": avail, "held_gib": round(held, 2)})
            return
        if self.stopped and not self.stopping.is_set():
            # the one that held least first: the likeliest to fit
            name = min(self.stopped, key=self.stopped.__getitem__)
            held = self.stopped[name]
            if avail - held >= wd.mem_floor_gib:
                del self.stopped[name]
                procs[name].state.detail = "started again by the memory guard"
                self.keeper.start_supervising(name)
                wd.last_mem_action = (
                    f"{stoppolicy.iso(now)}: MemAvailable {avail:.1f} GiB leaves "
                    f"{avail - held:.1f} GiB once {name} is back (floor "
                    f"{wd.mem_floor_gib:g}): restarted {name}")
                audit.record({"op": "memory-guard-restart", "slot": name,
                              "mem_available_gib": avail, "held_gib": round(held, 2),
                              "floor_gib": wd.mem_floor_gib})

    async def warn_near(self, avail: float | None) -> None:
        """Before the guard stops a slot: MemAvailable within a quarter of the floor.
        Said once until memory recovers."""
        floor = self.state.mem_floor_gib
        near = avail is not None and floor > 0 and floor <= avail < floor * 1.25
        if near and not self._warned:
            self._warned = True
            rss = {n: slots.group_rss_kib(pid) for n, p in self.keeper.procs.items()
                   if (pid := p.running_pid()) is not None}
            biggest = max(rss, key=rss.__getitem__) if rss else "none"
            self.warning = (
                f"MemAvailable {avail:.1f} GiB is near the memory guard's floor "
                f"({floor:g} GiB): below it the guard stops slot {biggest}. Free memory, "
                "or lower the floor (pod-agent watchdog mem-floor GIB).")
            await self.warn({"reason": "memory guard", "mem_available_gib": round(avail or 0, 1),
                             "floor_gib": floor, "slot": biggest}, self.warning)
        elif not near:
            self._warned = False
            self.warning = None
