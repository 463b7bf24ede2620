"""The wall's board: big numbers an on-looker reads from across the room.

One card for the pod (state, $/hour, time to the scheduled stop) and one per slot
(health, TTFT p95, KV usage, speculative acceptance), each number in Textual's
``Digits`` with its unit beside it, in the warning colour past its configured threshold.
Only renders what it is handed."""

from __future__ import annotations

import weakref
from collections.abc import Collection, Mapping
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Digits, Label, Static

from console.model import catalog, fmt, slo, startup
from console.model.pod_stop import OVERDUE_S
from console.model.snapshot import PodSnapshot, SlotSnapshot
from console.ui.widgets.lines import safe_text

BOARD_FIGURES = ("ttft_p95_s", "kv_cache_usage", "acceptance_rate")
"""The figures an on-looker needs, per slot (the field's panels)."""


def big_value(key: str, value: float | None) -> tuple[str, str]:
    """(what the digits show, the unit beside them); Digits draws 0-9 . - $ : only."""
    if value is None:
        return "-", {"ttft_p95_s": "TTFT p95", "kv_cache_usage": "% KV",
                     "acceptance_rate": "% accept"}.get(key, "")
    if key == "ttft_p95_s":
        if value < 1:
            return f"{value * 1000:.0f}", "ms TTFT p95"
        return (f"{value:.1f}" if value < 9.95 else f"{value:.0f}"), "s TTFT p95"
    if key == "kv_cache_usage":
        return f"{value * 100:.1f}", "% KV"
    if key == "acceptance_rate":
        return f"{value * 100:.0f}", "% accept"
    return f"{value:g}", ""


_SHOWN: weakref.WeakKeyDictionary[Label, Text] = weakref.WeakKeyDictionary()
"""What each label shows now (a label that goes drops out with it)."""


def set_label(label: Label, text: Text) -> None:
    """Update only on a change: an update repaints the label's whole line each poll."""
    text = safe_text(text)
    if _SHOWN.get(label) != text:
        _SHOWN[label] = text
        label.update(text)


_GLYPHS = {
    "0": ("###", "# #", "# #", "# #", "###"), "1": (" # ", "## ", " # ", " # ", "###"),
    "2": ("###", "  #", "###", "#  ", "###"), "3": ("###", "  #", " ##", "  #", "###"),
    "4": ("# #", "# #", "###", "  #", "  #"), "5": ("###", "#  ", "###", "  #", "###"),
    "6": ("###", "#  ", "###", "# #", "###"), "7": ("###", "  #", "  #", "  #", "  #"),
    "8": ("###", "# #", "###", "# #", "###"), "9": ("###", "# #", "###", "  #", "###"),
    "-": ("   ", "   ", "###", "   ", "   "), ".": (" ", " ", " ", " ", "#"),
    ":": (" ", "#", " ", "#", " "), "$": (" ##", "## ", " # ", " ##", "## "),
}
"""A 5-row figure font: each ``#`` is two cells wide (a cell is about half as wide as
it is tall, so the dots are square). Digits' own font is 3 rows: ~55 px in a browser at
16 px, unreadable across a room."""
BIG_ROWS = 5


def big_lines(value: str) -> list[str]:
    """``value`` in the 5-row font (a character it lacks is a blank), one string a row."""
    rows = [""] * BIG_ROWS
    for ch in value:
        glyph = _GLYPHS.get(ch, ("   ",) * BIG_ROWS)
        for i, line in enumerate(glyph):
            rows[i] += line.replace("#", "██").replace(" ", "  ") + " "
    return [r.rstrip() for r in rows]


class BigDigits(Static):
    """A figure in the 5-row font (the wall's tall layout): only what it is handed."""

    DEFAULT_CSS = "BigDigits { width: auto; height: 5; }"

    def __init__(self, value: str = "-", **kw: Any) -> None:
        super().__init__(**kw)
        self.value = value
        self.update("\n".join(big_lines(value)))

    def set_value(self, value: str) -> None:
        if value != self.value:
            self.value = value
            self.update("\n".join(big_lines(value)))


class Metric(Horizontal):
    DEFAULT_CSS = """
    Metric { height: 3; width: 100%; }
    Metric > Digits { width: auto; }
    Metric > BigDigits { display: none; }
    Metric > Label { padding: 1 0 0 1; color: $text-muted; }
    Metric.warn > Digits, Metric.warn > BigDigits { color: $warning; text-style: bold; }
    """

    def compose(self) -> ComposeResult:
        yield Digits("-")
        yield BigDigits("-")
        yield Label("")

    def set(self, digits: str, unit: str, warn: bool = False) -> None:
        d = self.query_one(Digits)
        if d.value != digits:
            d.update(digits)
        self.query_one(BigDigits).set_value(digits)
        lab = self.query_one(Label)
        if str(lab.content) != unit:
            lab.update(Text(unit))
        self.set_class(warn, "warn")


class Card(Vertical):
    DEFAULT_CSS = """
    Card { width: 1fr; height: auto; border: round $primary; padding: 0 1; }
    Card > .title { width: 100%; text-style: bold; }
    """


class SlotCard(Card):
    DEFAULT_CSS = """
    SlotCard > .slo { width: 100%; height: 1; padding: 0 1; text-wrap: nowrap;
                      text-overflow: ellipsis; }
    """

    def __init__(self, slot: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.slot = slot

    def compose(self) -> ComposeResult:
        yield Label(classes="title")
        yield Label(classes="slo")
        for key in BOARD_FIGURES:
            yield Metric(classes=f"m-{key}")

    def show_slo(self, s: SlotSnapshot | None, thresholds: Any, up: bool) -> None:
        """The SLO tile, coloured as vLLM's Service Status board colours its tiles
        (``console/model/slo.py``): shown where the slot has a target."""
        tile = self.query_one(".slo", Label)
        tile.display = bool(slo.targets(thresholds))
        if not tile.display:
            return
        words, band = slo.tile(s.figures if s is not None and up else None, thresholds)
        set_label(tile, Text(words, style=slo.STYLES[band], no_wrap=True,
                             overflow="ellipsis"))

    def show(self, s: SlotSnapshot | None, thresholds: Any, agent_state: str | None,
             stalled: bool = False) -> None:
        health = startup.shown_health(s.health if s is not None else "unknown", agent_state)
        glyph, word, style = fmt.HEALTH_GLYPH.get(health, fmt.HEALTH_GLYPH["unknown"])
        if health == "up" and stalled:  # 200 on /health, requests running, no token
            glyph, word, style = "■", "STALLED", "crit"
        title = Text.assemble((self.slot, "bold"), "  ", (f"{glyph} {word}", style),
                              no_wrap=True, overflow="ellipsis")
        if s is not None and s.stale_since is not None:
            title.append(f"  since {fmt.clock(s.stale_since)}", "crit")
        set_label(self.query_one(".title", Label), title)
        self.show_slo(s, thresholds, health == "up")
        for key in BOARD_FIGURES:
            # a slot that is not up shows no live-looking numbers
            value = s.figure(key) if s is not None and health == "up" else None
            rule = catalog.BY_KEY[key].threshold
            warn = rule is not None and rule.breached(value, thresholds)
            digits, unit = big_value(key, value)
            self.query_one(f".m-{key}", Metric).set(digits, unit, warn)


class PodCard(Card):
    def compose(self) -> ComposeResult:
        yield Label(classes="title")
        yield Metric(classes="m-cost")
        yield Metric(classes="m-stop")

    def show(self, pod: PodSnapshot | None, now: float) -> None:
        p = pod or PodSnapshot()
        status = p.status or "?"
        style = {"RUNNING": "ok.strong", "EXITED": "warn", "TERMINATED": "crit.text",
                 "ERROR": "crit"}.get(status, "neutral")
        set_label(self.query_one(".title", Label), Text.assemble(
            ("pod ", "dim"), (p.pod_id or fmt.DASH, "bold"), "  ", (status, style)))
        cost = "-" if p.cost_per_hr is None else f"${p.cost_per_hr:.2f}"
        self.query_one(".m-cost", Metric).set(cost, "per hour")
        left = p.stop_in_s(now)
        if left is None:
            self.query_one(".m-stop", Metric).set("-", "to the stop")
        elif left < -OVERDUE_S:  # late: before that the stop is merely due
            self.query_one(".m-stop", Metric).set("0:00", "overdue", warn=True)
        elif left <= 0:
            self.query_one(".m-stop", Metric).set("0:00", "due now", warn=True)
        else:
            digits, unit = stop_digits(left)
            disarmed = p.watchdog_armed is False
            self.query_one(".m-stop", Metric).set(
                digits, unit + (" (watchdog disarmed)" if disarmed else ""), warn=disarmed)


def stop_digits(left_s: float) -> tuple[str, str]:
    """The time to the stop as big digits and the words beside them, never ambiguous:
    ``29`` "min until the stop" (not ``0:29``, which reads as 29 seconds or as half past
    midnight), ``6:05`` "h:min until the stop"; the last minute in seconds (``0`` "min"
    read as no time left, or as none)."""
    if left_s < 60:
        return f"{max(0, int(left_s))}", "s until the stop"
    h, m = divmod(int(left_s) // 60, 60)
    if h == 0:
        return f"{m}", "min until the stop"
    return f"{h}:{m:02d}", "h:min until the stop"


class WallBoard(Horizontal):
    # a wall across a room: 5-row digits where the terminal (or the browser's fitted
    # font) leaves room for them (WallScreen sets .tall)
    DEFAULT_CSS = """
    WallBoard { height: auto; }
    WallBoard.tall Metric { height: 5; }
    WallBoard.tall Metric > Digits { display: none; }
    WallBoard.tall Metric > BigDigits { display: block; }
    WallBoard.tall Metric > Label { padding: 2 0 0 1; }
    """

    def __init__(self, slots: tuple[str, ...], **kw: Any) -> None:
        super().__init__(**kw)
        self.slots = slots

    def compose(self) -> ComposeResult:
        yield PodCard()
        for slot in self.slots:
            yield SlotCard(slot)

    def show(self, pod: PodSnapshot | None, snaps: Mapping[str, SlotSnapshot],
             thresholds: Mapping[str, Any], agent_states: Mapping[str, str], now: float,
             stalled: Collection[str] = ()) -> None:
        self.query_one(PodCard).show(pod, now)
        if snaps and tuple(snaps) != self.slots:
            # another profile's slots (a fallback brought up a different pod): one card
            # per slot polled now, never a card for a slot that is not there
            self.slots = tuple(snaps)
            for card in self.query(SlotCard):
                card.remove()
            self.mount_all([SlotCard(slot) for slot in self.slots])
            self.call_after_refresh(self.show, pod, snaps, thresholds, agent_states, now,
                                    stalled)
            return
        for card in self.query(SlotCard):
            card.show(snaps.get(card.slot), thresholds.get(card.slot),
                      agent_states.get(card.slot), card.slot in stalled)

    def only(self, slot: str | None) -> None:
        """Show the pod's card and ``slot``'s only (None: every card)."""
        for card in self.query(SlotCard):
            card.display = slot is None or card.slot == slot
