"""The slots table: one row per slot, state by colour and by glyph/word."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from .. import catalog, fmt
from ..snapshot import DeploymentSnapshot, SlotSnapshot

STATE_COLUMNS = (("slot", "SLOT", 6), ("model", "MODEL", 18), ("port", "PORT", 5),
                 ("gpus", "GPU", 3), ("util", "UTIL", 4), ("health", "HEALTH", 8))
STATE_PRIORITY = {"slot": 0, "health": 0, "util": 2, "model": 3, "gpus": 4, "port": 5}
"""Slot and health always; the rest as the figures' own priorities allow."""
FIGURE_COLUMNS = catalog.columns()
COLUMNS = STATE_COLUMNS + tuple((f.key, c.header, c.width) for f, c in FIGURE_COLUMNS)


def health_cell(s: SlotSnapshot, agent_state: str | None) -> Text:
    h = s.health
    if h != "up" and agent_state in ("starting", "backoff"):
        h = "starting"
    glyph, word, style = fmt.HEALTH_GLYPH.get(h, fmt.HEALTH_GLYPH["unknown"])
    if h == "up" and s.probe_ok is False:
        return Text("▲ PROBE✗", style="bold yellow")
    return Text(f"{glyph} {word}", style=style)


def row(s: SlotSnapshot, gpus: str, util: float | None, agent_state: str | None,
        thresholds: Any = None) -> list[object]:
    """The cells of one slot; a figure past its configured threshold is bold yellow."""
    dim = "dim" if s.stale_since is not None else ""
    cells: list[object] = [
        Text(s.slot, style="bold"), Text(s.served_model_name), str(s.port), gpus,
        fmt.num(util, 2) if util is not None else fmt.DASH, health_cell(s, agent_state)]
    for fig, _ in FIGURE_COLUMNS:
        if s.health != "up":
            # a slot that is down or starting serves nothing: its last numbers would
            # read as live ones (the detail screen keeps them, marked STALE)
            cells.append(Text(fmt.DASH, style="dim"))
            continue
        th = fig.threshold
        warn = th is not None and th.breached(s.figure(fig.key), thresholds)
        cells.append(Text(catalog.cell_text(fig, s.figure),
                          style="bold yellow" if warn else dim))
    return cells


NUMBERS_EVERY_S = 15.0
"""Numeric cells repaint at most this often, all rows together; state (health) repaints at
once. Any cell update repaints the whole DataTable (~3 KB of escape sequences at 160
columns): at every 2 s poll that alone would be ~90 KB/min over a phone's SSH link."""
STATE_KEYS = ("slot", "model", "port", "gpus", "util", "health")

NARROW_BELOW = 100
"""Under this many terminal columns, columns use their narrow header where they have one."""
CELL_PADDING = 2
"""DataTable pads each cell by one column on either side."""


def fit_columns(width: int) -> tuple[str, ...]:
    """The columns that fit ``width`` whole, by priority (ties: left to right), shown in
    their usual order: the most important figures survive a narrow terminal."""
    narrow = width < NARROW_BELOW
    prio = dict(STATE_PRIORITY)
    widths = {k: w for k, _, w in STATE_COLUMNS}
    for f, c in FIGURE_COLUMNS:
        prio[f.key] = c.priority
        widths[f.key] = (c.narrow_width or c.width) if narrow else c.width
    order = [k for k, _, _ in COLUMNS]
    chosen: set[str] = set()
    used = 0
    for key in sorted(order, key=lambda k: (prio[k], order.index(k))):
        need = widths[key] + CELL_PADDING
        if prio[key] == 0 or used + need <= width:
            chosen.add(key)
            used += need
    return tuple(k for k in order if k in chosen)


class SlotsTable(DataTable):
    DEFAULT_CSS = "SlotsTable { height: auto; max-height: 12; }"

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = False  # stripes double the escape codes of every repaint
        # the selected row keeps its cells' own colours (a red DOWN stays red under the
        # cursor); the cursor shows by its background
        self.cursor_foreground_priority = "renderable"
        self._layout: tuple[tuple[str, ...], bool] | None = None
        self.fit(self.app.size.width)

    def fit(self, width: int) -> None:
        """Choose the columns for a terminal ``width`` wide (rebuilt only on a change)."""
        keys = fit_columns(width - 2)  # the screen's scrollbar gutter
        narrow = width < NARROW_BELOW
        if (keys, narrow) == self._layout:
            return
        self._layout = (keys, narrow)
        self._cells: dict[tuple[str, str], object] = {}
        self._numbers_at = -1e18
        self.clear(columns=True)
        self._keys = list(keys)
        figure_cols = {f.key: c for f, c in FIGURE_COLUMNS}
        for key, label, width_ in COLUMNS:
            if key in self._keys:
                col = figure_cols.get(key)
                if narrow and col is not None:
                    label, width_ = col.narrow_header or label, col.narrow_width or width_
                self.add_column(label, key=key, width=width_)

    def on_resize(self) -> None:
        self.fit(self.app.size.width)

    def show(self, snap: DeploymentSnapshot, gpus: dict[str, str], utils: dict[str, float],
             agent_states: dict[str, str], thresholds: Mapping[str, Any] | None = None,
             now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        # one clock for every row: their numeric updates land in the same repaint
        numbers_due = now - self._numbers_at >= NUMBERS_EVERY_S
        if numbers_due:
            self._numbers_at = now
        seen = set()
        updated = False
        for s in snap.slots:
            seen.add(s.slot)
            full = row(s, gpus.get(s.slot, ""), utils.get(s.slot), agent_states.get(s.slot),
                       (thresholds or {}).get(s.slot))
            by_key = {k: v for (k, _, _), v in zip(COLUMNS, full, strict=True)}
            if s.slot in self.rows:
                for key in self._keys:
                    # only changed cells: each update repaints, and repaints are bytes
                    if self._cells.get((s.slot, key)) == by_key[key]:
                        continue
                    if key in STATE_KEYS or numbers_due:
                        self.update_cell(s.slot, key, by_key[key])
                        self._cells[(s.slot, key)] = by_key[key]
                        updated = True
            else:
                self.add_row(*(by_key[k] for k in self._keys), key=s.slot)
                self._cells.update({(s.slot, k): by_key[k] for k in self._keys})
        for key in [k for k in self.rows if k.value not in seen]:
            self.remove_row(key)
        if updated:
            self._drop_dead_renders()

    def _drop_dead_renders(self) -> None:
        """DataTable keys its render caches by an update counter, so what was cached
        before an update is never read again, yet stays until its LRU (10,000 cells) is
        full: on a table updated every poll for days (a wall display) that grew the
        console by ~0.45 MB an hour (``bench/soak_demo.py``). A few rows re-render in
        microseconds; keep only what the next paint can use."""
        clear = getattr(self, "_clear_caches", None)
        if callable(clear):
            clear()

    def selected_slot(self) -> str | None:
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:
            return None
        return str(key.value)
