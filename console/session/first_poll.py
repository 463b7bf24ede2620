"""A staged start's first poll, begun in a thread before the UI loads.

Why: ``watch`` and ``wall`` know which slots to poll as soon as the boot plan is read
(``boot.py``), a few milliseconds in; Textual and the screens then take most of the
start-up to import and build. The first poll's requests wait on other processes (the
slots, Prometheus), so they run in a thread of their own meanwhile, on an event loop of
their own, and the session's first poll takes their snapshot instead of asking again
(``PollCycle``): one poll, one snapshot, shown as soon as the first screen is up.

Polls still never overlap: the session's first poll awaits this one (and nothing else
touches the poller until it has ended); the next poll starts after it, on the app's
loop. A failure of this poll is raised by :meth:`FirstPoll.result`, where the session
takes it as it takes any poll's. Completion probes are held, as at every poll of a
staged start (``Pacing.probe_hold``: the pod's state is not read yet), and the thread
closes the connections it opened: they belong to its own loop.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING

from console.model.pod_stop import PROBE_WAITS_FOR_POD

if TYPE_CHECKING:
    from console.model.snapshot import DeploymentSnapshot
    from console.sources.collect.poller import DeploymentPoller


class FirstPoll:
    """One poll of ``poller``, started at once in a thread (see the module docstring)."""

    def __init__(self, poller: DeploymentPoller) -> None:
        self.poller = poller
        self._future: Future[DeploymentSnapshot] = Future()
        # running from the start: a session that stops waiting (quitting) cannot cancel
        # it, so the thread's answer always has a place to land
        self._future.set_running_or_notify_cancel()
        self._thread = threading.Thread(target=self._run, name="first-poll", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            snapshot = asyncio.run(self._poll())
        except BaseException as exc:  # the session's poll raises it, as its own failure
            self._future.set_exception(exc)
        else:
            self._future.set_result(snapshot)

    async def _poll(self) -> DeploymentSnapshot:
        poller = self.poller
        poller.probe_hold = lambda: PROBE_WAITS_FOR_POD
        try:
            return await poller.poll()
        finally:
            await poller.aclose()  # a new client on the app's loop polls next

    async def result(self) -> DeploymentSnapshot:
        """The poll's snapshot once it has ended (its exception, if it failed)."""
        return await asyncio.wrap_future(self._future)

    async def ended(self) -> None:
        """Wait for the thread to be done with the poller, whatever the poll's outcome
        (a console quitting before its first poll was taken: nothing shows it now)."""
        done = asyncio.wrap_future(self._future)
        await asyncio.wait((done,))
        if not done.cancelled():
            done.exception()  # seen: never "exception was never retrieved" at exit
