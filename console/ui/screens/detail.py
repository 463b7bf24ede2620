"""Slot detail: every figure of one slot, its plots, and its recent log lines (via the agent)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import RichLog, Static

from console.model import catalog, fmt, slo, startup
from console.model.engines import DEFAULT, engine
from console.model.printable import printable
from console.model.snapshot import SlotSnapshot
from console.session.view import ConsoleState
from console.ui.screens.base import URGENT_BINDINGS, ConsoleScreen
from console.ui.widgets.header import PodHeader
from console.ui.widgets.keybar import KeyBar
from console.ui.widgets.plots import PlotGrid


def detail_figures() -> list[catalog.Figure]:
    """The catalog's detail figures, each beside the one it is read with: KV p99 right
    after KV now (the catalog lists it last, with the figures over time)."""
    figs = [f for f in catalog.CATALOG if f.detail]
    for key, after in {"kv_p99": "kv_cache_usage"}.items():
        fig = next((f for f in figs if f.key == key), None)
        if fig is None or not any(f.key == after for f in figs):
            continue
        figs.remove(fig)
        figs.insert(next(i for i, f in enumerate(figs) if f.key == after) + 1, fig)
    return figs


SOURCE_WORDS = {"direct": "the slot's own /metrics", "prometheus": "Prometheus"}


def source_words(source: str | None, window_s: float | None,
                 at: float | None = None) -> str:
    """Where a slot's figures come from and over what time, in words ("the slot's own
    /metrics, over the last 58 s"), not ``direct · 58s``; through Prometheus, the one
    instant its queries were evaluated at ("..., to 03:10:05")."""
    where = SOURCE_WORDS.get(source or "", source or fmt.DASH)
    if not window_s:
        return f"{where}, since the server started"
    span = f"{window_s:.0f} s" if window_s < 120 else fmt.duration(window_s, False)
    to = f", to {fmt.clock(at)}" if at is not None else ""
    return f"{where}, over the last {span}{to}"


def figures_table(s: SlotSnapshot, now: float, per_row: int = 2,
                  agent: Mapping[str, Any] | None = None, thresholds: Any = None) -> Table:
    """Every catalog figure of the slot's engine, ``per_row`` to a row, then what is not
    one number. A figure the engine does not export is no row; per-position acceptance,
    which SGLang does not export, says so (never 0)."""
    f = s.figures
    eng = engine(s.engine)
    t = Table.grid(padding=(0, 2))
    for _ in range(per_row):
        t.add_column(style="dim")
        t.add_column()
    sd = f.spec_decode if f else None
    c = f.cache if f else None
    cells: list[tuple[str, str]] = [
        ("health", f"{s.health} ({s.health_detail})"),
        ("figures from", source_words(s.source, f.window_s if f else None,
                                      f.at if f else None)),
        ("served", ", ".join(s.served_models) or fmt.DASH),
        ("probe", {True: "ok", False: f"FAILED {s.probe_detail}", None: "not yet"}[s.probe_ok]),
    ]
    if eng is not DEFAULT:
        cells.append(("engine", eng.title))
    # while it starts, this start's phases and times; and the last start's beside them
    cells += startup.detail_rows(agent)
    cells += [(fig.label + (f" ({eng.notes[fig.key]})" if fig.key in eng.notes else ""),
               fig.show(s.figure(fig.key))) for fig in detail_figures()
              if not fig.words and fig.source_for(eng) is not None]
    # SLO attainment: each latency's share, its target and the edge it was counted at
    cells += [slo.detail(r) for r in slo.readings(f, thresholds)]
    cells += [
        ("preemptions/s", fmt.num(f.preemption_rate if f else None, 3)),
        ("requests/s", fmt.num(f.request_rate if f else None, 2)),
        ("by reason", ", ".join(f"{k} {v:g}" for k, v in (f.requests_by_reason.items()
                                                          if f else ()) if v) or fmt.DASH),
        ("per position", f"not exported by {eng.title}" if eng.per_position is None else
         " · ".join(fmt.pct(x) for x in (sd.per_position if sd else ())) or fmt.DASH),
        ("KV blocks", f"{fmt.num(c.num_gpu_blocks if c else None)} × "
                      f"{fmt.num(c.block_size if c else None)}"),
        ("applied util", fmt.num(c.gpu_memory_utilization if c else None, 2)),
        ("KV tokens", fmt.num(c.kv_tokens if c else None)),
    ]
    cells += [("", "")] * (-len(cells) % per_row)
    for i in range(0, len(cells), per_row):
        # Text, not str: a server's error or a model name is shown as written, never
        # read as Rich markup ("[y]" vanishing, "[/]" raising)
        # read as Rich markup ("[y]" vanishing, "[/]" raising), and with no control
        # character (a model id's escape sequence retitled the terminal)
        t.add_row(*(Text(printable(x)) for pair in cells[i:i + per_row] for x in pair))
    if s.stale_since is not None:
        t.add_row("STALE", Text(printable(f"since {fmt.clock(s.stale_since)} — {s.error}"),
                                style="crit"), *[""] * (2 * per_row - 2))
    return t


class SlotDetailScreen(ConsoleScreen):
    DEFAULT_CSS = """
    #dfig { height: auto; padding: 0 1; border: round $primary; }
    #dbody { height: 1fr; }
    #dlog { height: auto; min-height: 6; border: round $secondary; }
    SlotDetailScreen.short #dplots { display: none; }
    """
    BINDINGS = [Binding("escape,backspace", "app.pop_screen", "back", id="back"),
                Binding("l", "reload_logs", "reload logs", id="logs"),
                Binding("ctrl+r,f5", "app.refresh_now", "refresh", id="refresh"),
                Binding("question_mark", "app.help", "help", id="help"),
                Binding("q", "app.quit", "quit", id="quit"),
                *URGENT_BINDINGS]

    HELP_TITLE = "slot detail"

    def __init__(self, state: ConsoleState, slot: str) -> None:
        super().__init__(state)
        self.slot = slot

    def help_sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        from console.ui.help_text import DETAIL_WORDS, SLOT_STATES, thresholds

        th = {self.slot: self.state.thresholds[self.slot]} \
            if self.slot in self.state.thresholds else {}
        return [("Rows", DETAIL_WORDS), ("States", SLOT_STATES),
                ("Thresholds in force", thresholds(th, self.state.stall_after_s)),
                ("Scrolling", [("↑ ↓ PgUp PgDn", "scroll the page; Home: its top, End: "
                                                "the log's end; the wheel too")])]

    def compose(self) -> ComposeResult:
        view = self.state.view
        yield PodHeader(view.title, view.demo, view.read_only)
        # one scroll for the whole page, focused: PageUp, Home, ↑ and the wheel move it
        # from its top (title, health) to the log's end. The log grows to its lines and
        # takes no focus, so no inner scroll takes the keys and leaves the top unreachable
        with VerticalScroll(id="dbody"):
            yield Static(id="dfig")
            yield PlotGrid(self.state.ready, view.plot_refresh_s, id="dplots")
            log = RichLog(max_lines=400, wrap=True, id="dlog")
            log.can_focus = False
            yield log
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#dfig", Static).border_title = f"slot {self.slot}"
        self.query_one("#dlog", RichLog).border_title = "recent log lines (agent)"
        self.set_class(self.app.size.height < 34, "short")
        self.query_one("#dbody", VerticalScroll).focus(scroll_visible=False)
        self.render_state(self.state)
        self.action_reload_logs()

    async def when_ready(self) -> None:
        await self.query_one(PlotGrid).mount_plots()
        self.render_state(self.state)

    def render_state(self, state: ConsoleState) -> None:
        now = state.now
        self.query_one(PodHeader).show_state(state)
        snap = state.snapshot.slot(self.slot) if state.snapshot else None
        if snap is None:
            self.query_one("#dfig", Static).update("no data yet")
            return
        agent = state.pod.agent_slots.get(self.slot) if state.pod else None
        self.query_one("#dfig", Static).update(figures_table(
            snap, now, agent=agent, thresholds=state.thresholds.get(self.slot)))
        self.query_one(PlotGrid).show(state.history, state.snapshot, [self.slot], now,
                                      exact=state.replay is not None,
                                      ahead=state.replay.ahead if state.replay else None,
                                      thresholds=state.thresholds)

    def action_reload_logs(self) -> None:
        self.post_message(self.WantLogs(self.slot, self._show_logs))

    def _show_logs(self, lines: list[str]) -> None:
        found = self.query("#dlog")
        if not found:  # closed while the agent answered: nothing shows them now
            return
        log = found.first(RichLog)
        log.clear()
        for line in lines:
            log.write(Text(printable(line)))  # the slot's own output, as text only
