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
from collections import deque
from collections.abc import Callable
from typing import Any

from msgspec import Struct
from msgspec.structs import replace

from console.model.catalog import plots
from console.model.history import History
from console.model.model_figures import ModelFigures
from console.model.pod_stop import slots_in_use
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
PROBE_RETRY_S = 5.0
"""After a failed completion probe the next one comes this soon, doubling with each
failure in a row (up to ``probe_interval_s``): one timeout is not yet a broken slot."""
PROBE_CONFIRM = 2
"""Failures in a row before a probe's failure is said (``probe_ok`` False)."""
PROBE_WARMUP_S = 120.0
"""A slot seen coming up (again) is warming up this long (torch.compile, the first CUDA
graphs): its probe failures meanwhile are retried, never said. At a real vLLM start a
first probe timed out during warm-up and its CRIT stood for the 5 minutes to the next
probe, while the server answered in 0.1 s."""


def plotted_values(f: ModelFigures | None) -> dict[str, float | None]:
    if f is None:
        return dict.fromkeys(PLOTTED)
    return {key: f.value(key) for key in PLOTTED}



class SlotRead(Struct, frozen=True):
    """What one slot's poll read and judged its figures over: the scrape, when the
    earlier scrape its window starts from was taken, and since when its KV readings
    count (a recording keeps these; a replay computes the same figures from them)."""

    t: float
    exposition: Exposition
    earlier: float | None
    kv_from: float | None


class PollRead(Struct, frozen=True):
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


class ProbeResult(Struct, frozen=True):
    """A slot's last completion probe, and how many in a row have failed."""

    at: float
    ok: bool
    detail: str
    fails: int = 0
    """Failures in a row, this one included (0 when it went through)."""


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
        self._probes: dict[str, ProbeResult] = {}
        self._up: dict[str, bool] = {}
        """Each slot's health at the last poll (up or not)."""
        self._up_since: dict[str, float] = {}
        """When a slot was last seen coming up; absent when it was up from the first poll
        (not seen starting: no warm-up assumed). A probe older than this is of the slot
        before it went down (a restart's), and says nothing of it now."""
        self._sent: dict[str, deque[float]] = {}
        """When this poller's own probes went to each slot (the slots' request counters
        count them: ``own_probes``)."""
        self._served: dict[str, tuple[float, float]] = {}
        """Slot → (when, its finished-requests counter then), from its last own scrape."""
        self._unseen: dict[str, deque[float]] = {}
        """Slot → when each of this poller's probes went that its counter has not shown
        yet: each accounts for one finished request, once."""
        self._busy: dict[str, bool] = {}
        """Slot → whether its last own scrape showed requests not this poller's: some
        running or waiting, or finished since the scrape before (``in_use``)."""
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
        self._up, self._up_since, self._sent = {}, {}, {}
        self._served, self._busy, self._unseen = {}, {}, {}
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

    def _probe_due(self, slot: str, now: float) -> bool:
        """A slot's probe is due: never probed, or probed before it last came up, or
        its interval passed — after a failure the interval is the retry's backoff."""
        last = self._probes.get(slot)
        if last is None or last.at < self._up_since.get(slot, -1e18):
            return True
        wait = self.probe_interval_s if last.ok else min(
            self.probe_interval_s, PROBE_RETRY_S * 2 ** (last.fails - 1))
        return now - last.at >= wait

    def _start_completion_probes(self, now: float, targets: list[SlotTarget]) -> None:
        """Every ``probe_interval_s`` per slot at most (sooner after a failure), never on
        a slot that is down.

        They run beside the polls, not inside one: a real completion can take a second,
        and the figures must not wait for it. Results appear in the next snapshot."""
        if self._probe_task is not None and not self._probe_task.done():
            return
        if self.probe_hold() is not None:
            return
        due = [t for t in targets if self._probe_due(t.slot, now)]
        if due:
            for t in due:
                self._sent.setdefault(t.slot, deque(maxlen=64)).append(now)
                self._unseen.setdefault(t.slot, deque(maxlen=64)).append(now)
            self._probe_task = asyncio.get_running_loop().create_task(self._probe(now, due))

    async def _probe(self, now: float, due: list[SlotTarget]) -> None:
        probes = self._probes  # a retarget meanwhile starts a new table
        async with self.gate or contextlib.nullcontext():
            results = await asyncio.gather(*(probe_completion(self.client, t, self.timeout_s,
                                                              self._api_key) for t in due))
        for t, (ok, detail) in zip(due, results, strict=True):
            last = probes.get(t.slot)
            fails = 0 if ok else (last.fails if last is not None and
                                  last.at >= self._up_since.get(t.slot, -1e18) else 0) + 1
            probes[t.slot] = ProbeResult(now, ok, detail, fails)

    def shift(self, by: float) -> None:
        """The wall clock stepped ``by`` seconds: the times kept here to count on from
        (each slot's last probe and its interval, when it came up, this poller's own
        probes) move with it, so the seconds since them stay the monotonic ones. A step
        back of an hour would otherwise hold every probe for the hour (a broken
        completion path unsaid), a step forward send them all at once."""
        self._probes = {k: replace(p, at=p.at + by) for k, p in self._probes.items()}
        self._up_since = {k: t + by for k, t in self._up_since.items()}
        self._sent = {k: deque((t + by for t in d), maxlen=d.maxlen)
                      for k, d in self._sent.items()}
        self._unseen = {k: deque((t + by for t in d), maxlen=d.maxlen)
                        for k, d in self._unseen.items()}
        self._served = {k: (t + by, v) for k, (t, v) in self._served.items()}

    def probe_verdict(self, slot: str) -> tuple[bool | None, str, float | None]:
        """(ok, detail, at) of a slot's probes as a snapshot says them: a failure only
        once confirmed (``PROBE_CONFIRM`` in a row, the last after the slot's warm-up);
        before that None ("not yet"), the detail saying that it is being retried."""
        pr = self._probes.get(slot)
        up = self._up_since.get(slot)
        if pr is None or (up is not None and pr.at < up):
            return None, "", None
        if pr.ok:
            return True, pr.detail, pr.at
        warm = up is not None and pr.at - up < PROBE_WARMUP_S
        if pr.fails >= PROBE_CONFIRM and not warm:
            return False, pr.detail, pr.at
        return None, f"retrying ({pr.detail})", pr.at

    def own_probes(self, since: float) -> dict[str, int]:
        """Slot → how many of this poller's completion probes went to it since then."""
        return {slot: sum(1 for t in sent if t >= since) for slot, sent in self._sent.items()}

    def in_use(self, slack_s: float) -> bool | None:
        """Whether others' requests run on the slots now — what the pod's idle count
        resets on — with this poller's own probes discounted. From the slots' own
        counters between their last two scrapes where the poll scraped them (the
        figures' window would lag by its length: a minute of "in use" after the last
        request, probing all the while, would keep the pod up), else
        ``pod_stop.slots_in_use`` over the figures' window widened by ``slack_s``."""
        if self._busy:
            return any(self._busy.values())
        snap = self.last
        if snap is None:
            return None
        return slots_in_use(snap.slots, self.own_probes(
            snap.fetched_at - self.window_s - slack_s))

    def _saw_requests(self, slot: str, t: float, exp: Exposition, model: str,
                      eng: Any) -> bool | None:
        """Whether a scrape shows anyone's requests but this poller's probes (None: its
        engine counts no finished requests)."""
        if eng.finished is None:
            return None
        rows = exp.by_label(eng.finished[0], "model_name").get(model, ())
        total = sum(v for _, v in rows if v == v)
        running = 0.0
        for key in ("running", "waiting"):
            src = eng.sources.get(key)
            for name in getattr(src, "names", ()):
                vals = exp.by_label(name, "model_name").get(model, ())
                if vals:
                    running += sum(v for _, v in vals if v == v)
                    break
        prev = self._served.get(slot)
        self._served[slot] = (t, total)
        # a probe shows in the counter once it ends, within its timeout; one that never
        # does (it failed) stops being expected after twice that
        slack = self.timeout_s + 1.0
        unseen = self._unseen.setdefault(slot, deque(maxlen=64))
        while unseen and unseen[0] < t - 2 * slack:
            unseen.popleft()
        foreign = 0.0
        if prev is not None and total >= prev[1]:
            moved = total - prev[1]
            while unseen and moved >= 1.0:  # ours, each counted once
                unseen.popleft()
                moved -= 1.0
            foreign = moved
        # one request finished between two scrapes, and none running, may be another
        # viewer's probe (a second wall, a console): taken for use, it would make this
        # one probe, and that one's probe the other's "use" in turn, pod kept up by two
        # viewers; somebody's real requests run, or come more than one at a time
        busy = foreign > 1.5 or running > len(unseen) + 0.5
        return busy

    def _saw_health(self, probes: list[Any], now: float) -> None:
        """Note each slot's health; a slot seen coming up starts its warm-up."""
        for p in probes:
            up = p.health == "up"
            was = self._up.get(p.target.slot)
            if up and was is False:
                self._up_since[p.target.slot] = now
            self._up[p.target.slot] = up

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
            self._saw_health(probes, now)
            self._start_completion_probes(now, [p.target for p in probes if p.health == "up"])
        if use_prom and prom_figs is None:
            # Prometheus is down: fall back to scraping the slots in this same cycle.
            probes = await asyncio.gather(*(
                probe_slot(self.client, t, self.timeout_s, self._api_key, metrics=True,
                           memo=windows[t.slot].memo)
                for t in targets))
        slots = []
        reads: dict[str, SlotRead] = {}
        busy_now: dict[str, bool] = {}
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
                win.add(probe.t, probe.exposition, model, probe.m)
                earlier = win.earlier(probe.t)
                figs, kv_p99, source = (window_figures(probe.t, probe.exposition, earlier,
                                                       model, win.engine),
                                        win.kv_p99(), "direct")
                reads[tgt.slot] = SlotRead(probe.t, probe.exposition,
                                           None if earlier is None else earlier[0], win.kv_from)
                if generation == self._generation:
                    # on this poller's clock, the one its probes' times are on
                    busy = self._saw_requests(tgt.slot, now, probe.exposition, model,
                                              win.engine)
                    if busy is not None:
                        busy_now[tgt.slot] = busy
            error = probe.error
            if figs is None and error is None and probe.health == "up":
                error = f"no metrics for model_name={model}"
            pr = self.probe_verdict(tgt.slot) if probed is self._probes else (None, "", None)
            snap = SlotSnapshot(
                slot=tgt.slot, served_model_name=model, port=tgt.port, url=tgt.base_url,
                health=probe.health,
                health_detail=probe.health_detail, served_models=probe.served_models,
                figures=figs, kv_p99=kv_p99, source=source,
                fetched_at=now, error=error,
                probe_ok=pr[0], probe_detail=pr[1], probe_at=pr[2], engine=tgt.engine)
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
        if generation == self._generation:
            self._busy = busy_now  # this poll's: none when Prometheus gave the figures
        return self._read(DeploymentSnapshot(
            profile=self.profile, slots=tuple(slots), fetched_at=now,
            prometheus_url=self.prometheus_url,
            prometheus_error=None if prom_err is None else printable(prom_err, 300),
            cycle_s=time.perf_counter() - t0), reads,
            answers if prom_figs is not None else None, generation, prom_at)
