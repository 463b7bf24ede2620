"""One line under the header: every GPU's utilisation, memory, temperature and power, as
mini bars that fit 80 columns (fewer details per GPU as the GPUs get more), with what is
wrong in the theme's alarm style (thermal throttling, ECC, a recent Xid). Only renders
what it is handed."""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text

from console.model.gpu_state import XID_RECENT_S, Gpu, GpuReport
from console.session.view import ConsoleState
from console.ui.widgets.header import age_text
from console.ui.widgets.lines import LinesView

BARS = "▁▁▂▃▄▅▆▇█"
"""Eighths; the lowest stays visible, so an idle GPU still shows its bar."""


def bar(frac: float | None) -> str:
    if frac is None:
        return "·"
    return BARS[max(0, min(8, round(frac * 8)))]


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:.0f}"


def _cell(g: Gpu, level: int, xid: int | None) -> Text:
    util = None if g.util_pct is None else g.util_pct / 100
    temp_style = ("crit" if g.hot else "warn" if g.temp_c is not None
                  and g.temp_slowdown_c is not None and g.temp_c >= g.temp_slowdown_c - 5
                  else "")
    t = Text()
    t.append(f"{g.index}" if level else f"GPU{g.index} ", "bold")
    t.append(bar(util), "gauge.util")
    if level < 2:
        t.append(f"{_pct(g.util_pct)}% " if level == 0 else f"{_pct(g.util_pct)} ")
    t.append(bar(g.mem_frac), "gauge.mem")
    if level < 2:
        mem = None if g.mem_frac is None else g.mem_frac * 100
        t.append(f"{_pct(mem)}% " if level == 0 else f"{_pct(mem)} ")
    t.append(f"{_pct(g.temp_c)}°" + ("C" if level == 0 else ""), temp_style)
    if level == 0:
        t.append(f" {_pct(g.power_w)}W")
    elif level == 1:
        t.append(f" {_pct(g.power_w)}W", "dim")
    if g.hot:
        t.append(" HOT" if level < 2 else "!", "crit")
    if g.ecc_dbe_volatile:
        t.append(" ECC" if level < 2 else "E", "fault")
    if xid is not None:
        t.append(f" Xid{xid}" if level < 2 else "X", "fault")
    return t


def gpu_line(report: GpuReport | None, width: int, now: float,
             age: float | None = None, marks: Mapping[int, str] | None = None) -> Text:
    """The line for ``width`` cells: the most detail per GPU that fits, and at its end how
    old the readings are when that is more than a refresh (``age``). ``marks``: the
    GPUs' faults (an Xid stays on its GPU until the GPU is seen healthy)."""
    if report is None or not report.gpus:
        if report is not None and report.error:
            return Text(f"GPUs: {report.error}", "dim")
        return Text()
    last_xid: dict[int, int] = {}
    for x in report.xids:
        if now - x.t <= XID_RECENT_S:
            last_xid[x.gpu] = x.xid
    for gpu, mark in (marks or {}).items():
        if mark.startswith("XID ") and mark[4:].isdigit():
            last_xid[gpu] = int(mark[4:])
    legend = Text("util·mem·temp·power  ", "dim")
    old = Text(f"  {age_text(age)}", "dim") if age is not None else Text()
    width = max(1, width - old.cell_len)  # the age is never cut off
    for level in (0, 1, 2):
        cells = [_cell(g, level, last_xid.get(g.index)) for g in report.gpus]
        line = Text()
        if level == 0:
            line.append_text(legend)
        for i, c in enumerate(cells):
            if i:
                line.append("  " if level < 2 else " ")
            line.append_text(c)
        if line.cell_len <= width or level == 2:
            line.truncate(width, overflow="ellipsis")
            return line + old
    raise AssertionError("unreachable")


class GpuStrip(LinesView):
    DEFAULT_CSS = "GpuStrip { height: 1; padding: 0 1; display: none; }"

    def show_state(self, state: ConsoleState) -> None:
        self.show(state.pod.gpus if state.pod else None, state.now, state.ages.get("gpus"),
                  state.gpu_marks)

    def show(self, report: GpuReport | None, now: float, age: float | None = None,
             marks: Mapping[int, str] | None = None) -> None:
        has = report is not None and (bool(report.gpus) or bool(report.error))
        if self.display != has:
            self.display = has  # shown once the agent reports GPUs (the layout moves once)
        width = (self.content_size.width or self.app.size.width - 2) if self.is_mounted else 80
        self.show_lines([gpu_line(report, width, now, age, marks)])
