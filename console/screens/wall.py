"""Wall mode: read-only, fills a big screen, rotates between the overview and each slot.

It has no operation bindings at all (the registry's sender would refuse them
anyway), needs no SSH key, and shows stale data with its time instead of
blanking.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Static

from ..session import ConsoleState
from ..widgets.board import WallBoard
from ..widgets.header import PodHeader
from ..widgets.panels import AlertsPanel
from ..widgets.plots import PlotGrid
from .base import ConsoleScreen
from .detail import figures_table
from .main import COMMON_BINDINGS


class WallScreen(ConsoleScreen):
    BINDINGS = [*COMMON_BINDINGS, Binding("space", "next", "next view", id="next")]

    def __init__(self, state: ConsoleState, rotate_s: float = 15.0) -> None:
        super().__init__(state)
        self.rotate_s = rotate_s
        self.view = 0  # 0 = overview, i = slot i-1

    def compose(self) -> ComposeResult:
        view = self.state.view
        yield PodHeader(view.profile_name, view.demo, True)
        yield Static(id="wview")
        yield WallBoard(tuple(t.slot for t in view.targets), id="wboard")
        yield Static(id="wfocus")
        # before the plots: whatever the height, the alerts are never pushed off
        yield AlertsPanel(id="walerts")
        yield PlotGrid(self.state.ready, view.plot_refresh_s, id="wplots")
        yield Footer()

    def on_mount(self) -> None:
        self.set_class(self.app.size.height < 34, "short")
        if self.rotate_s > 0:
            self.set_interval(self.rotate_s, self.action_next)
        self.render_state(self.state)

    def on_resize(self, event: object = None) -> None:
        self.set_class(self.app.size.height < 34, "short")

    def action_next(self) -> None:
        n = len(self.state.view.targets)
        self.view = (self.view + 1) % (n + 1)
        self.render_state(self.state)

    async def when_ready(self) -> None:
        await self.query_one(PlotGrid).mount_plots()
        self.render_state(self.state)

    def render_state(self, state: ConsoleState) -> None:
        now = state.now
        self.query_one(PodHeader).show(state.pod, now, state.stale, state.operation)
        snap = state.snapshot
        names = [t.slot for t in state.view.targets]
        focus = names[self.view - 1] if 0 < self.view <= len(names) else None
        label = f"view: {'overview' if focus is None else 'slot ' + focus}  ·  rotates " \
                f"every {self.rotate_s:g}s  ·  READ-ONLY"
        self.query_one("#wview", Static).update(Text(label, style="bold"))
        box = self.query_one("#wfocus", Static)
        if snap is not None:
            self.query_one(WallBoard).show(state.pod, {s.slot: s for s in snap.slots},
                                           state.thresholds, state.states, now)
            # a slot's own view on a short screen: its figures in place of the board
            self.query_one(WallBoard).display = not (focus and self.has_class("short"))
            slots = [focus] if focus else [s.slot for s in snap.slots]
            if focus and snap.slot(focus):
                box.display = True
                box.border_title = f"slot {focus}"
                box.update(figures_table(snap.slot(focus), now))  # type: ignore[arg-type]
            else:
                box.display = False
            # the view changed: draw now, not at the next plot refresh
            grid = self.query_one(PlotGrid)
            if getattr(self, "_plotted_view", None) != self.view:
                self._plotted_view = self.view
                grid.force_redraw()
            grid.show(state.history, snap, slots, now)
        self.query_one(AlertsPanel).show(list(state.alerts), now)
