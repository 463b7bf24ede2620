"""Wall mode: read-only, fills a big screen, rotates between the overview and each slot.

It has no operation bindings at all (the registry's sender would refuse them
anyway), needs no SSH key, and shows stale data with its time instead of
blanking.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from console.model import catalog, slo
from console.model.snapshot import SlotSnapshot
from console.session.view import ConsoleState
from console.ui.screens.base import ConsoleScreen
from console.ui.screens.detail import figures_table
from console.ui.screens.main import COMMON_BINDINGS
from console.ui.widgets.board import WallBoard
from console.ui.widgets.gpu_strip import GpuStrip
from console.ui.widgets.header import PodHeader
from console.ui.widgets.keybar import KeyBar
from console.ui.widgets.lines import TableLines
from console.ui.widgets.panels import AlertsPanel
from console.ui.widgets.plots import PlotGrid


def overview_table(slots: tuple[SlotSnapshot, ...],
                   thresholds: Mapping[str, Any] | None = None) -> Table:
    """Every slot's table figures side by side (the catalog's columns, in their order);
    ``thresholds``: each slot's (its SLO targets)."""
    t = Table(box=None, padding=(0, 2), show_edge=False, header_style="dim")
    t.add_column("slot")
    t.add_column("health")
    cols = catalog.columns()
    if not any(slo.targets(th) for th in (thresholds or {}).values()):
        cols = [(f, c) for f, c in cols if f.key != "slo_attainment"]  # nothing to say
    for _fig, col in cols:
        t.add_column(col.header, justify="right")
    for s in slots:
        cells = [Text(s.slot, style="bold"), Text(s.health)]
        th = (thresholds or {}).get(s.slot)
        for fig, col in cols:
            text = (slo.cell(s.figures, th) if fig.key == "slo_attainment"
                    else (col.show or fig.show)(s.figure(fig.key)))
            if col.joins:
                text += "/" + catalog.BY_KEY[col.joins].show(s.figure(col.joins))
            cells.append(Text(text))
        t.add_row(*cells)
    return t


class WallScreen(ConsoleScreen):
    DEFAULT_CSS = """
    #wfocus { height: auto; border: round $accent; padding: 0 1; display: none; }
    #wview { height: 1; background: $boost; padding: 0 1; }
    WallScreen.short #wplots { display: none; }
    WallScreen #wplots { min-height: 8; }
    """
    BINDINGS = [*COMMON_BINDINGS, Binding("space", "next", "next view", id="next")]

    def __init__(self, state: ConsoleState, rotate_s: float = 15.0) -> None:
        super().__init__(state)
        self.rotate_s = rotate_s
        self.view = 0  # 0 = overview, i = slot i-1

    def compose(self) -> ComposeResult:
        view = self.state.view
        yield PodHeader(view.title, view.demo, True)
        yield GpuStrip()
        yield Static(id="wview")
        yield WallBoard(tuple(t.slot for t in view.targets), id="wboard")
        yield TableLines(id="wfocus")
        # before the plots: whatever the height, the alerts are never pushed off
        yield AlertsPanel(id="walerts")
        yield PlotGrid(self.state.ready, view.plot_refresh_s, id="wplots")
        yield KeyBar()

    def _fit(self) -> None:
        """The layout for the terminal's size: ``short`` (no plots) under 34 rows;
        ``tall`` digits (5 rows, not 3) where every card keeps 44 columns and 38 rows
        leave the plots their room: a wall across a room, or a browser fitted to it."""
        size = self.app.size
        self.set_class(size.height < 34, "short")
        cards = 1 + len(self.state.view.targets)
        self.query_one(WallBoard).set_class(size.height >= 38 and size.width // cards >= 44,
                                            "tall")

    def on_mount(self) -> None:
        self._fit()
        if self.rotate_s > 0:
            self.set_interval(self.rotate_s, self.action_next)
        self.render_state(self.state)
        # the box's height depends on what the rest takes: again once they are laid out
        self.call_after_refresh(lambda: self.show(self.state))

    def on_resize(self, event: object = None) -> None:
        self._fit()
        if self.is_mounted:
            self.call_after_refresh(lambda: self.show(self.state))

    def action_next(self) -> None:
        n = len(self.state.view.targets)
        self.view = (self.view + 1) % (n + 1)
        self.render_state(self.state)

    async def when_ready(self) -> None:
        await self.query_one(PlotGrid).mount_plots()
        self.render_state(self.state)

    def render_state(self, state: ConsoleState) -> None:
        now = state.now
        self.query_one(PodHeader).show_state(state)
        self.query_one(GpuStrip).show_state(state)
        snap = state.snapshot
        names = [t.slot for t in state.view.targets]
        focus = names[self.view - 1] if 0 < self.view <= len(names) else None
        label = f"view: {'overview' if focus is None else 'slot ' + focus}  ·  rotates " \
                f"every {self.rotate_s:g}s  ·  READ-ONLY"
        if state.view.demo:  # how a demo's wall is shown an incident: from a console
            label += "  ·  faults: pod-console demo --attach"
        if state.gateway is not None:  # the front door, on the wall too
            label += "  ·  " + state.gateway.headline()
        if label != getattr(self, "_label", None):  # an update repaints the whole line
            self._label = label
            self.query_one("#wview", Static).update(Text(label, style="bold"))
        box = self.query_one("#wfocus", TableLines)
        if snap is not None:
            self.query_one(WallBoard).show(state.pod, {s.slot: s for s in snap.slots},
                                           state.thresholds, state.states, now,
                                           state.stalled)
            short = self.has_class("short")
            # a slot's own view on a short screen: the pod's card and that slot's, in
            # big digits (what the wall is read for from afar), the others' cards out
            self.query_one(WallBoard).only(focus if short else None)
            self._focus_box(box, snap.slots, focus, short, now, state.thresholds)
            # the plots keep every slot whatever the view (each line is labelled): a
            # rotation that redrew them for one slot cost ~150 KB of output and a build
            # of every plot per view, four times a minute, on a screen nobody touches
            self.query_one(PlotGrid).show(state.history, snap, [s.slot for s in snap.slots],
                                          now, exact=state.replay is not None,
                                          ahead=state.replay.ahead if state.replay else None,
                                          thresholds=state.thresholds)
        self.query_one(AlertsPanel).show(list(state.alerts), now)

    def _focus_box(self, box: TableLines, slots: tuple[SlotSnapshot, ...],
                   focus: str | None, short: bool, now: float,
                   thresholds: Mapping[str, Any] | None = None) -> None:
        """The focused slot's every figure, or (overview) every slot's table figures.

        On a tall screen the box is always there at one fixed height, whatever the view:
        a box that came and went, or grew, at each rotation moved the plots below it,
        and moved plots are repainted whole (~150 KB of output, four times a minute).
        Drawn line by line: a poll costs the digits that moved."""
        by_slot = {s.slot: s for s in slots}
        per_row = max(2, min(4, self.size.width // 40))  # a wall is wide: fewer rows
        if short:  # no room below the board for small text: the digits say it
            box.display = False
            return
        th = thresholds or {}
        tables = {s.slot: figures_table(s, now, per_row, thresholds=th.get(s.slot))
                  for s in slots}
        overview = overview_table(slots, th)
        shown = tables[focus] if focus in by_slot else overview
        rows = max([overview.row_count + 1, *(t.row_count for t in tables.values())])
        if not self._room_for(rows):
            # one height for every view would leave the plots too short to read (a wall
            # in a 1280x720 browser window): the box is sized to the view it shows
            rows = shown.row_count + (1 if shown is overview else 0)
        box.display = True
        title = f"slot {focus}" if focus in by_slot else "all slots"
        if box.border_title != title:
            box.border_title = title
        box.show_renderable(shown, rows)

    def _room_for(self, box_rows: int) -> bool:
        """Whether a box of ``box_rows`` leaves the plots one row of readable height."""
        from console.ui.widgets.plots import PLOT_MIN_ROWS

        used = sum(w.outer_size.height for w in (
            self.query_one(PodHeader), self.query_one(GpuStrip), self.query_one("#wview"),
            self.query_one(WallBoard), self.query_one(AlertsPanel), self.query_one(KeyBar))
            if w.display)
        return self.size.height - used - (box_rows + 2) >= PLOT_MIN_ROWS
