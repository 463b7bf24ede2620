"""The fleet: every context's pod on one line (``F``), k9s's ``:ctx`` as a screen.

It renders the :class:`~console.session.fleet.FleetSnapshot` of the state it is handed; ``enter``
asks the app to switch the console to the pod under the cursor (the app reopens itself
on that context), ``escape`` goes back."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Static

from console.model import fmt
from console.session.view import ConsoleState
from console.ui.screens.base import URGENT_BINDINGS, ConsoleScreen
from console.ui.widgets.header import PodHeader
from console.ui.widgets.keybar import KeyBar

HEALTH_STYLE = {"up": "green", "down": "bold red", "starting": "yellow"}


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

    def render_state(self, state: ConsoleState) -> None:
        self.state = state
        self.query_one(PodHeader).show_state(state)
        fleet = state.fleet
        out = self.query_one("#fleet", Static)
        if fleet is None:
            out.update(Text("reading every context's pod…", style="dim"))
            return
        t = Table(box=None, pad_edge=False, expand=True)
        for col in ("CONTEXT", "POD", "STATE", "GPUs", "$/h", "TODAY", "MONTH", "STOP",
                    "SLOTS", "WORST", "TTFT p95", "KV p99", "ALERTS"):
            t.add_column(col, no_wrap=True)
        for i, r in enumerate(fleet.rows):
            crit = sum(1 for s, _ in r.alerts if s == "crit")
            warn = len(r.alerts) - crit
            alerts = Text(f"{crit} crit" if crit else "", style="bold red")
            if warn:
                alerts.append((" " if crit else "") + f"{warn} warn", style="yellow")
            style = "reverse" if i == self.cursor else ""
            mark = "● " if r.context == fleet.current else "  "
            worst = (Text("–") if r.worst_health is None else
                     Text(f"{r.worst_slot} {r.worst_health.upper()}",
                          style=HEALTH_STYLE.get(r.worst_health, "")))
            t.add_row(mark + r.context, r.pod_id or fmt.DASH,
                      Text(r.status or ("ERROR" if r.error else "?"),
                           style="green" if r.status == "RUNNING" else "yellow"),
                      f"{r.gpu_count}× {r.gpu_name}" if r.gpu_count and r.gpu_name
                      else (r.gpu_name or fmt.DASH),
                      fmt.money(r.cost_per_hr), fmt.money(r.spend_today),
                      fmt.money(r.spend_month),
                      fmt.DASH if r.stop_in_s is None else fmt.duration(r.stop_in_s, False),
                      f"{r.slots_up}/{r.slots}", worst, fmt.secs(r.ttft_p95_s),
                      fmt.pct(r.kv_p99), alerts if alerts.plain else Text("none", "dim"),
                      style=style)
        out.update(t)
        lines = [f"fleet: {fmt.money(fleet.cost_per_hr)}/h running · today "
                 f"{fmt.money(fleet.spend_today)} · this month {fmt.money(fleet.spend_month)}"]
        if fleet.shared_prometheus:
            lines.append(f"figures: {fleet.queries} queries to {fleet.shared_prometheus} "
                         "for every slot of every pod")
        lines += [f"{r.context}: {r.error}" for r in fleet.rows if r.error]
        lines.append(f"read {fmt.duration(max(0.0, state.now - fleet.fetched_at))} ago · "
                     "enter switches the console to the pod under the cursor")
        self.query_one("#fleet-total", Static).update(Text("\n".join(lines), style="dim"))
