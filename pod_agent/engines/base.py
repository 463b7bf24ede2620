"""What an engine is to the pod agent: how a slot's server is started, what its start-up
log says, which of its families tell traffic, and which package its patches apply to."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, List, Tuple

if TYPE_CHECKING:
    pass

Argv = Callable[..., List[str]]


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


