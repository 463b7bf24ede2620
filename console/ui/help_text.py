"""What each screen's help (``?``) teaches beyond its keys: every state word and column of
that screen, and the thresholds as the values in force (``TTFT p95 above 2 s``), never a
config key. Plain data (sections of (word, meaning)); ``HelpScreen`` draws it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from textual.binding import Binding

from console.model import catalog, fmt, slo, startup

Section = tuple[str, list[tuple[str, str]]]
"""(title, [(word or column, what it means)])."""

SLOT_STATES: list[tuple[str, str]] = [
    ("● UP", "answers /health and its figures are read"),
    ("✖ DOWN", "does not answer /health (its alert says why: refused, timeout…)"),
    ("◐ START", "the pod agent is starting it; no phase read from its log yet"),
    ("■ STALLED", "answers /health, but requests run and no token comes"),
    ("▲ PROBE✗", "answers /health, but a one-token completion failed"),
    ("▲ UP HOT", "up, on a GPU slowed down by heat (see g for its temperature)"),
    ("✖ XID 79", "a GPU it runs on had a hardware fault (Xid 79: fell off the bus; also "
                "ECC, REMAP); restart the pod, not the slot"),
    ("STALE", "the last read failed: figures shown dim are the last good ones"),
]
PHASE_WORDS = {"START": "started, nothing read yet", "DL": "downloading the weights",
               "LOAD": "loading the weights onto the GPUs", "COMP": "compiling (torch.compile)",
               "GRAPH": "capturing CUDA graphs", "KV": "setting up the KV cache",
               "READY": "ready: the first /health answers next"}

STATE_COLUMNS_HELP: list[tuple[str, str]] = [
    ("SLOT", "the slot's name in the profile"), ("MODEL", "the model name it serves"),
    ("PORT", "its port on the pod"),
    ("GPU", "the GPUs it runs on (their index, as in g)"),
    ("UTIL", "gpu_memory_utilization: the share of each of its GPUs' memory vLLM may take "
             "(b rebalances it)"),
    ("HEALTH", "its state, one word (below)"),
]

GPU_COLUMNS_HELP: list[tuple[str, str]] = [
    ("GPU", "the GPU's index"), ("state", "ok, or what is wrong with it (below)"),
    ("name", "the GPU's model"), ("util", "share of time a kernel ran"),
    ("memory GiB", "used / total"), ("temp", "°C now / where it slows down by heat"),
    ("power W", "draw / its limit"), ("SM MHz", "clock now / its maximum"),
    ("throttled", "why the clock is held down (thermal, power cap…), or no"),
    ("ECC sbe/dbe", "memory errors since the driver loaded: single-bit (corrected) / "
                    "double-bit (not corrected: the GPU needs a reset)"),
    ("remap", "row remapping: ok, pending (a reset applies it) or FAILED (replace it)"),
    ("NVLink", "links up / links"),
]
GPU_STATES: list[tuple[str, str]] = [
    ("ok", "nothing wrong"), ("HOT", "slowed down by heat (throttled: thermal)"),
    ("XID 79", "a hardware fault the driver reported (the Xid number; its advice is "
               "in the list below the table)"),
    ("ECC", "double-bit memory errors"), ("REMAP", "row remapping failed"),
]


DETAIL_WORDS: list[tuple[str, str]] = [
    ("health", "its /health answer (the HTTP status, or why none came)"),
    ("figures from", "where the numbers come from and over what time"),
    ("probe", "a one-token completion: ok, FAILED (why), or not yet"),
    ("applied util", "the gpu_memory_utilization the running server reports"),
    ("KV blocks", "KV-cache blocks × tokens in each"),
    ("STALE", "the last read failed: since when, and why"),
]


def _limit(fig: catalog.Figure, th: Any) -> str | None:
    """A figure's threshold as a value in force (``above 2 s``), None when it has none."""
    t = fig.threshold
    if t is None:
        return None
    lim = t.limit(th)
    if lim is None:
        return None
    shown = fig.show(lim)
    return f"{'below' if t.below else 'above'} {shown}"


def limit_words(fig: catalog.Figure, per_slot: Mapping[str, Any]) -> str | None:
    """A figure's threshold as the values in force, per slot where they differ:
    ``above 2.0s (Q27 above 3.0s)``; None when it has none set."""
    if fig.threshold is None:
        return None
    by_slot = {slot: _limit(fig, th) for slot, th in per_slot.items()}
    if fig.threshold.fixed is not None and not by_slot:
        by_slot = {"": _limit(fig, None)}
    values = [v for v in by_slot.values() if v is not None]
    if not values:
        return None
    common = max(sorted(set(values)), key=values.count)
    odd = [f"{s} {v}" for s, v in by_slot.items() if v is not None and v != common]
    return common + (f" ({', '.join(odd)})" if odd else "")


def thresholds(per_slot: Mapping[str, Any], stall_after_s: float | None = None
               ) -> list[tuple[str, str]]:
    """Each threshold of the slots' figures as the values in force:
    ``TTFT p95 — yellow, then an alert, above 2.0s (Q27 above 3.0s)``."""
    out: list[tuple[str, str]] = []
    for fig in catalog.CATALOG:
        words = limit_words(fig, per_slot)
        if words is not None:
            out.append((fig.label, "yellow, then an alert, " + words))
    targets = {slot: ", ".join(f"{slo.LABELS[k]} ≤ {v:g} s"
                               for k, v in slo.targets(th).items())
               for slot, th in per_slot.items()}
    if any(targets.values()):
        out.append(("SLO targets", "; ".join(
            f"{slot} {t}" for slot, t in targets.items() if t)
            + f" (the share at or under the target's bucket edge; green ≥ "
              f"{slo.GOOD:.0%}, amber ≥ {slo.FAIR:.0%}, red below; – under "
              f"{slo.MIN_REQUESTS:g} requests)"))
    if stall_after_s is not None:
        span = f"{stall_after_s:.0f} s" if stall_after_s < 120 else fmt.duration(
            stall_after_s, False)
        out.append(("STALLED", f"requests running with no token for {span}"))
    return out


def slot_sections(per_slot: Mapping[str, Any], stall_after_s: float | None) -> list[Section]:
    """The main screen's: the slot's states, start-up phases, columns, thresholds."""
    phases = [(f"{short} 42s", PHASE_WORDS.get(short, long) + " (time in it so far)")
              for long, short in startup.SHORT.items()]
    return [("Columns", STATE_COLUMNS_HELP), ("States (HEALTH)", SLOT_STATES),
            ("Start-up phases (HEALTH while starting)", phases),
            ("Thresholds in force", thresholds(per_slot, stall_after_s))]


def gpu_sections() -> list[Section]:
    return [("GPU columns", GPU_COLUMNS_HELP), ("GPU states", GPU_STATES)]


def only_bindings(bindings: Iterable[object]) -> list[Binding]:
    """A ``BINDINGS`` list's ``Binding`` objects (Textual also allows tuples there)."""
    return [b for b in bindings if isinstance(b, Binding)]


def binding_rows(bindings: Iterable[Binding]) -> list[tuple[str, str, bool, bool]]:
    """A screen's own keys as help rows, each once, in its order."""
    rows: list[tuple[str, str, bool, bool]] = []
    seen: set[str] = set()
    for b in bindings:
        if b.key in seen or not b.description:
            continue
        seen.add(b.key)
        rows.append((b.key, b.description, False, True))
    return rows


def watchdog_keys() -> Section:
    """``w``'s own keys (its dialog's), so the key every stop warning names is taught."""
    from console.ui.screens.modals import WatchdogScreen

    return ("w opens the watchdog's menu; its keys", [
        (b.key if b.key != "escape" else "esc", b.description)
        for b in only_bindings(WatchdogScreen.BINDINGS)])
