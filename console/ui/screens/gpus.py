"""The GPUs (``g``): every GPU's readings, what the SMs are doing (NVML's GPM on Hopper:
SM activity, occupancy, tensor pipe, DRAM — "not on this GPU" elsewhere), how the GPUs
connect (the topology matrix beside the P2P verdict and NCCL's transport), the programs
on each (and which slot owns them), recent Xid errors, and plots of utilisation, the GPM
figures, memory, temperature and power.

Renders the state it is handed after every poll, like every other screen; the GPU
series are recorded by the session from each pod poll
(``console.session.gpu_history.record_gpus``)."""

from __future__ import annotations

from collections.abc import Mapping

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal
from textual.widgets import Static

from console.model import fmt
from console.model.gpu_state import Gpu, GpuReport
from console.session.view import ConsoleState
from console.ui.screens.base import URGENT_BINDINGS, ConsoleScreen
from console.ui.widgets.columns import Column, fitted_table, short_gpu
from console.ui.widgets.gpu_strip import GpuStrip
from console.ui.widgets.header import PodHeader
from console.ui.widgets.keybar import KeyBar

GPU_PLOTS = (("gpu_util", "GPU utilisation", 1.0, "%"), ("gpu_sm_active", "SM active", 1.0, "%"),
             ("gpu_tensor", "tensor pipe", 1.0, "%"), ("gpu_dram", "DRAM bandwidth", 1.0, "%"),
             ("gpu_mem", "GPU memory", 100.0, "%"), ("gpu_sm_occ", "SM occupancy", 1.0, "%"),
             ("gpu_temp", "GPU temperature", 1.0, "°C"), ("gpu_power", "GPU power", 1.0, "W"))
"""(history metric, title, scale, unit); each GPU is a series named ``GPU<i>``."""
GPM_PLOTS = {"gpu_sm_active", "gpu_tensor", "gpu_dram", "gpu_sm_occ"}
"""The plots of GPM figures: they say "not on this GPU" where no GPU has GPM."""
NOT_ON_THIS_GPU = "not on this GPU"


def _gib(b: int | None) -> str:
    return fmt.DASH if b is None else f"{b / 2**30:.1f}"


MARK_STYLE = {"HOT": "warn.strong"}
"""A mark's style (a hardware fault: white on red)."""


def state_cell(mark: str | None) -> Text:
    """A GPU's state: ``ok``, or what is wrong with it (a fault outlives its readings:
    a GPU off the bus may still report the numbers of a healthy one)."""
    if mark is None:
        return Text("ok", "ok")
    return Text(mark, MARK_STYLE.get(mark, "fault"))


THROTTLE_WORDS = {"sw_power_cap": "power cap", "hw_power_brake_slowdown": "power brake",
                  "sw_thermal_slowdown": "thermal (sw)", "hw_thermal_slowdown": "thermal (hw)",
                  "hw_slowdown": "hw slowdown"}
"""NVML's throttle reasons in the words the help and the alerts use."""


def throttle_text(g: Gpu) -> str:
    return ", ".join(THROTTLE_WORDS.get(r, r.replace("_", " ")) for r in g.throttled) or "no"


def gpu_columns(report: GpuReport, marks: Mapping[int, str] | None = None) -> list[Column]:
    """The GPU table's columns by priority (``columns.fit``): what says a GPU is in
    trouble and why never goes (index, state, util, heat and the throttle reasons that
    explain HOT), then memory, power, clock, ECC, remap, the short name and NVLink."""
    gpus = report.gpus

    def hot(g: Gpu) -> str:
        return "crit" if g.hot else ""

    def col(head: str, cap: int | None, prio: int, texts: list[Text]) -> Column:
        return head, cap, prio, texts

    remaps = ["FAILED" if g.remap_failed else "pending" if g.remap_pending or g.retired_pending
              else "ok" if g.remap_pending is False else fmt.DASH for g in gpus]
    return [
        col("GPU", None, 0, [Text(str(g.index), "bold") for g in gpus]),
        # the state is never cut: "XID 79" is the one cell that must be read whole
        col("state", None, 0, [state_cell((marks or {}).get(g.index)) for g in gpus]),
        col("util", None, 0, [Text(fmt.DASH if g.util_pct is None else f"{g.util_pct:.0f}%")
                              for g in gpus]),
        col("temp", None, 1, [Text(fmt.DASH if g.temp_c is None else f"{g.temp_c:.0f}°C"
                                   + (f" /{g.temp_slowdown_c:.0f}" if g.temp_slowdown_c
                                      else ""), hot(g)) for g in gpus]),
        col("throttled", 30, 1, [Text(throttle_text(g), hot(g)) for g in gpus]),
        col("memory GiB", None, 2, [Text(f"{_gib(g.mem_used)}/{_gib(g.mem_total)}")
                                    for g in gpus]),
        col("power W", None, 3, [Text(fmt.DASH if g.power_w is None else f"{g.power_w:.0f}"
                                      + (f"/{g.power_limit_w:.0f}" if g.power_limit_w else ""))
                                 for g in gpus]),
        col("SM MHz", None, 3, [Text(fmt.DASH if g.sm_clock_mhz is None else
                                     f"{g.sm_clock_mhz}"
                                     + (f"/{g.sm_clock_max_mhz}" if g.sm_clock_max_mhz
                                        else "")
                                     # held down by heat: said beside the clock too (power
                                     # capping is the GPU working: its reason stays in
                                     # the throttled column)
                                     + (f" {g.clock_reason}" if g.hot and g.clock_reason
                                        else ""), hot(g)) for g in gpus]),
        col("ECC sbe/dbe", None, 4, [
            Text(f"{fmt.num(g.ecc_sbe_volatile)}/{fmt.num(g.ecc_dbe_volatile)}",
                 "fault" if g.ecc_dbe_volatile else "") for g in gpus]),
        col("remap", None, 4, [Text(r, "crit" if r in ("FAILED", "pending") else "")
                               for r in remaps]),
        col("name", 18, 5, [Text(short_gpu(None, g.name)) for g in gpus]),
        col("NVLink", None, 6, [Text(fmt.DASH if g.nvlink_links is None else
                                     f"{g.nvlink_up}/{g.nvlink_links}") for g in gpus]),
    ]


NUMBERS = frozenset({"util", "memory GiB", "temp", "power W", "SM MHz", "ECC sbe/dbe",
                     "NVLink"})
"""The GPU table's columns of numbers: right-justified, as they were."""


def gpu_table(report: GpuReport, marks: Mapping[int, str] | None = None,
              width: int = 200) -> Table:
    """One line per GPU, the columns that fit ``width`` (its full name is on the strip
    and in ``status --json``; the table keeps what tells the GPUs' states apart)."""
    return fitted_table(gpu_columns(report, marks), width, len(report.gpus),
                        header_style="dim", right=NUMBERS)


def _gpm_pct(g: Gpu, v: float | None) -> Text:
    if v is None:
        # supported but one sample so far (an interval needs two), or not said at all
        return Text("…" if g.gpm_supported else fmt.DASH, "dim")
    return Text(f"{v:.0f}%")


def activity_table(report: GpuReport) -> Table:
    """Per GPU: util beside what GPM says the SMs did over the same interval."""
    t = Table(box=None, padding=(0, 1), header_style="dim", expand=False)
    for col in ("GPU", "util", "SM active", "SM occ", "tensor", "DRAM", "reads"):
        t.add_column(col, justify="left" if col in ("GPU", "reads") else "right",
                     no_wrap=True)
    for g in report.gpus:
        util = Text(fmt.DASH if g.util_pct is None else f"{g.util_pct:.0f}%")
        if g.gpm_supported is False:
            t.add_row(Text(str(g.index), "bold"), util, Text(NOT_ON_THIS_GPU, "dim"),
                      "", "", "", "")
            continue
        word = g.activity
        t.add_row(Text(str(g.index), "bold"), util, _gpm_pct(g, g.sm_active_pct),
                  _gpm_pct(g, g.sm_occupancy_pct), _gpm_pct(g, g.tensor_active_pct),
                  _gpm_pct(g, g.dram_active_pct),
                  Text(word or fmt.DASH, "bold" if word.endswith("bound") else "dim"))
    return t


CELL_STYLE = {"X": "dim", "SYS": "warn", "?": "dim"}


def topology_text(report: GpuReport, p2p_disabled: bool | None) -> Text:
    """The matrix as ``nvidia-smi topo -m`` prints it, then the P2P verdict, NCCL's
    transport and what explains them."""
    from console.model.gpu_topology import p2p_story

    top = report.topology
    lines: list[Text] = []
    if top is None or not top.matrix:
        lines.append(Text("topology not reported (an agent before it, or no NVML)", "dim"))
    else:
        lines.append(Text("      " + "".join(f"{name:<6}" for name in top.gpus), "dim"))
        for name, row in zip(top.gpus, top.matrix, strict=False):
            line = Text(f"{name:<6}", "dim")
            for cell in row:
                line.append(f"{cell:<6}", "ok" if cell.startswith("NV")
                            else CELL_STYLE.get(cell, ""))
            lines.append(line)
    style = {"ok": "ok", "warn": "warn.strong", "info": ""}
    for sev, sentence in p2p_story(top, report.p2p_probe, p2p_disabled):
        lines.append(Text(sentence, style.get(sev, "")))
    return Text("\n").join(lines)


def process_lines(report: GpuReport, now: float) -> Text:
    lines = []
    for g in report.gpus:
        for p in g.processes:
            owner = Text(p.slot or "no slot", "bold" if p.slot else "warn.strong")
            lines.append(Text.assemble(f"GPU {g.index}  pid {p.pid:<8} ", owner,
                                       f"  {_gib(p.used_bytes)} GiB"))
    for x in reversed(report.xids):
        style = "crit" if x.severity == "critical" else "warn"
        lines.append(Text.assemble((f"{fmt.clock(x.t)} GPU {x.gpu} Xid {x.xid} ", style),
                                   x.meaning, (f" — {x.advice}", "dim")))
    return Text("\n").join(lines) if lines else Text("no GPU programs reported", "dim")


class GpuScreen(ConsoleScreen):
    BINDINGS = [Binding("escape,backspace,g", "app.pop_screen", "back", id="back"),
                Binding("question_mark", "app.help", "help", id="help"),
                Binding("q", "app.quit", "quit", id="quit"),
                *URGENT_BINDINGS]
    HELP_TITLE = "GPU"

    def help_sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        from console.ui.help_text import gpu_sections

        return gpu_sections()

    DEFAULT_CSS = """
    GpuScreen #gtable { height: auto; border: round $primary; padding: 0 1; }
    GpuScreen #gprocs { height: auto; max-height: 12; border: round $secondary;
                        padding: 0 1; }
    GpuScreen #gmid { height: auto; }
    GpuScreen #gactivity { width: auto; height: auto; border: round $primary; padding: 0 1; }
    GpuScreen #gtopo { width: 1fr; height: auto; border: round $primary; padding: 0 1; }
    GpuScreen #gplots { grid-size: 4 2; height: 1fr; min-height: 12; }
    GpuScreen.narrow #gmid { layout: vertical; }
    GpuScreen.narrow #gactivity { width: 1fr; }
    GpuScreen.narrow #gplots { grid-size: 2 4; }
    """

    def compose(self) -> ComposeResult:
        from console.ui.widgets.gpm_plot import GpmPlot
        from console.ui.widgets.plot_widgets import SeriesPlot

        view = self.state.view
        yield PodHeader(view.title, view.demo, view.read_only)
        yield GpuStrip()
        yield Static(id="gtable")
        with Horizontal(id="gmid"):
            yield Static(id="gactivity")
            yield Static(id="gtopo")
        yield Static(id="gprocs")
        with Grid(id="gplots"):
            for metric, title, scale, unit in GPU_PLOTS:
                yield (GpmPlot if metric in GPM_PLOTS else SeriesPlot)(
                    title, metric, scale=scale, unit=unit, every_s=view.plot_refresh_s)
        yield KeyBar()

    def on_resize(self, event: object = None) -> None:
        # under 100 columns the activity and topology panels stack, the plots go 2 a row
        self.set_class(self.app.size.width < 100, "narrow")
        if event is not None and self.is_mounted:
            self.render_state(self.state)  # the table's columns that fit the new width

    def on_mount(self) -> None:
        self.on_resize()
        self.query_one("#gtable", Static).border_title = "GPUs"
        self.query_one("#gprocs", Static).border_title = "programs on the GPUs · Xid errors"
        self.query_one("#gactivity", Static).border_title = "what the SMs do (GPM)"
        self.query_one("#gtopo", Static).border_title = "topology · P2P"
        self.render_state(self.state)

    def render_state(self, state: ConsoleState) -> None:
        from console.ui.widgets.gpm_plot import GpmPlot
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
            self.query_one("#gactivity", Static).update(Text(""))
            self.query_one("#gtopo", Static).update(Text(""))
            return
        src = f"{report.source}" + (f", sampled {fmt.clock(report.sampled_at)}"
                                    if report.sampled_at else "")
        table.border_subtitle = src
        # the table's own width once laid out; before, the terminal's less the border
        width = table.content_region.width or self.app.size.width - 4
        table.update(gpu_table(report, state.gpu_marks, max(20, width - 1)))
        procs.update(process_lines(report, now))
        self.query_one("#gactivity", Static).update(activity_table(report))
        self.query_one("#gtopo", Static).update(
            topology_text(report, state.pod.p2p_disabled if state.pod else None))
        names = [f"GPU{g.index}" for g in report.gpus]
        no_gpm = all(g.gpm_supported is False for g in report.gpus)
        for plot in self.query(SeriesPlot):
            if isinstance(plot, GpmPlot) and plot.absent(NOT_ON_THIS_GPU if no_gpm else None):
                continue
            ahead = state.replay.ahead if state.replay else None
            plot.show(ahead if ahead is not None else state.history, names, now,
                      exact=state.replay is not None, around=ahead is not None)

