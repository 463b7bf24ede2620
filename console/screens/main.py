"""The main screen: header, slots table, plots, alerts and the action log."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer

from ..widgets.header import PodHeader
from ..widgets.panels import ActionLog, AlertsPanel
from ..widgets.plots import PlotGrid
from ..widgets.slots import SlotsTable

if TYPE_CHECKING:
    from ..app import PodConsoleApp

OPERATION_BINDINGS = [
    Binding("r", "op('resume')", "resume", id="resume"),
    Binding("f", "op('fallback')", "fallback", id="fallback"),
    Binding("h", "op('host_checks')", "host checks", id="host_checks"),
    Binding("b", "op('rebalance')", "rebalance", id="rebalance"),
    Binding("w", "op('watchdog')", "watchdog", id="watchdog"),
]
COMMON_BINDINGS = [
    Binding("ctrl+r,f5", "app.refresh_now", "refresh", id="refresh"),
    Binding("question_mark", "app.help", "help", id="help"),
    Binding("q", "app.quit", "quit", id="quit"),
]


class MainScreen(Screen):
    BINDINGS = [*OPERATION_BINDINGS, Binding("enter", "detail", "detail", id="detail"),
                *COMMON_BINDINGS]
    DEFAULT_CSS = """
    MainScreen { layout: vertical; }
    #bottom { height: auto; }
    MainScreen.narrow #plots { display: none; }
    MainScreen.short #plots { display: none; }
    MainScreen.short #bottom { height: 1fr; }
    MainScreen.short ActionLog { height: 1fr; min-height: 3; }
    """

    @property
    def papp(self) -> PodConsoleApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        ctx = self.papp.ctx
        yield PodHeader(ctx.profile_name, ctx.demo is not None, ctx.registry.read_only)
        yield SlotsTable(id="slots")
        yield PlotGrid(id="plots")
        with Vertical(id="bottom", classes="bottom"):
            yield AlertsPanel(id="alerts")
            yield ActionLog(id="log")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(SlotsTable).focus()
        self.on_resize()
        log = self.query_one(ActionLog)
        for t, text, style in self.papp.log_lines:  # what happened before this screen opened
            log.add(t, text, style)
        self.refresh_view()

    def on_resize(self, event: object = None) -> None:
        w, h = self.app.size
        self.set_class(w < 100, "narrow")
        self.set_class(h < 34, "short")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "op" and parameters:
            return self.papp.ctx.registry.allowed(str(parameters[0]))
        return True

    def refresh_view(self) -> None:
        app = self.papp
        now = app.now()
        self.query_one(PodHeader).show(app.pod, now, app.stale_text())
        snap = app.snapshot
        if snap is not None:
            prof = app.ctx.profile
            gpus = {n: ",".join(map(str, s.gpus)) for n, s in prof.slots.items()}
            agent = app.pod.agent_slots if app.pod else {}
            utils = {n: float(agent.get(n, {}).get("gpu_util", s.gpu_util))
                     for n, s in prof.slots.items()}
            states = {n: str(agent.get(n, {}).get("state", "")) for n in prof.slots}
            self.query_one(SlotsTable).show(snap, gpus, utils, states)
            self.query_one(PlotGrid).show(app.ctx.history, snap,
                                          [s.slot for s in snap.slots], now)
        self.query_one(AlertsPanel).show(app.alerts.sorted(), now)

    def log_line(self, t: float, text: str, style: str = "") -> None:
        self.query_one(ActionLog).add(t, text, style)

    def action_op(self, action_id: str) -> None:
        self.papp.start_operation(action_id)

    def action_detail(self) -> None:
        slot = self.query_one(SlotsTable).selected_slot()
        if slot:
            self.papp.open_detail(slot)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.papp.open_detail(str(event.row_key.value))
