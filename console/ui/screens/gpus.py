"""The GPUs (``g``): every GPU's readings, the programs on each (and which slot owns
them), recent Xid errors, and plots of utilisation, memory, temperature and power.

Renders the state it is handed after every poll, like every other screen; the GPU
series are recorded by the session from each pod poll
(``console.session.gpu_history.record_gpus``)."""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid
from textual.widgets import Static

from console.model import fmt
from console.model.gpu_state import Gpu, GpuReport
from console.session.view import ConsoleState
from console.ui.screens.base import URGENT_BINDINGS, ConsoleScreen
from console.ui.widgets.gpu_strip import GpuStrip
from console.ui.widgets.header import PodHeader
from console.ui.widgets.keybar import KeyBar

GPU_PLOTS = (("gpu_util", "GPU utilisation", 1.0, "%"), ("gpu_mem", "GPU memory", 100.0, "%"),
             ("gpu_temp", "GPU temperature", 1.0, "°C"), ("gpu_power", "GPU power", 1.0, "W"))
"""(history metric, title, scale, unit); each GPU is a series named ``GPU<i>``."""


def _gib(b: int | None) -> str:
    return fmt.DASH if b is None else f"{b / 2**30:.1f}"


MARK_STYLE = {"HOT": "bold yellow"}
"""A mark's style (a hardware fault: white on red)."""


def state_cell(mark: str | None) -> Text:
    """A GPU's state: ``ok``, or what is wrong with it (a fault outlives its readings:
    a GPU off the bus may still report the numbers of a healthy one)."""
    if mark is None:
        return Text("ok", "green")
    return Text(mark, MARK_STYLE.get(mark, "bold white on red"))


def gpu_table(report: GpuReport, marks: Mapping[int, str] | None = None) -> Table:
    t = Table(box=None, padding=(0, 1), header_style="dim", expand=False)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("GPU", "left"), ("state", "left"), ("name", "left"), ("util", "right"),
        ("memory GiB", "right"),
        ("temp", "right"), ("power W", "right"), ("SM MHz", "right"), ("throttled", "left"),
        ("ECC sbe/dbe", "right"), ("remap", "left"), ("NVLink", "right"))
    for col, just in columns:
        # the state is never cut: "XID 79" is the one cell that must be read whole
        t.add_column(col, justify=just, **({"min_width": 6, "no_wrap": True}
                                           if col == "state" else {}))
    for g in report.gpus:
        cells = _row(g)
        t.add_row(cells[0], state_cell((marks or {}).get(g.index)), *cells[1:])
    return t


def _row(g: Gpu) -> list[Text]:
    hot = "bold red" if g.hot else ""
    remap = ("FAILED" if g.remap_failed else "pending" if g.remap_pending or g.retired_pending
             else "ok" if g.remap_pending is False else fmt.DASH)
    return [
        Text(str(g.index), "bold"), Text(g.name.removeprefix("NVIDIA ")),
        Text(fmt.DASH if g.util_pct is None else f"{g.util_pct:.0f}%"),
        Text(f"{_gib(g.mem_used)}/{_gib(g.mem_total)}"),
        Text(fmt.DASH if g.temp_c is None else f"{g.temp_c:.0f}°C"
             + (f" /{g.temp_slowdown_c:.0f}" if g.temp_slowdown_c else ""), hot),
        Text(fmt.DASH if g.power_w is None else f"{g.power_w:.0f}"
             + (f"/{g.power_limit_w:.0f}" if g.power_limit_w else "")),
        Text(fmt.DASH if g.sm_clock_mhz is None else f"{g.sm_clock_mhz}"
             + (f"/{g.sm_clock_max_mhz}" if g.sm_clock_max_mhz else "")
             # held down by heat: said beside the clock (power capping is the GPU
             # working, its reason stays in the throttled column)
             + (f" {g.clock_reason}" if g.hot and g.clock_reason else ""), hot),
        Text(", ".join(g.throttled) or "no", hot),
        Text(f"{fmt.num(g.ecc_sbe_volatile)}/{fmt.num(g.ecc_dbe_volatile)}",
             "bold white on red" if g.ecc_dbe_volatile else ""),
        Text(remap, "bold red" if remap in ("FAILED", "pending") else ""),
        Text(fmt.DASH if g.nvlink_links is None else f"{g.nvlink_up}/{g.nvlink_links}"),
    ]


def process_lines(report: GpuReport, now: float) -> Text:
    lines = []
    for g in report.gpus:
        for p in g.processes:
            owner = Text(p.slot or "no slot", "bold" if p.slot else "bold yellow")
            lines.append(Text.assemble(f"GPU {g.index}  pid {p.pid:<8} ", owner,
                                       f"  {_gib(p.used_bytes)} GiB"))
    for x in reversed(report.xids):
        style = "bold red" if x.severity == "critical" else "yellow"
        lines.append(Text.assemble((f"{fmt.clock(x.t)} GPU {x.gpu} Xid {x.xid} ", style),
                                   x.meaning, (f" — {x.advice}", "dim")))
    return Text("\n").join(lines) if lines else Text("no GPU programs reported", "dim")


class GpuScreen(ConsoleScreen):
    BINDINGS = [Binding("escape,backspace,g", "app.pop_screen", "back", id="back"),
                Binding("question_mark", "app.help", "help", id="help"),
                Binding("q", "app.quit", "quit", id="quit"),
                *URGENT_BINDINGS]
    DEFAULT_CSS = """
    GpuScreen #gtable { height: auto; border: round $primary; padding: 0 1; }
    GpuScreen #gprocs { height: auto; max-height: 12; border: round $secondary;
                        padding: 0 1; }
    GpuScreen #gplots { grid-size: 2 2; height: 1fr; min-height: 12; }
    """

    def compose(self) -> ComposeResult:
        from console.ui.widgets.plot_widgets import SeriesPlot

        view = self.state.view
        yield PodHeader(view.title, view.demo, view.read_only)
        yield GpuStrip()
        yield Static(id="gtable")
        yield Static(id="gprocs")
        with Grid(id="gplots"):
            for metric, title, scale, unit in GPU_PLOTS:
                yield SeriesPlot(title, metric, scale=scale, unit=unit,
                                 every_s=view.plot_refresh_s)
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#gtable", Static).border_title = "GPUs"
        self.query_one("#gprocs", Static).border_title = "programs on the GPUs · Xid errors"
        self.render_state(self.state)

    def render_state(self, state: ConsoleState) -> None:
        from console.ui.widgets.plot_widgets import SeriesPlot

        now = state.now
        report = state.pod.gpus if state.pod else None
        self.query_one(PodHeader).show_state(state)
        self.query_one(GpuStrip).show_state(state)
        table = self.query_one("#gtable", Static)
        procs = self.query_one("#gprocs", Static)
        if report is None or not report.gpus:
            why = report.error if report is not None and report.error else (
                "the pod agent has not reported its GPUs (an agent older than GPU "
                "telemetry, or no agent connection)")
            table.update(Text(why, "dim"))
            procs.update(Text(""))
            return
        src = f"{report.source}" + (f", sampled {fmt.clock(report.sampled_at)}"
                                    if report.sampled_at else "")
        table.border_subtitle = src
        table.update(gpu_table(report, state.gpu_marks))
        procs.update(process_lines(report, now))
        names = [f"GPU{g.index}" for g in report.gpus]
        for plot in self.query(SeriesPlot):
            ahead = state.replay.ahead if state.replay else None
            plot.show(ahead if ahead is not None else state.history, names, now,
                      exact=state.replay is not None, around=ahead is not None)
