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
        view = self.papp.view
        yield PodHeader(view.profile_name, view.demo, view.read_only)
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
            return self.papp.allowed(str(parameters[0]))
        return True

    def refresh_view(self) -> None:
        app = self.papp
        now = app.now()
        self.query_one(PodHeader).show(app.pod, now, app.stale_text())
        snap = app.snapshot
        if snap is not None:
            targets = app.view.targets
            gpus = {t.slot: ",".join(map(str, t.gpus)) for t in targets}
            agent = app.pod.agent_slots if app.pod else {}
            utils = {t.slot: float(agent.get(t.slot, {}).get("gpu_util", t.gpu_util))
                     for t in targets}
            states = {t.slot: str(agent.get(t.slot, {}).get("state", "")) for t in targets}
            self.query_one(SlotsTable).show(snap, gpus, utils, states)
            self.query_one(PlotGrid).show(app.history, snap, [s.slot for s in snap.slots], now)
        self.query_one(AlertsPanel).show(app.alerts.sorted(), now)

    async def when_ready(self) -> None:
        await self.query_one(PlotGrid).mount_plots()
        self.refresh_bindings()

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
