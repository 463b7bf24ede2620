"""The pod header: state of the pod, today's profile, money and time left."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from .. import fmt
from ..snapshot import PodSnapshot


class PodHeader(Static):
    """Renders a PodSnapshot; knows nothing about where it came from."""

    DEFAULT_CSS = "PodHeader { height: auto; padding: 0 1; background: $boost; }"

    def __init__(self, profile: str, demo: bool, read_only: bool, **kw) -> None:
        super().__init__(**kw)
        self.profile = profile
        self.demo = demo
        self.read_only = read_only

    def show(self, pod: PodSnapshot | None, now: float, stale: str | None = None,
             operation: str | None = None) -> None:
        t = Text(no_wrap=False, overflow="fold")
        if self.demo:
            t.append(" DEMO ", "bold black on yellow")
            t.append(" ")
        if self.read_only:
            t.append(" READ-ONLY ", "bold white on blue")
            t.append(" ")
        p = pod or PodSnapshot()
        status = p.status or "?"
        style = {"RUNNING": "bold green", "EXITED": "yellow", "TERMINATED": "red",
                 "ERROR": "bold red"}.get(status, "white")
        t.append("pod ", "dim")
        t.append(f"{p.pod_id or fmt.DASH} ", "bold")
        t.append(f"{status} ", style)
        gpu = f"{p.gpu_count}× {p.gpu_name}" if p.gpu_name else fmt.DASH
        t.append("│ ", "dim")
        t.append(gpu + " ")
        t.append("│ CUDA ", "dim")
        t.append(f"{p.host_cuda or fmt.DASH} ")
        t.append("│ P2P ", "dim")
        if p.p2p_disabled is None:
            t.append(fmt.DASH + " ")
        elif p.p2p_disabled:
            t.append("OFF ", "bold yellow")
        else:
            t.append("on ", "green")
        t.append("│ profile ", "dim")
        t.append(f"{self.profile} ", "bold")
        t.append("\n")
        t.append(f"{fmt.money(p.cost_per_hr)}/h ", "bold")
        t.append("│ today ", "dim")
        t.append(f"{fmt.money(p.spend_today(now), 1)} ")  # dimes: changes ~every 90 s
        t.append("│ up ", "dim")
        t.append(f"{fmt.duration(p.uptime_s(now), seconds=False)} ")
        t.append("│ stop in ", "dim")
        left = p.stop_in_s(now)
        armed = "" if p.watchdog_armed in (None, True) else " (watchdog disarmed)"
        when = "overdue" if left is not None and left < 0 else fmt.duration(left, False)
        t.append(f"{when}{armed} ", "yellow" if armed or when == "overdue" else "")
        if operation:
            t.append("│ ", "dim")
            t.append(f"▶ {operation} running", "bold magenta")
            t.append(" ")
        if stale:
            t.append("│ ", "dim")
            t.append(stale, "bold red")
        if t != getattr(self, "_last", None):  # an unchanged header costs no bytes
            self._last = t
            self.update(t)
