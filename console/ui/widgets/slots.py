"""The slots table: one row per slot, state by colour and by glyph/word."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from console.model import catalog, fmt, slo, startup
from console.model.snapshot import DeploymentSnapshot, SlotSnapshot
from console.ui.widgets.lines import Spans, changed_spans, cut, same, strip_of

STATE_COLUMNS = (("slot", "SLOT", 6), ("model", "MODEL", 18), ("port", "PORT", 5),
                 ("gpus", "GPU", 3), ("util", "UTIL", 4), ("health", "HEALTH", 9))
STATE_PRIORITY = {"slot": 0, "health": 0, "util": 2, "model": 3, "gpus": 4, "port": 5}
"""Slot and health always; the rest as the figures' own priorities allow."""
FIGURE_COLUMNS = catalog.columns()
COLUMNS = STATE_COLUMNS + tuple((f.key, c.header, c.width) for f, c in FIGURE_COLUMNS)


def health_cell(s: SlotSnapshot, agent_state: str | None, gpu_mark: str | None = None,
                stalled: bool = False, phase: str | None = None) -> Text:
    """The slot's health; on a GPU with a hardware fault (``gpu_mark``: ``XID 79``,
    ``ECC``, ``REMAP``) that fault, whatever the slot answers (a GPU off the bus may go
    on serving from what it had), and ``HOT`` on an overheating one; ``stalled``: 200 on
    /health with requests running and no token (``console.model.stall``)."""
    h = startup.shown_health(s.health, agent_state)
    if h == "starting" and phase:
        # the start-up phase the agent read from the log, and its time so far (in the
        # starting colour, without the glyph: ``GRAPH 42s`` fills the cell)
        _, _, style = fmt.HEALTH_GLYPH.get(h, fmt.HEALTH_GLYPH["unknown"])
        return Text(phase, style=style)
    if h == "up" and stalled:  # 200 on /health, requests running, no token: the worst up
        return Text("■ STALLED", style="crit")
    glyph, word, style = fmt.HEALTH_GLYPH.get(h, fmt.HEALTH_GLYPH["unknown"])
    if gpu_mark is not None and gpu_mark != "HOT" and h != "down":
        return Text(f"✖ {gpu_mark}", style="fault")
    if h == "up" and s.probe_ok is False:
        return Text("▲ PROBE✗", style="warn.strong")
    if h == "up" and gpu_mark == "HOT":
        return Text("▲ UP HOT", style="warn.strong")
    return Text(f"{glyph} {word}", style=style)


def row(s: SlotSnapshot, gpus: str, util: float | None, agent_state: str | None,
        thresholds: Any = None, gpu_mark: str | None = None,
        stalled: bool = False, phase: str | None = None) -> list[object]:
    """The cells of one slot; a figure past its configured threshold is bold yellow;
    ``gpu_mark``: what is wrong with a GPU it runs on (its health cell says so)."""
    dim = "dim" if s.stale_since is not None else ""
    cells: list[object] = [
        Text(s.slot, style="bold"), Text(s.served_model_name), str(s.port), gpus,
        fmt.num(util, 2) if util is not None else fmt.DASH,
        health_cell(s, agent_state, gpu_mark, stalled, phase)]

    def value(key: str) -> float | None:
        if stalled and key in catalog.STALLED_NOW:  # what it serves now, not the
            return catalog.STALLED_NOW[key]  # window's rate decaying for minutes
        return s.figure(key, thresholds)

    for fig, _ in FIGURE_COLUMNS:
        if s.health != "up":
            # a slot that is down or starting serves nothing: its last numbers would
            # read as live ones (the detail screen keeps them, marked STALE)
            cells.append(Text(fmt.DASH, style="dim"))
            continue
        th = fig.threshold
        warn = th is not None and th.breached(value(fig.key), thresholds)
        text = (slo.cell(s.figures, thresholds) if fig.key == "slo_attainment"
                else catalog.cell_text(fig, value))
        cells.append(Text(text, style="warn.strong" if warn else dim))
    return cells


def sort_value(s: SlotSnapshot, key: str, util: float | None, agent_state: str | None,
               stalled: bool = False, thresholds: Any = None) -> tuple[int, str | float]:
    """What a column sorts a slot by: its number (a figure, the port, gpu_util), else its
    text; a slot with no value for it (down, not measured) sorts last either way round."""
    if key == "slot":
        return 0, s.slot
    if key == "model":
        return 0, s.served_model_name
    if key == "port":
        return 0, s.port
    if key == "gpus":
        return 0, s.slot
    if key == "util":
        return (1, 0.0) if util is None else (0, util)
    if key == "health":
        return 0, STATE_ORDER.get(health_cell(s, agent_state, stalled=stalled).plain.split()[1],
                                  9)
    v = s.figure(key, thresholds) if s.health == "up" else None
    return (1, 0.0) if v is None or v != v else (0, v)


STATE_ORDER = {"DOWN": 0, "STALLED": 1, "PROBE✗": 1, "START": 2, "UP": 3}
"""Health sorts worst first."""

ASCENDING_FIRST = frozenset({"slot", "model", "port", "gpus", "health"} | {
    f.key for f, _ in FIGURE_COLUMNS if f.threshold is not None and f.threshold.below})
"""Columns whose first sort is smallest first: names, the port, the health (its order is
worst first) and a figure that is bad when low (acceptance). Every other number starts
largest first, the worst slot on top (htop's, k9s's): KV, TTFT, preemptions, queue."""


def worst_first_reverse(key: str | None) -> bool:
    """The direction a column's first sort takes: largest first but for those above."""
    return key is not None and key not in ASCENDING_FIRST

NO_SLO = frozenset({"slo_attainment"})
"""The columns left out where no slot has an SLO target (a column of – says nothing)."""
NARROW_BELOW = 100
"""Under this many terminal columns, columns use their narrow header where they have one."""
CELL_PADDING = 2
"""Each cell is padded by one column on either side."""


def fit_columns(width: int, without: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The columns that fit ``width`` whole, by priority (ties: left to right), shown in
    their usual order: the most important figures survive a narrow terminal. ``without``:
    columns with nothing to say here (SLO where no slot has a target)."""
    narrow = width < NARROW_BELOW
    prio = dict(STATE_PRIORITY)
    widths = {k: w for k, _, w in STATE_COLUMNS}
    for f, c in FIGURE_COLUMNS:
        prio[f.key] = c.priority
        widths[f.key] = (c.narrow_width or c.width) if narrow else c.width
    order = [k for k, _, _ in COLUMNS if k not in without]
    chosen: set[str] = set()
    used = 0
    for key in sorted(order, key=lambda k: (prio[k], order.index(k))):
        need = widths[key] + CELL_PADDING
        if prio[key] == 0 or used + need <= width:
            chosen.add(key)
            used += need
    return tuple(k for k in order if k in chosen)


class SlotsTable(Widget, can_focus=True):
    """One line per slot, every number from the latest poll.

    Drawn line by line (Textual's line API): after a poll only the lines whose text
    changed are repainted, each alone. A terminal over SSH gets a row's few hundred
    bytes when its numbers move, and nothing for a row that did not change; a table
    repainted whole on every change cost ~5 KB per change, which is why numbers used to
    wait 15 s. The cursor is a background, so a row's state colours stay readable."""

    DEFAULT_CSS = """
    SlotsTable { height: auto; max-height: 12; }
    SlotsTable > .slots--header { text-style: bold; color: $text; background: $panel; }
    SlotsTable > .slots--cursor { background: $boost; }
    SlotsTable:focus > .slots--cursor { background: $primary 35%; }
    """
    COMPONENT_CLASSES = {"slots--header", "slots--cursor"}
    BINDINGS = [Binding("up,k", "cursor(-1)", "up", show=False),
                Binding("down,j", "cursor(1)", "down", show=False),
                Binding("enter", "select", "detail", show=False),
                Binding("greater_than_sign", "sort(1)", "sort by next column", show=False),
                Binding("less_than_sign", "sort(-1)", "sort by previous column", show=False),
                Binding("I", "invert", "invert sort", show=False)]

    class Selected(Message):
        """Enter on a slot (or a click): its detail screen is asked for."""

        def __init__(self, slot: str) -> None:
            super().__init__()
            self.slot = slot

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.slots: list[str] = []
        self._lines: dict[str, Text] = {}
        self.cursor = 0
        self._layout: tuple[tuple[str, ...], bool] | None = None
        self._keys: list[str] = []
        self._widths: dict[str, int] = {}
        self._header = Text()
        self._spans: dict[int, Spans] = {}
        """Per line, the cells that changed last (its strip is cut there)."""
        self._last_rows: dict[str, list[object]] = {}
        """The cells of the latest poll, per slot (a new width re-lays them out)."""
        self.sort_key: str | None = "health"
        """The column the rows are sorted by (at first HEALTH: the worst slot on top, the
        profile's order among equals); None: the profile's order."""
        self.sort_reverse = False
        self.filter = ""
        """Slots whose name or model contains this (any case) are shown; "" shows all."""
        self._last: tuple[Any, ...] | None = None
        """The latest ``show`` arguments: a new sort or filter re-orders without a poll."""
        self.slo_targets = False
        """Some slot has an SLO target: the SLO column is one to fit (else none)."""

    def on_mount(self) -> None:
        self.fit(self.app.size.width)

    # -- columns -----------------------------------------------------------------
    def fit(self, width: int) -> None:
        """Choose the columns for a terminal ``width`` wide (redrawn only on a change)."""
        # the screen's scrollbar gutter; SLO only where a slot has a target
        keys = fit_columns(width - 2, frozenset() if self.slo_targets else NO_SLO)
        narrow = width < NARROW_BELOW
        if (keys, narrow) == self._layout:
            return
        self._layout = (keys, narrow)
        self._keys = list(keys)
        figure_cols = {f.key: c for f, c in FIGURE_COLUMNS}
        self._header = Text(no_wrap=True)
        for key, label, width_ in COLUMNS:
            if key not in self._keys:
                continue
            col = figure_cols.get(key)
            if narrow and col is not None:
                label, width_ = col.narrow_header or label, col.narrow_width or width_
            if key == self.sort_key:  # the sorted column says so, and which way:
                # ▲ smallest (or worst) first, ▼ largest first; beside the label, never
                # over it (the column is one wider where the label fills it)
                if len(label) >= width_:
                    width_ = len(label) + 1
                label = label + ("▼" if self.sort_reverse else "▲")
            self._widths[key] = width_
            self._header.append(" " + label[:width_].ljust(width_) + " ",
                                "reverse" if key == self.sort_key else "")
        self._lines.clear()  # rebuilt at the next show
        self._spans.clear()
        for slot, cells in self._last_rows.items():
            self._lines[slot] = self._line(cells)
        self.refresh()

    @property
    def columns(self) -> list[str]:
        """Keys of the columns shown now, left to right."""
        return list(self._keys)

    def _line(self, cells: list[object]) -> Text:
        by_key = {k: v for (k, _, _), v in zip(COLUMNS, cells, strict=True)}
        line = Text(no_wrap=True)
        for key in self._keys:
            cell = by_key[key]
            text = cell.copy() if isinstance(cell, Text) else Text(str(cell))
            text.truncate(self._widths[key], overflow="ellipsis")
            text.pad_right(self._widths[key] - text.cell_len)
            line.append(" ")
            line.append_text(text)
            line.append(" ")
        return line

    # -- data --------------------------------------------------------------------
    def show(self, snap: DeploymentSnapshot, gpus: dict[str, str], utils: dict[str, float],
             agent_states: dict[str, str], thresholds: Mapping[str, Any] | None = None,
             marks: Mapping[str, str] | None = None, stalled: Collection[str] = (),
             phases: Mapping[str, str] | None = None) -> None:
        """``marks``: slot → what is wrong with a GPU it runs on (``XID 79``, ``HOT``);
        ``stalled``: the slots the session finds stalled (``ConsoleState.stalled``);
        ``phases``: slot → its start-up phase while it starts (``model.startup``)."""
        self._last = (snap, gpus, utils, agent_states, thresholds, marks, stalled, phases)
        targets = any(slo.targets(th) for th in (thresholds or {}).values())
        if targets != self.slo_targets:  # the SLO column comes or goes
            self.slo_targets = targets
            self._layout = None
            self.fit(self.app.size.width)
        rows = {s.slot: row(s, gpus.get(s.slot, ""), utils.get(s.slot),
                            agent_states.get(s.slot), (thresholds or {}).get(s.slot),
                            (marks or {}).get(s.slot), s.slot in stalled,
                            (phases or {}).get(s.slot))
                for s in snap.slots}
        self._last_rows = rows
        order = self._order(snap, utils, agent_states, stalled, thresholds or {})
        if order != self.slots:
            selected = self.selected_slot()
            self.slots = order
            self._lines = {slot: self._line(rows[slot]) for slot in order}
            self._spans.clear()
            self.cursor = order.index(selected) if selected in order else 0
            self.refresh(layout=True)
            return
        for y, slot in enumerate(order, start=1):
            line = self._line(rows[slot])
            old = self._lines.get(slot)
            if old is None or not same(old, line):
                # only this line is repainted, and only over the cells that changed
                self._lines[slot] = line
                width = self.size.width
                runs = (((0, width),) if old is None
                        else changed_spans(old, line, self.app.console, width))
                if runs:
                    self._spans[y] = runs
                    self.refresh(*(Region(x1, y, x2 - x1, 1) for x1, x2 in runs))

    def _order(self, snap: DeploymentSnapshot, utils: dict[str, float],
               agent_states: dict[str, str], stalled: Collection[str] = (),
               thresholds: Mapping[str, Any] | None = None) -> list[str]:
        needle = self.filter.lower()
        shown = [s for s in snap.slots if not needle or needle in s.slot.lower()
                 or needle in s.served_model_name.lower()]
        if self.sort_key is None:
            return [s.slot for s in shown]
        key = self.sort_key
        vals = {s.slot: sort_value(s, key, utils.get(s.slot), agent_states.get(s.slot),
                                   s.slot in stalled, (thresholds or {}).get(s.slot))
                for s in shown}
        present = sorted((s.slot for s in shown if vals[s.slot][0] == 0),
                         key=lambda n: vals[n][1], reverse=self.sort_reverse)
        return present + [s.slot for s in shown if vals[s.slot][0] != 0]

    def set_order(self, sort_key: str | None = None, reverse: bool | None = None,
                  filter: str | None = None) -> None:
        """Change the sort column, its direction or the filter; re-ordered at once."""
        if sort_key is not None:
            self.sort_key = sort_key or None
        if reverse is not None:
            self.sort_reverse = reverse
        if filter is not None and filter.strip() != self.filter:
            self.filter = filter.strip()
            self.refresh(layout=True)  # the crumb line comes or goes
        self._layout = None  # the header shows the sort and the filter
        self.fit(self.app.size.width)
        if self._last is not None:
            self.slots = []  # re-laid out whole: every row may have moved
            self.show(*self._last)

    def action_sort(self, step: int) -> None:
        """``<``/``>``: sort by the column left/right of the sorted one (none: profile
        order), worst first (``worst_first_reverse``)."""
        keys = [None, *self._keys]
        i = keys.index(self.sort_key) if self.sort_key in keys else 0
        nxt = keys[(i + step) % len(keys)]
        self.set_order(sort_key=nxt or "", reverse=worst_first_reverse(nxt))

    def column_at(self, x: int) -> str | None:
        """The column whose header cell spans ``x`` (each cell: a space, its width, a
        space), None past the last."""
        at = 0
        for key in self._keys:
            at += self._widths[key] + 2
            if x < at:
                return key
        return None

    def sort_by_click(self, x: int) -> None:
        """A click on a header: sort by it, worst first; on the sorted one: the other way."""
        key = self.column_at(x)
        if key is None:
            return
        if key == self.sort_key:
            self.action_invert()
        else:
            self.set_order(sort_key=key, reverse=worst_first_reverse(key))

    def action_invert(self) -> None:
        self.set_order(reverse=not self.sort_reverse)

    def get_row(self, slot: str) -> list[str]:
        """The cells of a slot as shown now (plain text), left to right."""
        cells = self._last_rows.get(slot, [])
        by_key = {k: v for (k, _, _), v in zip(COLUMNS, cells, strict=True)}
        return [str(by_key[k]) for k in self._keys if k in by_key]

    # -- drawing -----------------------------------------------------------------
    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return 1 + len(self.slots) + (1 if self.filter else 0)

    def crumb(self) -> Text:
        """The filter kept, under the rows, whole: what it matches, or that nothing does,
        and how to clear it (the header's right end is cut first on a narrow terminal)."""
        total = len(self._last_rows)
        if not self.slots:
            return Text.assemble(("no slot matches ", "warn.strong"), (f"/{self.filter}",
                                                                       "accent"),
                                 (f" (of {total}) · esc clears", "dim"))
        return Text.assemble(("filter ", "dim"), (f"/{self.filter}", "accent"),
                             (f": {len(self.slots)} of {total} slots · esc clears", "dim"))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if self.filter and y == len(self.slots) + 1:
            text, style = self.crumb(), self.rich_style
        elif y == 0:
            text, style = self._header, self.get_component_rich_style("slots--header")
        elif 0 < y <= len(self.slots):
            slot = self.slots[y - 1]
            text = self._lines.get(slot, Text())
            style = (self.get_component_rich_style("slots--cursor") if y - 1 == self.cursor
                     else self.rich_style)
        else:
            return Strip.blank(width, self.rich_style)
        strip = cut(strip_of(text, self.app.console, width), self._spans.get(y))
        # applied beneath the row's own styles: a red DOWN stays red under the cursor
        return strip.apply_style(style)

    # -- cursor ------------------------------------------------------------------
    def selected_slot(self) -> str | None:
        if not self.slots:
            return None
        return self.slots[min(self.cursor, len(self.slots) - 1)]

    def move_cursor(self, row: int) -> None:
        if not self.slots:
            return
        old, self.cursor = self.cursor, max(0, min(row, len(self.slots) - 1))
        for y in {old + 1, self.cursor + 1}:
            self.refresh(Region(0, y, self.size.width, 1))

    def action_cursor(self, delta: int) -> None:
        self.move_cursor(self.cursor + delta)

    def action_select(self) -> None:
        slot = self.selected_slot()
        if slot is not None:
            self.post_message(self.Selected(slot))

    def on_click(self, event: events.Click) -> None:
        if event.y == 0:
            self.sort_by_click(event.x)
        elif 1 <= event.y <= len(self.slots):
            self.move_cursor(event.y - 1)
            if event.chain >= 2:
                self.action_select()

    def on_resize(self) -> None:
        self.fit(self.app.size.width)
