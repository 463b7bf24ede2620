"""The fleet: every context's pod on one line (``F``), k9s's ``:ctx`` as a screen.

It renders the :class:`~console.session.fleet.FleetSnapshot` of the state it is handed; ``enter``
asks the app to switch the console to the pod under the cursor (the app reopens itself
on that context), ``escape`` goes back."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Static

from console.model import fmt, slo
from console.model.fleet import FleetSnapshot
from console.session.view import ConsoleState
from console.ui.screens.base import URGENT_BINDINGS, ConsoleScreen
from console.ui.widgets.columns import Column, fitted_table, short_gpu
from console.ui.widgets.header import PodHeader
from console.ui.widgets.keybar import KeyBar

HEALTH_STYLE = {"up": "ok", "down": "crit", "starting": "warn"}


def fleet_columns(fleet: FleetSnapshot) -> list[Column]:
    """The fleet's columns, numbers first (state, $/h, today, alerts before the text),
    each with what it holds per pod."""
    rows = fleet.rows
    ctx, state, hourly, today, alerts, slots, worst = [], [], [], [], [], [], []
    ttft, kv, slo_cells, stop, gpus, month, pod = [], [], [], [], [], [], []
    for r in rows:
        crit = sum(1 for s, _ in r.alerts if s == "crit")
        warn = len(r.alerts) - crit
        a = Text(f"{crit} crit" if crit else "", style="crit")
        if warn:
            a.append((" " if crit else "") + f"{warn} warn", style="warn")
        ctx.append(Text(("● " if r.context == fleet.current else "  ") + r.context))
        state.append(Text(r.status or ("ERROR" if r.error else "?"),
                          style="ok" if r.status == "RUNNING" else "warn"))
        hourly.append(Text(fmt.money(r.cost_per_hr)))
        today.append(Text(fmt.money(r.spend_today)))
        alerts.append(a if a.plain else Text("none", "dim"))
        slots.append(Text(f"{r.slots_up}/{r.slots}"))
        worst.append(Text("–") if r.worst_health is None else
                     Text(f"{r.worst_slot} {r.worst_health.upper()}",
                          style=HEALTH_STYLE.get(r.worst_health, "")))
        ttft.append(Text(fmt.secs(r.ttft_p95_s)))
        kv.append(Text(fmt.pct(r.kv_p99)))
        # coloured by band as the wall's tile (vLLM's Service Status board)
        slo_cells.append(Text(r.slo_text(), style=slo.STYLES[slo.colour(r.slo_attainment)]
                              if r.slo_attainment is not None else "dim"))
        stop.append(Text(fmt.DASH if r.stop_in_s is None else
                         fmt.elapsed(r.stop_in_s)))
        gpus.append(Text(short_gpu(r.gpu_count, r.gpu_name)))
        month.append(Text(fmt.money(r.spend_month)))
        pod.append(Text(r.pod_id or fmt.DASH))
    cols: list[Column] = [
        ("CONTEXT", 14, 0, ctx), ("STATE", 9, 0, state), ("$/h", None, 0, hourly),
        ("TODAY", None, 1, today), ("ALERTS", 14, 0, alerts), ("SLOTS", None, 2, slots),
        ("WORST", 12, 2, worst), ("TTFT p95", None, 3, ttft), ("KV p99", None, 3, kv),
        ("SLO", 14, 4, slo_cells), ("STOP", None, 4, stop), ("GPUs", 16, 5, gpus),
        ("MONTH", None, 6, month), ("POD", 14, 7, pod)]
    # no pod with an SLO target: no column of –
    return cols if any(r.slo_set for r in rows) else [c for c in cols if c[0] != "SLO"]


class FleetScreen(ConsoleScreen):
    BINDINGS = [Binding("escape,backspace,F", "app.pop_screen", "back", id="back"),
                Binding("up,k", "cursor(-1)", "up", show=False),
                Binding("down,j", "cursor(1)", "down", show=False),
                Binding("enter", "switch", "switch to this pod", id="switch"),
                Binding("question_mark", "app.help", "help", id="help"),
                Binding("q", "app.quit", "quit", id="quit"),
                *URGENT_BINDINGS]

    class SwitchContext(Message):
        def __init__(self, context: str) -> None:
            super().__init__()
            self.context = context

    def __init__(self, state: ConsoleState) -> None:
        super().__init__(state)
        self.cursor = 0

    def compose(self) -> ComposeResult:
        view = self.state.view
        yield PodHeader(view.title, view.demo, view.read_only)
        yield Static(id="fleet")
        yield Static(id="fleet-total")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#fleet", Static).border_title = "fleet: one line per pod"
        self.render_state(self.state)

    def rows(self) -> list[str]:
        f = self.state.fleet
        return [r.context for r in f.rows] if f is not None else []

    def action_cursor(self, delta: int) -> None:
        n = len(self.rows())
        if n:
            self.cursor = max(0, min(n - 1, self.cursor + delta))
            self.render_state(self.state)

    def action_switch(self) -> None:
        rows = self.rows()
        if rows:
            self.post_message(self.SwitchContext(rows[min(self.cursor, len(rows) - 1)]))

    def on_resize(self) -> None:
        if self.is_mounted and self.query("#fleet"):
            self.render_state(self.state)  # the columns that fit the new width

    def render_state(self, state: ConsoleState) -> None:
        self.state = state
        self.query_one(PodHeader).show_state(state)
        fleet = state.fleet
        out = self.query_one("#fleet", Static)
        if fleet is None:
            out.update(Text("reading every context's pod…", style="dim"))
            return
        cols = fleet_columns(fleet)
        width = max(20, (out.size.width or self.app.size.width) - 1)
        n = len(fleet.rows)
        out.update(fitted_table(cols, width, n, ["reverse" if i == self.cursor else ""
                                                 for i in range(n)]))
        lines = [f"fleet: {fmt.money(fleet.cost_per_hr)}/h running · today "
                 f"{fmt.money(fleet.spend_today)} · this month {fmt.money(fleet.spend_month)}"]
        if fleet.shared_prometheus:
            lines.append(f"figures: {fleet.queries} queries to {fleet.shared_prometheus} "
                         "for every slot of every pod")
        lines += [f"{r.context}: {r.error}" for r in fleet.rows if r.error]
        lines.append(f"read {fmt.duration(max(0.0, state.now - fleet.fetched_at))} ago · "
                     "enter switches the console to the pod under the cursor")
        self.query_one("#fleet-total", Static).update(Text("\n".join(lines), style="dim"))
