"""One poll of the whole deployment: slots directly, figures from Prometheus or scrapes.

Polls never overlap: a poll started while one is in flight returns the last
snapshot at once. Failures never raise; they become ``error``/``stale_since``
on the slot, with the last good figures kept so a panel never blanks.

Which pod's series Prometheus is asked for is not the poller's to keep: it reads its
selector from its deployment at every query (``prom_selector`` is a callable), so a
pod switch (:meth:`DeploymentPoller.retarget`) is followed by the very next query.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from console.model.catalog import plots
from console.model.history import History
from console.model.model_figures import ModelFigures
from console.model.printable import printable
from console.model.snapshot import DeploymentSnapshot, SlotSnapshot, Source
from console.sources.collect.exposition import Exposition
from console.sources.collect.http import HttpClient
from console.sources.collect.promql import (
    PromClient,
    PromError,
    fetch_figures,
    fetch_history,
    poll_instant,
)
from console.sources.collect.slot import (
    ScrapeWindow,
    probe_completion,
    probe_slot,
    window_figures,
)
from console.sources.collect.targets import SlotTarget

PLOTTED = tuple(f.key for f, _ in plots())
"""History keys: the catalog's plotted figures."""


def plotted_values(f: ModelFigures | None) -> dict[str, float | None]:
    if f is None:
        return dict.fromkeys(PLOTTED)
    return {key: f.value(key) for key in PLOTTED}



@dataclass(frozen=True)
class SlotRead:
    """What one slot's poll read and judged its figures over: the scrape, when the
    earlier scrape its window starts from was taken, and since when its KV readings
    count (a recording keeps these; a replay computes the same figures from them)."""

    t: float
    exposition: Exposition
    earlier: float | None
    kv_from: float | None


@dataclass(frozen=True)
class PollRead:
    """One poll's raw readings beside the snapshot made of them."""

    snapshot: DeploymentSnapshot
    slots: dict[str, SlotRead]
    """Slots whose figures came from their own scrape this poll."""
    prom_answers: dict[str, Any] | None
    """Prometheus's answers by query name, when the figures came from them."""
    window_s: float
    generation: int
    prom_at: float | None = None
    """The one instant Prometheus evaluated this poll's queries at (``poll_instant``)."""


Prefetched = tuple[dict[str, ModelFigures], dict[str, float | None]] | PromError
"""A pod's figures and KV p99 by model from the fleet's queries, or why there are none."""


def _as_source(selector: str | Callable[[], str]) -> Callable[[], str]:
    if callable(selector):
        return selector
    return lambda: selector  # a fixed reading (a test, the first frame's plan)


class DeploymentPoller:
    """Owns the HTTP client, the scrape windows and the history of one deployment."""

    def __init__(self, profile: str, targets: tuple[SlotTarget, ...], *,
                 prometheus_url: str | None = None, window_s: float = 300.0,
                 timeout_s: float = 1.5, api_key: str | None = None,
                 history: History | None = None,
                 prom_selector: str | Callable[[], str] = "",
                 probe_interval_s: float = 300.0,
                 clock: Callable[[], float] = time.time,
                 client: HttpClient | None = None) -> None:
        self.profile = profile
        self.targets = targets
        self.prometheus_url = prometheus_url
        self.window_s = window_s
        self.timeout_s = timeout_s
        self._api_key = api_key
        self.history = history or History()
        self._selector = _as_source(prom_selector)
        self.clock = clock
        self._client: HttpClient | None = client
        self._owns_client = client is None
        """A client handed in is shared (the fleet's pollers): its owner closes it."""
        self.gate: contextlib.AbstractAsyncContextManager[Any] | None = None
        """Held while this poller's completion probes run beside its polls (the fleet's
        bound on pods contacted at once); None: unbounded."""
        self._lock = asyncio.Lock()
        self._windows = {t.slot: ScrapeWindow(window_s, engine_name=t.engine) for t in targets}
        self._good: dict[str, SlotSnapshot] = {}
        self.last: DeploymentSnapshot | None = None
        self.last_read: PollRead | None = None
        """The raw readings of ``last`` (what a recording stores)."""
        self.skipped = 0
        self.probe_interval_s = probe_interval_s
        self.probe_hold: Callable[[], str | None] = lambda: None
        """Why completion probes wait now (None: they may go), asked before each one is
        started: its owner (a session, the fleet) knows the pod's stop plan."""
        self._probes: dict[str, tuple[float, bool, str]] = {}
        self._probe_task: asyncio.Task[None] | None = None
        self._generation = 0
        """Bumped by each retarget: a poll that began before it is not this pod's."""

    @property
    def prom_selector(self) -> str:
        """This pod's PromQL selector as its deployment says now (read at every query)."""
        return self._selector()

    def derive_selector(self, source: Callable[[], str]) -> None:
        """Read the selector from ``source`` from now on (a staged start's poller, built
        from a fixed reading, handed over to its deployment)."""
        self._selector = source

    def retarget(self, profile: str, targets: tuple[SlotTarget, ...]) -> None:
        """Aim this poller at other slots (a pod switch), in place: whoever holds it
        follows. The history, the client and the settings stay; what belonged to the
        old slots (scrape windows, last good figures, probe results) goes."""
        self.profile = profile
        self.targets = targets
        self._generation += 1
        self._windows = {t.slot: ScrapeWindow(self.window_s, engine_name=t.engine)
                         for t in targets}
        self._good = {}
        self._probes = {}
        self.last = None
        if self._probe_task is not None and not self._probe_task.done():
            self._probe_task.cancel()  # its answers would be about the old slots
        self._probe_task = None

    def config_key(self) -> tuple[object, ...]:
        """Everything that decides what a poll asks, where and how: equal keys, equal polls."""
        return (self.profile, self.targets, self.prometheus_url, self.window_s,
                self.timeout_s, self._api_key, self.prom_selector)

    @property
    def client(self) -> HttpClient:
        if self._client is None:
            self._client = HttpClient()  # keep-alive saves a handshake per request per poll
        return self._client

    async def aclose(self) -> None:
        if self._probe_task is not None and not self._probe_task.done():
            self._probe_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe_task
        if self._client is not None and self._owns_client:
            await self._client.aclose()
            self._client = None

    async def backfill(self, step_s: float = 15.0) -> int:
        """Fill the plots' history from Prometheus range queries; returns points added."""
        if not self.prometheus_url:
            return 0
        prom = PromClient(self.prometheus_url, self.client, self.timeout_s * 2)
        generation = self._generation
        try:
            data = await fetch_history(prom, self.history.window_s, step_s, self.window_s,
                                       self.prom_selector, end=self.clock())
        except PromError:
            return 0
        if generation != self._generation:
            return 0  # the old pod's past: the plots now follow another one
        by_model = {t.served_model_name: t.slot for t in self.targets}
        n = 0
        for (model, metric), pts in data.items():
            slot = by_model.get(model)
            if slot:
                self.history.backfill(slot, metric, pts)
                n += len(pts)
        return n

    async def poll(self, prefetched: Prefetched | None = None) -> DeploymentSnapshot:
        """One cycle. ``prefetched``: this pod's figures as the fleet's one set of
        Prometheus queries read them (``fetch_fleet``) — the poll then asks Prometheus
        nothing itself; a ``PromError`` there is this poll's Prometheus error."""
        if self._lock.locked():
            self.skipped += 1
            return self.last or DeploymentSnapshot(self.profile, ())
        async with self._lock:
            generation = self._generation
            snap = await self._poll(prefetched)
            if generation != self._generation:  # retargeted meanwhile: the old pod's
                return self.last or DeploymentSnapshot(self.profile, ())
            self.last = snap
            return snap

    def _read(self, snap: DeploymentSnapshot, reads: dict[str, SlotRead],
              answers: dict[str, Any] | None, generation: int,
              prom_at: float | None = None) -> DeploymentSnapshot:
        self.last_read = PollRead(snap, reads, answers, self.window_s, generation, prom_at)
        return snap

    def _start_completion_probes(self, now: float, targets: list[SlotTarget]) -> None:
        """Every ``probe_interval_s`` per slot at most, never on a slot that is down.

        They run beside the polls, not inside one: a real completion can take a second,
        and the figures must not wait for it. Results appear in the next snapshot."""
        if self._probe_task is not None and not self._probe_task.done():
            return
        if self.probe_hold() is not None:
            return
        due = [t for t in targets if now - self._probes.get(t.slot, (-1e18, True, ""))[0]
               >= self.probe_interval_s]
        if due:
            self._probe_task = asyncio.get_running_loop().create_task(self._probe(now, due))

    async def _probe(self, now: float, due: list[SlotTarget]) -> None:
        probes = self._probes  # a retarget meanwhile starts a new table
        async with self.gate or contextlib.nullcontext():
            results = await asyncio.gather(*(probe_completion(self.client, t, self.timeout_s,
                                                              self._api_key) for t in due))
        for t, (ok, detail) in zip(due, results, strict=True):
            probes[t.slot] = (now, ok, detail)

    async def probes_done(self) -> None:
        """Wait for the completion probes in flight (one-shot commands and tests)."""
        if self._probe_task is not None:
            with contextlib.suppress(asyncio.CancelledError):  # cancelled by a retarget
                await asyncio.shield(self._probe_task)

    async def _poll(self, prefetched: Prefetched | None = None) -> DeploymentSnapshot:
        t0 = time.perf_counter()
        now = self.clock()
        # this poll's pod: a retarget while it runs does not mix the two pods' state
        generation, targets = self._generation, self.targets
        windows, good_by_slot, probed = self._windows, self._good, self._probes
        prom_err = None
        prom_figs: dict[str, ModelFigures] | None = None
        kv99: dict[str, float | None] = {}
        use_prom = bool(self.prometheus_url)
        probes_task = asyncio.gather(*(
            probe_slot(self.client, t, self.timeout_s, self._api_key, metrics=not use_prom,
                       memo=windows[t.slot].memo)
            for t in targets))
        if use_prom and prefetched is not None:
            if isinstance(prefetched, PromError):
                prom_err = str(prefetched)
            else:
                prom_figs, kv99 = prefetched
        answers: dict[str, Any] | None = None
        prom_at: float | None = None
        if use_prom and prefetched is None:
            prom = PromClient(self.prometheus_url or "", self.client, self.timeout_s)
            answers = {}
            try:
                # one instant for every query of the poll, kept with its answers
                prom_at = await poll_instant(prom)
                prom_figs, kv99 = await fetch_figures(prom, self.window_s, self.prom_selector,
                                                      at=prom_at, answers=answers)
            except PromError as exc:
                prom_err = str(exc)
                answers = None
        probes = await probes_task
        if generation == self._generation:
            self._start_completion_probes(now, [p.target for p in probes if p.health == "up"])
        if use_prom and prom_figs is None:
            # Prometheus is down: fall back to scraping the slots in this same cycle.
            probes = await asyncio.gather(*(
                probe_slot(self.client, t, self.timeout_s, self._api_key, metrics=True,
                           memo=windows[t.slot].memo)
                for t in targets))
        slots = []
        reads: dict[str, SlotRead] = {}
        for probe in probes:
            tgt = probe.target
            model = tgt.served_model_name
            figs: ModelFigures | None = None
            kv_p99 = None
            source: Source = "none"
            if prom_figs is not None:
                figs, kv_p99, source = prom_figs.get(model), kv99.get(model), "prometheus"
            elif probe.exposition is not None:
                win = windows[tgt.slot]
                win.add(probe.t, probe.exposition, model)
                earlier = win.earlier(probe.t)
                figs, kv_p99, source = (window_figures(probe.t, probe.exposition, earlier,
                                                       model, win.engine),
                                        win.kv_p99(), "direct")
                reads[tgt.slot] = SlotRead(probe.t, probe.exposition,
                                           None if earlier is None else earlier[0], win.kv_from)
            error = probe.error
            if figs is None and error is None and probe.health == "up":
                error = f"no metrics for model_name={model}"
            pr = probed.get(tgt.slot)
            snap = SlotSnapshot(
                slot=tgt.slot, served_model_name=model, port=tgt.port, url=tgt.base_url,
                health=probe.health,
                health_detail=probe.health_detail, served_models=probe.served_models,
                figures=figs, kv_p99=kv_p99, source=source,
                fetched_at=now, error=error,
                probe_ok=pr[1] if pr else None, probe_detail=pr[2] if pr else "",
                probe_at=pr[0] if pr else None, engine=tgt.engine)
            if figs is not None:
                good_by_slot[tgt.slot] = snap
                if generation == self._generation:  # the old pod's, after a switch: not
                    for metric, value in plotted_values(figs).items():  # the plots'
                        self.history.add(tgt.slot, metric, now, value)
            else:
                good = good_by_slot.get(tgt.slot)
                if good is not None:
                    snap = replace(snap, figures=good.figures, kv_p99=good.kv_p99,
                                   source=good.source, stale_since=good.fetched_at)
            slots.append(snap)
        return self._read(DeploymentSnapshot(
            profile=self.profile, slots=tuple(slots), fetched_at=now,
            prometheus_url=self.prometheus_url,
            prometheus_error=None if prom_err is None else printable(prom_err, 300),
            cycle_s=time.perf_counter() - t0), reads,
            answers if prom_figs is not None else None, generation, prom_at)
