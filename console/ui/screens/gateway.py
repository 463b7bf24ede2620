"""The gateway (``G``): LiteLLM's model groups and deployments (requests/s, 4xx/5xx,
latency p95, the gateway's own overhead, state with the cooldown trap handled,
fallbacks) and the users/keys table of today (requests, tokens, spend, last seen).

The path "client → LiteLLM → slot" on one screen: each deployment's ``api_base`` is
shown beside the slot it reaches (by port) and that slot's health. Renders the state it
is handed; the session polls the gateway (``console/sources/collect/gateway.py``)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from console.model import catalog, fmt
from console.model.gateway import STATUS_TEXT, GatewaySnapshot, port_of
from console.model.printable import printable
from console.model.redact import redact_url
from console.session.view import ConsoleState
from console.ui.screens.base import URGENT_BINDINGS, ConsoleScreen
from console.ui.widgets.header import PodHeader
from console.ui.widgets.keybar import KeyBar
from console.ui.widgets.lines import safe_text

STATUS_STYLE = {"healthy": "ok", "partial": "warn", "cooldown": "fault",
                "failing": "crit", "outage-past": "warn.faint", "unknown": "dim"}
COLUMNS = sorted(((f, f.column) for f in catalog.GATEWAY if f.column),
                 key=lambda fc: fc[1].order)


def reaches(api_base: str | None) -> str:
    """Where a deployment sends its calls, short: ``host:port`` (its scheme and path say
    nothing here, and a full URL would take the figures' room)."""
    if not api_base:
        return fmt.DASH
    rest = redact_url(printable(api_base)).split("://", 1)[-1]
    return rest.split("/", 1)[0].rpartition("@")[2]


def fitting_columns(width: int, fixed: int) -> list[tuple[catalog.Figure, catalog.Column]]:
    """The figure columns that fit beside ``fixed`` cells, chosen by priority (1 first,
    then 2, 3) and shown in their order: a narrow terminal keeps requests/s, 5xx, p95,
    the overhead and cooldowns whole instead of squeezing every column to an ellipsis."""
    chosen: list[tuple[catalog.Figure, catalog.Column]] = []
    used = fixed
    for f, col in sorted(COLUMNS, key=lambda fc: (fc[1].priority, fc[1].order)):
        need = max(len(col.header), col.width) + 1  # the table's one cell of padding
        if used + need > width:
            continue
        chosen.append((f, col))
        used += need
    return sorted(chosen, key=lambda fc: fc[1].order)


def groups_table(gw: GatewaySnapshot, state: ConsoleState, width: int = 1000) -> Table:
    t = Table(box=None, padding=(0, 1, 0, 0), header_style="dim", expand=False)
    slots = {s.port: s for s in state.snapshot.slots} if state.snapshot else {}
    by_group: dict[str, list] = {}
    for d in gw.deployments:
        by_group.setdefault(d.group, []).append(d)
    names = [*gw.groups, *by_group, *("  " + d.model_id for d in gw.deployments)]
    name_w = min(28, max((len(n) for n in names), default=5), max(12, width // 5))
    wheres = []
    for d in gw.deployments:
        slot = slots.get(port_of(d.api_base) or -1)
        wheres.append(len(slot.slot) + 1 + len(slot.health) if slot is not None
                      else len(reaches(d.api_base)))
    where_w = min(24, max([len("→ slot"), *wheres]))
    state_w = max((len(STATUS_TEXT[d.status]) for d in gw.deployments), default=5)
    columns = fitting_columns(width, name_w + state_w + where_w + 3)
    name_w = max(name_w, len("deployment"))
    t.add_column("group / deployment" if name_w >= 18 else "deployment", no_wrap=True,
                 max_width=name_w, overflow="ellipsis")
    t.add_column("state", no_wrap=True)
    for _, col in columns:
        t.add_column(col.header, justify="right", no_wrap=True)
    t.add_column("→ slot", no_wrap=True, max_width=where_w, overflow="ellipsis")
    for group in sorted(set(gw.groups) | set(by_group)):
        values = gw.groups.get(group, {})
        # every word drawn here came from the proxy's labels: cleaned when read, and
        # again here, where it is drawn (a recording from an older console)
        t.add_row(Text(printable(group), "bold"), Text(""),
                  *[Text(f.show(values.get(f.key))) for f, _ in columns], Text(""))
        for d in by_group.get(group, []):
            slot = slots.get(port_of(d.api_base) or -1)
            where = Text(reaches(d.api_base), "dim")
            if slot is not None:
                where = Text.assemble((slot.slot, "bold"), " ",
                                      (slot.health, "ok" if slot.health == "up"
                                       else "crit"))
            t.add_row(Text("  " + printable(d.model_id)), Text(STATUS_TEXT[d.status],
                                                    STATUS_STYLE[d.status]),
                      *[Text(f.show(d.figure(f.key))) for f, _ in columns], where)
    return t


def users_table(gw: GatewaySnapshot, now: float, active_s: float) -> Table:
    t = Table(box=None, padding=(0, 1), header_style="dim", expand=False)
    for col in ("user / key", "team"):
        t.add_column(col, justify="left", no_wrap=True)
    for col in ("requests", "tokens", "spend", "last seen"):
        t.add_column(col, justify="right", no_wrap=True)
    for u in gw.users:
        recent = u.last_seen is not None and now - u.last_seen <= active_s
        seen = fmt.DASH if u.last_seen is None else (
            f"{fmt.elapsed(now - u.last_seen)} ago")
        t.add_row(Text(printable(u.name), "bold" if recent else ""),
                  Text(printable(u.team or fmt.DASH), "dim"),
                  fmt.num(u.requests),
                  fmt.num(u.tokens), fmt.money(u.spend, 4), Text(seen, "" if recent
                                                                   else "dim"))
    return t


class GatewayScreen(ConsoleScreen):
    BINDINGS = [Binding("escape,backspace,G", "app.pop_screen", "back", id="back"),
                Binding("question_mark", "app.help", "help", id="help"),
                Binding("q", "app.quit", "quit", id="quit"),
                *URGENT_BINDINGS]
    DEFAULT_CSS = """
    GatewayScreen #gwline { height: auto; padding: 0 1; }
    GatewayScreen #gwgroups { height: auto; border: round $primary; padding: 0 1; }
    GatewayScreen #gwusers { height: 1fr; border: round $secondary; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        view = self.state.view
        yield PodHeader(view.title, view.demo, view.read_only)
        yield Static(id="gwline")
        yield Static(id="gwgroups")
        yield Static(id="gwusers")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#gwgroups", Static).border_title = "model groups · deployments"
        self.query_one("#gwusers", Static).border_title = "users / keys today"
        self.render_state(self.state)

    def render_state(self, state: ConsoleState) -> None:
        self.query_one(PodHeader).show_state(state)
        gw = state.gateway
        line = self.query_one("#gwline", Static)
        groups = self.query_one("#gwgroups", Static)
        users = self.query_one("#gwusers", Static)
        if gw is None:
            line.update(Text("no gateway watched: set gateway_url (docs/gateway.md)",
                             "dim"))
            groups.update("")
            users.update("")
            return
        head = Text.assemble((gw.headline(), "bold" if gw.live else "crit"),
                             ("  " + redact_url(gw.url), "dim"))
        window = (f"window {fmt.duration(gw.window_s)}" if gw.window_s
                  else "lifetime (one scrape so far)")
        head.append(f"  ·  {window} · via {gw.via}", "dim")
        for note in (gw.metrics_error, gw.workers_note):
            if note:
                head.append("\n" + note, "warn")
        line.update(safe_text(head))
        # inside the panel's border and padding: the columns that fit, whole
        inner = (groups.size.width or self.app.size.width) - 4
        groups.update(groups_table(gw, state, inner))
        users.border_subtitle = (f"bold: a request within "
                                 f"{fmt.duration(state.active_window_s, False)}")
        users.update(users_table(gw, state.now, state.active_window_s) if gw.users else
                     Text("no per-user counters (LiteLLM's prometheus callback labels "
                          "them by key, user and end user)", "dim"))
