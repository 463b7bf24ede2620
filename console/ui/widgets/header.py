"""The pod header: state of the pod, today's profile, money and time left, on one line.

What does not fit a narrow terminal is left out by priority (the pod's state, an
operation running and staleness always stay; then cost and the stop; then the rest)."""

from __future__ import annotations

from rich.text import Text

from console.model import fmt
from console.model.gateway import GatewaySnapshot, idle_for
from console.model.pod_stop import OVERDUE_S, PlannedStop
from console.model.snapshot import PodSnapshot
from console.session.view import ConsoleState, ReplayMark
from console.ui.widgets.lines import LinesView


class PodHeader(LinesView):
    """Renders a PodSnapshot; knows nothing about where it came from.

    Drawn as a line (``LinesView``): a poll that changes one figure — the pod's age
    ticking from ``7s ago`` to ``8s ago`` at every refresh — writes those cells, not the
    whole line (a whole line is ~1 KB of terminal output in truecolor: at 1 s that was
    half the console's bytes, ``bench/tui_bench.py``)."""

    DEFAULT_CSS = "PodHeader { height: 1; padding: 0 1; background: $boost; }"

    def __init__(self, profile: str, demo: bool, read_only: bool, **kw) -> None:
        super().__init__(**kw)
        self.profile = profile
        self.demo = demo
        self.read_only = read_only

    refresh_s: float | None = None
    """How often the console polls (``+``/``-`` change it): said in the header."""

    replay: ReplayMark | None = None
    """A recording is shown (a replay, the live pause): REPLAY and the recorded time."""

    gateway: GatewaySnapshot | None = None
    """The gateway's last reading: its state, requests/s and error rate in the header."""
    idle_source: str = "slots"
    active_window_s: float = 3600.0

    def show_state(self, state: ConsoleState) -> None:
        self.refresh_s = state.view.refresh_s
        self.replay = state.replay
        self.gateway = state.gateway
        self.idle_source = state.idle_source
        self.active_window_s = state.active_window_s
        self.show(state.pod, state.now, state.stale, state.operation, state.ages.get("pod"),
                  state.stop)

    def show(self, pod: PodSnapshot | None, now: float, stale: str | None = None,
             operation: str | None = None, age: float | None = None,
             stop: PlannedStop | None = None) -> None:
        """``age``: seconds since the pod was read, when that is older than a refresh:
        said at the line's right end (``read 8s ago``), in room kept for it whether it is
        shown or not, so that its coming, going and ticking never moves the rest of the
        line (each would rewrite the whole line: ~1 KB). ``stop``: the planned stop the
        pod is in (said instead of the countdown)."""
        self._args = (pod, now, stale, operation, age, stop)
        width = (self.size.width or self.app.size.width) - 2  # padding
        t = Text(no_wrap=True, overflow="ellipsis")
        for i, part in enumerate(fit(self.segments(pod, now, stale, operation, None, stop),
                                     max(1, width - AGE_ROOM))):
            if i:
                t.append(" │ ", "dim")
            t.append_text(part)
        if age is not None:
            tail = Text(f"read {age_text(age)}", "dim")
            if t.cell_len + 2 + tail.cell_len > width:  # the age is never cut off
                t.truncate(max(0, width - 2 - tail.cell_len), overflow="ellipsis")
            t.append(" " * (width - t.cell_len - tail.cell_len))
            t.append_text(tail)
        # a pod name, a GPU name, a profile: someone else's words (show_lines cleans
        # them); an unchanged header costs no bytes, a changed one its changed cells
        self.show_lines([t])

    def render(self) -> Text:
        """The line as shown (what tests and ``str()`` read)."""
        return self._rows[0] if self._rows else Text()

    def on_resize(self) -> None:
        super().on_resize()
        if getattr(self, "_args", None) is not None:
            self.show(*self._args)

    def segments(self, pod: PodSnapshot | None, now: float, stale: str | None,
                 operation: str | None, age: float | None = None,
                 stop: PlannedStop | None = None) -> list[tuple[int, Text]]:
        """(priority, text) in display order; 0 is always shown, then 1, 2… ``age``: said
        beside the pod's state here (``show`` says it at the line's end instead)."""
        out: list[tuple[int, Text]] = []
        if self.demo:
            out.append((0, Text(" DEMO ", "bold black on yellow")))
        if self.replay is not None:
            out.extend(replay_segments(self.replay))
        elif self.read_only:
            out.append((0, Text(" READ-ONLY ", "bold white on blue")))
        p = pod or PodSnapshot()
        status = p.status or "?"
        style = {"RUNNING": "bold green", "EXITED": "yellow", "TERMINATED": "red",
                 "ERROR": "bold red"}.get(status, "white")
        out.append((0, Text.assemble(("pod ", "dim"), (f"{p.pod_id or fmt.DASH} ", "bold"),
                                     (status, style), *(((f" {age_text(age)}", "dim"),)
                                                        if age is not None else ()))))
        if operation:
            out.append((0, Text(f"▶ {operation} running", "bold magenta")))
        if stale:
            out.append((0, Text(stale, "bold red")))
        out.append((1, Text(f"{fmt.money(p.cost_per_hr)}/h", "bold")))
        gw = self.gateway
        if gw is not None:
            out.append((1, Text(gw.brief(), "green" if gw.live and gw.ready and not (
                gw.metrics_error) else "bold red")))
        out.append((0 if stop is not None else 1, stop_text(p, now, stop)))
        plan = p.stop_plan
        if plan is not None and plan.extension_until and stop is None:
            out.append((1, Text.assemble(("extended → ", "dim"), (
                f"{fmt.wall_time(plan.extension_until)} {plan.extension_by or ''}".rstrip(),
                "bold cyan"))))
        if plan is not None and plan.idle_after_s is not None and plan.idle_s is not None \
                and stop is None:
            idle = idle_for(plan.idle(now), self.gateway, self.idle_source, now) or 0.0
            who = (self.gateway.active_users(now, self.active_window_s)
                   if self.gateway is not None else ())
            out.append((2, Text.assemble(("idle ", "dim"), (
                f"{fmt.duration(idle, False)} of {fmt.duration(plan.idle_after_s, False)}",
                "yellow" if idle >= 0.75 * plan.idle_after_s else ""), *(
                ((f" · {len(who)} user{'s' if len(who) > 1 else ''} "
                  f"{fmt.duration(self.active_window_s, False)}", "cyan"),) if who else ()))))
        # dimes: the spend changes ~every 90 s, not every poll
        spent, proj = p.spend_today(now), p.projected_today(now)
        out.append((2, Text.assemble(("today ", "dim"), fmt.money(spent, 1), *(
            (("→", "dim"), fmt.money(proj, 1)) if proj is not None and spent is not None
            and proj - spent >= 0.05 else ()))))
        # which deployment this is: kept before the spend and the idle count
        out.append((1, Text.assemble(("profile ", "dim"), (self.profile, "bold"))))
        if p.gpu_name:
            name = p.gpu_name.removeprefix("NVIDIA ")
            out.append((3, Text(f"{p.gpu_count}× {name}")))
        p2p = (Text(fmt.DASH) if p.p2p_disabled is None else
               Text("OFF", "bold yellow") if p.p2p_disabled else Text("on", "green"))
        out.append((3, Text.assemble(("P2P ", "dim"), p2p)))
        out.append((4, Text.assemble(("CUDA ", "dim"), p.host_cuda or fmt.DASH)))
        out.append((4, Text.assemble(("up ", "dim"),
                                     fmt.duration(p.uptime_s(now), seconds=False))))
        if self.refresh_s is not None:  # + and - change it: the header says it, once
            out.append((2, Text.assemble(("refresh ", "dim"), f"{self.refresh_s:g}s")))
        return out


AGE_ROOM = len("  read 59s ago")
"""Cells kept at the header's right end for how old the pod's fields are (an age over a
minute, a pod that stopped answering, takes a few more from the rest of the line)."""


def replay_segments(mark: ReplayMark) -> list[tuple[int, Text]]:
    """``REPLAY 03:10:05 paused`` (always shown), then the day, then (the live pause)
    how far behind live it is and how to return."""
    out = [(0, Text(f" {mark.badge} ", "bold white on magenta")),
           (0, Text.assemble((mark.clock, "bold"), " ", (mark.play, "magenta")))]
    if mark.behind_s is not None:
        out.append((1, Text.assemble((f"{fmt.duration(mark.behind_s)} behind live", "yellow"),
                                     (" · p: live", "dim"))))
    out.append((3, Text(mark.day, "dim")))
    return out


def age_text(age: float) -> str:
    """How old a reading is, said beside it: ``8s ago``, ``2m05s ago``."""
    return f"{age:.0f}s ago" if age < 59.5 else f"{fmt.duration(age)} ago"


def fit(segments: list[tuple[int, Text]], width: int) -> list[Text]:
    """The segments that fit one line of ``width``, most important first, in order."""
    sep = 3
    chosen: set[int] = set()
    used = 0
    for i in sorted(range(len(segments)), key=lambda i: (segments[i][0], i)):
        need = segments[i][1].cell_len + (sep if chosen else 0)
        if segments[i][0] == 0 or used + need <= width:
            chosen.add(i)
            used += need
    return [segments[i][1] for i in sorted(chosen)]


def stop_text(p: PodSnapshot, now: float, stop: PlannedStop | None = None) -> Text:
    """"stop in 2h10m (schedule)", "stop in 4m (idle)", "held 6m: requests running",
    "watchdog DISARMED", "stop due now" (its time has come: the watchdog acts at its
    next tick), "stop overdue" (more than ``OVERDUE_S`` pod seconds late), "stopped at
    18:00 (idle)" (``stop``: a planned stop, being made or made)."""
    if stop is not None:
        return Text(stop.text(fmt.clock(stop.at)[:5]), "bold cyan")
    plan = p.stop_plan
    if p.watchdog_armed is False:
        return Text("watchdog DISARMED", "bold yellow")
    left = p.stop_in_s(now)
    if plan is not None and plan.grace_until:
        return Text.assemble(("stop held ", "dim"), (
            f"{fmt.duration(left, False)}: requests running", "yellow"))
    if left is not None and left < -OVERDUE_S:
        return Text.assemble(("stop ", "dim"), ("overdue", "yellow"))
    if left is not None and left <= 0:
        return Text.assemble(("stop ", "dim"), ("due now", "yellow"))
    why = f" ({plan.next_reason})" if plan is not None and plan.next_reason else ""
    if plan is not None and plan.clock_speed != 1.0:
        why += f" pod clock ×{plan.clock_speed:g}"
    soon = plan is not None and plan.warning
    return Text.assemble(("stop in ", "dim"), (f"{fmt.duration(left, False)}{why}",
                                               "bold yellow" if soon else ""))
