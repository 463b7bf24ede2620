"""What an engine is to the pod agent: how a slot's server is started, what its start-up
log says, which of its families tell traffic, and which package its patches apply to."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Protocol, Tuple


class DraftSpec(Protocol):
    """A slot's speculative decoding as an engine's command line reads it (the profile's
    ``Speculative``)."""

    @property
    def method(self) -> str: ...
    @property
    def num_speculative_tokens(self) -> int: ...
    @property
    def model(self) -> str | None: ...
    def model_dump(self, *, exclude_none: bool = ...) -> Dict[str, Any]: ...


class LatencyTargets(Protocol):
    """A slot's SLO targets as a command line reads them (the profile's ``SlotSlo``)."""

    @property
    def ttft_s(self) -> float | None: ...
    @property
    def tpot_s(self) -> float | None: ...
    @property
    def add_bucket_edges(self) -> bool: ...


def with_edge(edges: Tuple[float, ...], target: float | None) -> Tuple[float, ...]:
    """``edges`` with ``target`` among them, in order (once): a bucket list a slot's SLO
    target is added to (``--custom-histogram-buckets``)."""
    if target is None or target in edges:
        return edges
    return tuple(sorted((*edges, float(target))))


class ServedSlot(Protocol):
    """A slot as an engine's command line reads it: the profile's ``Slot``, described here
    rather than imported, because the profile imports the engines (their managed flags)."""

    @property
    def served_model_name(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def tensor_parallel_size(self) -> int: ...
    @property
    def gpu_util(self) -> float: ...
    @property
    def max_model_len(self) -> int: ...
    @property
    def speculative(self) -> DraftSpec | None: ...
    @property
    def slo(self) -> LatencyTargets | None: ...


class Argv(Protocol):
    """``argv(slot, exe=, model=, host=, p2p_disabled=)``: a slot's server command line
    (typed, so that a call with the profile's ``Slot`` is checked against ``ServedSlot``)."""

    def __call__(self, slot: ServedSlot, *, exe: str, model: str, host: str,
                 p2p_disabled: bool) -> List[str]: ...


@dataclass(frozen=True)
class Phase:
    """A start-up phase, entered when a log line matches ``pattern``."""

    name: str
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class PodEngine:
    name: str
    argv: Argv
    """``argv(slot, exe=, model=, host=, p2p_disabled=)`` → the server's command line."""
    exe: str
    """The executable the command starts by default (``vllm``, ``python3``)."""
    package: str
    """The Python package the profile's patches apply to (its site root)."""
    running: Tuple[str, ...]
    """Families whose sum says requests are in flight (running and waiting)."""
    finished: str
    """Counter of finished requests (traffic since the last read)."""
    managed_flags: frozenset
    """Flags set from the slot's typed fields (not allowed in ``extra_args``)."""
    phases: Tuple[Phase, ...] = ()
    """Start-up phases in the order they happen, told by log lines."""

    def phase_of(self, line: str) -> str | None:
        """The phase a log line begins, if any (the last pattern that matches wins)."""
        found = None
        for ph in self.phases:
            if ph.pattern.search(line):
                found = ph.name
        return found


def fmt_util(u: float) -> str:
    # repr keeps 0.76 as "0.76" and never prints 0.7600000000000001 for a parsed literal
    return repr(round(u, 4))




class PhaseClock:
    """Which start-up phase a slot is in and the time spent in each, from its log
    lines (the engine's ``phases``); the last finished start's times are kept."""

    def __init__(self, engine: PodEngine) -> None:
        self.engine = engine
        self.entered: List[Tuple[str, float]] = []
        """(phase, when entered) of the start under way, in order."""
        self.ended_at: float | None = None
        self.last: List[Tuple[str, float]] = []
        """(phase, seconds) of the last start that reached ready."""

    def start(self, now: float) -> None:
        self.entered = [("starting", now)]
        self.ended_at = None

    def line(self, text: str, now: float) -> None:
        if not self.entered or self.ended_at is not None:
            return
        ph = self.engine.phase_of(text)
        if ph is not None and ph != self.entered[-1][0]:
            if ph == "ready":
                self.ready(now)
            else:
                self.entered.append((ph, now))

    def ready(self, now: float) -> None:
        """The server answers: the start is over, its times kept as the last start's."""
        if not self.entered or self.ended_at is not None:
            return
        self.ended_at = now
        self.last = self.times(now)

    @property
    def current(self) -> str | None:
        if not self.entered:
            return None
        return "ready" if self.ended_at is not None else self.entered[-1][0]

    def times(self, now: float) -> List[Tuple[str, float]]:
        """(phase, seconds) of the start under way (or just ended), the current phase's
        seconds so far."""
        out: List[Tuple[str, float]] = []
        end = self.ended_at if self.ended_at is not None else now
        for i, (ph, t0) in enumerate(self.entered):
            t1 = self.entered[i + 1][1] if i + 1 < len(self.entered) else end
            out.append((ph, round(max(0.0, t1 - t0), 1)))
        return out
