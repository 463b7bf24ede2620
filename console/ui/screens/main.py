"""The main screen: header, slots table, plots, alerts and the action log."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical

from console.model import startup
from console.operations.specs import SPECS
from console.session.view import ConsoleState
from console.ui.screens.base import ConsoleScreen
from console.ui.widgets.gpu_strip import GpuStrip
from console.ui.widgets.header import PodHeader
from console.ui.widgets.keybar import KeyBar
from console.ui.widgets.panels import ActionLog, AlertsPanel
from console.ui.widgets.plots import PlotGrid
from console.ui.widgets.slots import SlotsTable

if TYPE_CHECKING:
    from console.ui.screens.filter_prompt import FilterPrompt

OPERATION_BINDINGS = [Binding(spec.key, f"op({spec.id!r})", spec.label or spec.title,
                              id=spec.id)
                      for spec in SPECS.values() if spec.dangerous or spec.audited]
"""One binding per operation, from the registry's specs: a key is written once."""
FIRST_BINDINGS = [
    Binding("question_mark", "app.help", "help", id="help"),
    Binding("q", "app.quit", "quit", id="quit"),
]
"""First in the footer: on a phone's 80 columns the footer is cut from the right, and
help and quit must never be what is cut."""
COMMON_BINDINGS = [
    *FIRST_BINDINGS,
    Binding("ctrl+r,f5", "app.refresh_now", "refresh", id="refresh"),
    Binding("A", "app.alert_history", "alert history", id="alert_history", show=False),
    Binding("g", "app.gpus", "GPUs: readings, programs, Xid, plots", id="gpus", show=False),
    Binding("G", "app.gateway", "gateway: model groups, deployments, users", id="gateway",
            show=False),
    Binding("F", "app.fleet", "fleet: every context's pod, enter switches", id="fleet",
            show=False),
    Binding("L", "app.full_log", "full action log (/ searches)", id="full_log", show=False),
    Binding("plus,equals_sign", "app.refresh_rate(1)", "refresh faster", id="faster",
            show=False),
    Binding("minus", "app.refresh_rate(-1)", "refresh slower", id="slower", show=False),
]


class MainScreen(ConsoleScreen):
    BINDINGS = [*FIRST_BINDINGS, *OPERATION_BINDINGS,
                Binding("enter", "detail", "detail", id="detail"), *COMMON_BINDINGS[2:],
                Binding("slash", "filter", "filter slots", id="filter", show=False),
                Binding("escape", "clear_filter", "clear the filter", id="clear_filter",
                        show=False)]

    def __init__(self, state: ConsoleState,
                 log: tuple[tuple[float, str, str], ...] = ()) -> None:
        super().__init__(state)
        self._unshown: deque[tuple[float, str, str, bool]] = deque(
            ((t, text, style, False) for t, text, style in log), maxlen=ActionLog.KEEP)
        """Lines noted while no log widget is there to draw them: before the screen is
        composed (what happened before it opened, too), and while it closes (Textual
        removes its widgets first). ``_draw_log`` hands them over once one is there."""

    def help_sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        from console.ui.help_text import slot_sections, watchdog_keys

        return [*slot_sections(self.state.thresholds, self.state.stall_after_s),
                ("Other keys", [("esc", "clears a kept filter; closes a dialog or a "
                                        "prompt; on another screen: back here"),
                                ("click", "a column's header sorts by it (again: the "
                                          "other way); numbers sort worst first")]),
                watchdog_keys()]

    def compose(self) -> ComposeResult:
        view = self.state.view
        yield PodHeader(view.title, view.demo, view.read_only)
        yield GpuStrip()
        yield SlotsTable(id="slots")
        yield PlotGrid(self.state.ready, view.plot_refresh_s, id="plots")
        with Vertical(id="bottom", classes="bottom"):
            yield AlertsPanel(id="alerts")
            yield ActionLog(id="log")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(SlotsTable).focus()
        self.on_resize()
        self._draw_log()
        self.render_state(self.state)

    def on_resize(self, event: object = None) -> None:
        w, h = self.app.size
        self.set_class(w < 100, "narrow")
        self.set_class(h < 34, "short")
        if self.is_mounted:
            self._alert_room()

    def render_state(self, state: ConsoleState) -> None:
        now = state.now
        self.query_one(PodHeader).show_state(state)
        self.query_one(GpuStrip).show_state(state)
        snap = state.snapshot
        if snap is not None:
            self.query_one(SlotsTable).show(
                snap, state.gpus, state.utils, state.states, state.thresholds,
                state.slot_marks, state.stalled,
                state.phases if state.phases is not None else
                startup.phase_cells(state.pod.agent_slots if state.pod else None))
            self.query_one(PlotGrid).show(state.history, snap, [s.slot for s in snap.slots],
                                          now, exact=state.replay is not None,
                                          ahead=state.replay.ahead if state.replay else None,
                                          thresholds=state.thresholds)
        self._alert_room()
        self.query_one(AlertsPanel).show(list(state.alerts), now)

    def _alert_room(self) -> None:
        """The alerts panel's room at this size: it grows before the plots do."""
        from console.ui.widgets.panels import alert_room

        table = self.query_one(SlotsTable)
        prompts = self.query("#filter")
        room = alert_room(self.app.size.height, min(12, 1 + len(table.slots)),
                          self.query_one(GpuStrip).display,
                          not (self.has_class("narrow") or self.has_class("short")),
                          bool(prompts) and prompts.first().display)
        if prompts and prompts.first().display:
            room -= 1  # its hint line
        self.query_one(AlertsPanel).set_room(room)

    async def when_ready(self) -> None:
        await self.query_one(PlotGrid).mount_plots()
        self.refresh_bindings()

    def log_line(self, t: float, text: str, style: str = "", replace: bool = False) -> None:
        if replace and self._unshown:  # in place of a line not drawn yet
            self._unshown[-1] = (t, text, style, self._unshown[-1][3])
        else:
            self._unshown.append((t, text, style, replace))
        self._draw_log()

    def _draw_log(self) -> None:
        """The lines not drawn yet into the log widget, when there is one: a poll's line
        can come between the push and the compose, or while the console quits (the
        screen still in the stack, its widgets gone); the app keeps every line."""
        logs = self.query(ActionLog)
        if not logs:
            return
        log = logs.first()
        while self._unshown:
            t, text, style, replace = self._unshown.popleft()
            log.add(t, text, style, replace)

    async def action_filter(self) -> None:
        """``/``: a prompt under the table (k9s-like) and a line saying what it does; the
        table follows what is typed; enter keeps it, escape clears it."""
        from textual.widgets import Static

        from console.ui.screens.filter_prompt import HINT, FilterPrompt

        table = self.query_one(SlotsTable)
        prompts = self.query(FilterPrompt)
        prompt = prompts.first() if prompts else None
        if prompt is None:  # built on first use: the first frame does not pay for Input
            prompt = FilterPrompt(id="filter")
            hint = Static(f"/ {HINT}", id="filter-hint")
            await self.mount(prompt, hint, after=table)
        prompt.value = table.filter
        prompt.display = True
        self.query_one("#filter-hint").display = True
        prompt.focus()
        self._alert_room()

    def action_clear_filter(self) -> None:
        """Esc on the main screen: the kept filter goes (its crumb says esc clears)."""
        table = self.query_one(SlotsTable)
        if table.filter:
            table.set_order(filter="")

    def on_filter_prompt_typed(self, event: FilterPrompt.Typed) -> None:
        self.query_one(SlotsTable).set_order(filter=event.value)

    def on_filter_prompt_done(self, event: FilterPrompt.Done) -> None:
        table = self.query_one(SlotsTable)
        table.set_order(filter=event.value)
        event.prompt.display = False
        self.query_one("#filter-hint").display = False
        table.focus()
        self._alert_room()

    def action_op(self, operation_id: str) -> None:
        spec = SPECS.get(operation_id)
        args = {}
        if spec is not None and spec.per_slot:
            slot = self.query_one(SlotsTable).selected_slot()
            if slot is None:
                return
            args["slot"] = slot
        self.post_message(self.Operation(operation_id, args))

    def action_detail(self) -> None:
        slot = self.query_one(SlotsTable).selected_slot()
        if slot:
            self.post_message(self.OpenDetail(slot))

    def on_slots_table_selected(self, event: SlotsTable.Selected) -> None:
        event.stop()
        self.post_message(self.OpenDetail(event.slot))
