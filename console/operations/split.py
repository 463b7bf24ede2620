"""A gpu_util split's change said as a person says it: which slots move, the order they
restart in (the shrinking one first), "no change" when nothing moves, and the agent's end
of a rebalance, never a Python dict. Shared by the planner, the editor and the operation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CHANGE_EPS = 1e-9


def changes(current: Mapping[str, float], new: Mapping[str, float]) -> dict[str, float]:
    """The slots whose gpu_util ``new`` changes (a value equal to the running one is none)."""
    return {n: float(u) for n, u in new.items()
            if abs(float(u) - float(current.get(n, u))) > CHANGE_EPS}


def restart_order(current: Mapping[str, float], new: Mapping[str, float]) -> list[str]:
    """The slots that restart, in the agent's order: the shrinking one first (the growing
    one needs the memory it frees)."""
    moved = changes(current, new)
    return sorted(moved, key=lambda n: moved[n] - float(current.get(n, 0.0)))


def plan_words(current: Mapping[str, float], new: Mapping[str, float]) -> str:
    """What applying ``new`` does, as a person says it: "no change" when nothing moves;
    else each slot's move and the order they restart in."""
    order = restart_order(current, new)
    if not order:
        return "no change: this is the split running now (nothing to apply, no restart)"
    moves = ", ".join(f"{n} {float(current[n]):.2f} → {float(new[n]):.2f}"
                      f" ({'shrinks' if new[n] < current[n] else 'grows'})" for n in order)
    kept = [n for n in new if n not in order]
    return (f"{moves}; restarts {' then '.join(order)}"
            + (f"; {', '.join(kept)} keep{'s' if len(kept) == 1 else ''} running" if kept
               else ""))


def result_words(final: Mapping[str, Any]) -> str:
    """The agent's end of a rebalance in words, never its dict."""
    changed = final.get("changed") or {}
    if not isinstance(changed, Mapping) or not changed:
        return "no change: the pod already runs this split; nothing restarted"
    took = final.get("startup_s") or {}
    return "applied: " + ", ".join(
        f"{n} now at {float(u):.2f}" + (f" (back up in {float(took[n]):.0f} s)"
                                        if isinstance(took, Mapping) and took.get(n) else "")
        for n, u in changed.items())
