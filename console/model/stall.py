"""The stall detector: a slot that says 200 on ``/health`` while nothing decodes.

The field's most asked-about failure (vllm #39863): the engine hangs — a collective that
never returns, a kernel that never ends — and the API server keeps answering ``/health``
and ``/metrics``, with the last figures the engine reported. Requests are "running" and
nothing moves. No single reading tells it; two readings a while apart do.

A slot is **STALLED** when, for ``stall_after`` seconds, it had requests running
(``vllm:num_requests_running`` > 0) and neither its generation-token counter
(``vllm:generation_tokens_total``) nor its prompt-token counter
(``vllm:prompt_tokens_total``) moved. The prompt counter is there so that a slot busy
reading prompts (new requests prefilled, no new token out yet) is not called stalled.
The counters are the catalog's ``generation_total`` and ``prompt_total`` (the counters
as they stand), read alike from a direct scrape and from Prometheus.

vLLM 0.32 adds a request's prompt tokens to its counter only once its prefill is done
(with the first token: ``IterationStats.update_from_output``), so one prompt whose
prefill outlasts ``stall_after`` moves neither counter. Its scheduler reports its stats
every step, with or without output (``Scheduler.update_from_output``), and each prefill
chunk takes KV blocks: the KV usage gauge (the catalog's ``kv_cache_usage``) moving is
the engine stepping, and counts as progress too. An engine that hangs reports nothing,
and all three stand still.

A counter that drops has restarted (the engine did): that is a change, so progress. A
slot that is not up, or whose figures are stale (a failed scrape repeats the last good
ones), is not judged; an idle slot (nothing running) never is stalled. A slot's clock
starts at the last poll that saw it idle or saw its counters move: when it became busy
between two polls is not known, and from that poll on nothing has moved. So a stall is
said up to one refresh sooner than "busy for ``stall_after``", never later.

Data-parallel engines (vLLM's ``engine`` label, SGLang's ``dp_rank``) are judged one by
one as well as summed: one engine hung while the others decode freezes only its own
counters, and the slot's sums still move (``ModelFigures.ranks``). Any engine stalled is
the slot stalled.

Durations are monotonic seconds (``mono``: a wall clock that steps would make busy
slots STALLED, or hide a hang for an hour); ``now`` is the wall clock, for the times the
alert shows. Polls come one refresh apart give or take the timer's and the poll's own
time, so the check allows ``slack`` (the session gives half a refresh): a stall that
is due at a poll is said at that poll, not one refresh later.

:class:`StallWatch` is owned by the session (one per console); it keeps, per slot (and
engine), the counters last seen and when they last moved. Nothing here reads a clock:
``now`` and ``mono`` come with every reading.
"""

from __future__ import annotations

from collections.abc import Iterable

from msgspec import Struct

from console.model import fmt
from console.model.conditions import Condition
from console.model.snapshot import SlotSnapshot

STALL_ALERT = "stall"
"""Alert keys are ``stall:<slot>``."""


class Stall(Struct, frozen=True):
    """A slot found stalled: how many requests are stuck and since when."""

    slot: str
    running: float
    """Requests running (as the engine last reported them) that make no progress."""
    since: float
    """The last poll that saw its counters move or saw it idle (wall clock: shown)."""
    now: float
    """When it was judged (wall clock)."""
    stuck_s: float | None = None
    """Monotonic seconds since ``since`` (None: a state recorded before they were kept,
    where the wall clock's difference stands in)."""
    engine: str | None = None
    """The data-parallel engine that is hung (None: the slot's sums say it)."""

    @property
    def for_s(self) -> float:
        if self.stuck_s is not None:
            return max(0.0, self.stuck_s)
        return max(0.0, self.now - self.since)

    def condition(self) -> Condition:
        n = round(self.running)
        which = f" (engine {self.engine})" if self.engine is not None else ""
        return Condition(
            f"{STALL_ALERT}:{self.slot}", "crit",
            f"{self.slot} STALLED{which}: {n} request(s) stuck since "
            f"{fmt.clock(self.since)}",
            f"no token generated or prompt read for {fmt.duration(self.for_s)} while "
            "/health says 200 — R restarts the slot through the agent (asks first)")


class _Seen(Struct, frozen=True):
    marks: tuple[float | None, float | None, float | None]
    """(generation, prompt, KV usage) as last read."""
    moved_at: float
    """The last poll that saw them move, or saw the slot idle (wall clock)."""
    moved_m: float
    """The same poll on the monotonic clock: what the stall is counted from."""


Reading = tuple[float | None, float | None, float | None, float | None]
"""(running, generation counter, prompt counter, KV usage) of one slot at one poll."""


def counters(s: SlotSnapshot) -> Reading | None:
    """What a slot that can be judged now reads, else None: not up, stale figures, no
    figures, or neither token counter exported."""
    f = s.figures
    if s.health != "up" or s.stale_since is not None or f is None:
        return None
    gen, prompt = f.value("generation_total"), f.value("prompt_total")
    if gen is None and prompt is None:
        return None
    return f.value("running"), gen, prompt, f.value("kv_cache_usage")


def readings(s: SlotSnapshot) -> dict[str | None, Reading]:
    """Every reading a slot is judged on now: its sums (key None) and, for a
    data-parallel slot, each engine's own (key: the engine); empty when not judged."""
    total = counters(s)
    if total is None:
        return {}
    out: dict[str | None, Reading] = {None: total}
    ranks = s.figures.ranks if s.figures is not None else {}
    for rank, v in ranks.items():
        gen, prompt = v.get("generation_total"), v.get("prompt_total")
        if gen is not None or prompt is not None:
            out[rank] = (v.get("running"), gen, prompt, v.get("kv_cache_usage"))
    return out


class StallWatch:
    """Per slot and engine, the counters last seen and when they last moved (see the
    module)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str | None], _Seen] = {}
        self.stalls: dict[str, Stall] = {}
        """The slots stalled at the last :meth:`observe`."""

    def observe(self, slots: Iterable[SlotSnapshot], now: float, stall_after: float,
                mono: float | None = None, slack: float = 0.0) -> dict[str, Stall]:
        """One poll's slots; the slots stalled now (also kept in :attr:`stalls`).
        ``now``: the wall clock (shown); ``mono``: the monotonic clock, what durations
        are counted on (None: ``now`` serves as both); ``slack``: how much sooner than
        ``stall_after`` a poll may say it (the polls' own jitter)."""
        m = now if mono is None else mono
        out: dict[str, Stall] = {}
        present: set[tuple[str, str | None]] = set()
        for s in slots:
            reads = readings(s)
            if not reads:
                if s.health != "up":  # a restart begins a new record
                    for k in [k for k in self._seen if k[0] == s.slot]:
                        del self._seen[k]
                present.update(k for k in self._seen if k[0] == s.slot)
                continue  # stale or not measured: judged again when fresh
            for rank, read in reads.items():
                key = (s.slot, rank)
                present.add(key)
                running, *marks = read
                mark = (marks[0], marks[1], marks[2])
                seen = self._seen.get(key)
                busy = running is not None and running > 0
                if seen is None or not busy or seen.marks != mark:
                    # moved (a reset is a move too), idle, or first seen: the clock
                    # starts now
                    self._seen[key] = _Seen(mark, now, m)
                    continue
                stuck = m - seen.moved_m
                if stuck + slack >= stall_after:
                    st = Stall(s.slot, running or 0.0, seen.moved_at, now, stuck, rank)
                    had = out.get(s.slot)
                    # the engine stuck longest speaks for the slot; the sums (rank None)
                    # when they are as old (every engine hung)
                    if had is None or stuck > had.for_s or (
                            stuck == had.for_s and rank is None):
                        out[s.slot] = st
        for gone in set(self._seen) - present:
            del self._seen[gone]
        self.stalls = out
        return out

    def conditions(self) -> list[Condition]:
        return [st.condition() for st in self.stalls.values()]
