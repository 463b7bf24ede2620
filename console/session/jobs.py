"""The jobs a session runs beside its poll (a poll, a fleet cycle, a webhook, the
ledger's check): one room of the session (issue 46). The app passes its workers
(``spawn``); without them each job is a task of the running loop, kept here until it
ends so that :meth:`Jobs.settle` can wait for them and :meth:`Jobs.cancel` end them. A
job that fails is said in the action log, never silently dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

Spawn = Callable[[Coroutine[Any, Any, Any], str], object]
"""How a job runs beside the poll: (coroutine, group). The app passes its workers."""
Note = Callable[[str, str], None]


class Jobs:
    """One session's jobs beside the poll (see the module docstring)."""

    def __init__(self, spawn: Spawn | None, note: Note) -> None:
        self._spawn = spawn
        self._note = note
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, job: Coroutine[Any, Any, Any], group: str) -> None:
        if self._spawn is not None:
            self._spawn(job, group)
            return
        task = asyncio.get_running_loop().create_task(job, name=group)
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self._note(f"{task.get_name()} failed: {type(exc).__name__}: {exc}"[:200],
                       "crit")

    async def settle(self) -> None:
        """Wait for the jobs started here (default spawner only)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
