"""The pod header: state of the pod, today's profile, money and time left, on one line.

What does not fit a narrow terminal is left out by rank (``Rank``): the pod's state
with its cause or countdown goes last, then the alerts count, the context, $/h, an
operation running and the gateway; ``refresh``, ``read … ago`` and P2P go first. A
field with a short form (``stop 6h00m``, ``gw COOLDOWN 1``) takes it before it goes."""

from __future__ import annotations

from typing import NamedTuple

from rich.text import Text

from console.model import fmt
from console.model.alerts import Alert
from console.model.gateway import GatewaySnapshot, idle_for
from console.model.gateway import level as gateway_level
from console.model.pod_run import PodRun
from console.model.pod_stop import OVERDUE_S, PlannedStop, stop_near
from console.model.snapshot import PodSnapshot
from console.session.view import ConsoleState, ReplayMark
from console.ui.widgets.lines import LinesView


class Rank:
    """A field's rank: 0 always shows; the higher, the sooner it goes (issue 47)."""

    STATE = 0
    """The badges (DEMO, REPLAY, READ-ONLY) and the pod's state."""
    STOP = 1
    """The stop's countdown or cause, an extension, a failing watchdog, STALE."""
    ALERTS = 2
    CONTEXT = 3
    COST = 4
    OPERATION = 5
    GATEWAY = 6
    """A gateway in trouble ranks with the alerts (``ALERTS``)."""
    POD_ID = 7
    PROFILE = 8
    """The profile, where no context names it (with contexts: ``CONTEXT``)."""
    IDLE = 9
    TODAY = 10
    GPU = 11
    UP = 12
    CUDA = 13
    REFRESH = 14
    AGE = 15
    """``read 8s ago`` (on a terminal too narrow to keep room for it at the end)."""
    P2P = 16


class Field(NamedTuple):
    """One field of the line: its rank, its text, and a shorter text it takes rather
    than going (None: none)."""

    rank: int
    text: Text
    short: Text | None = None
    full_rank: int | None = None
    """Shown short from ``rank`` on, and whole only at this (lower) rank: the pod's id
    beside its state is worth less than $/h."""


AGE_ROOM_FROM = 100
"""From this width the age's room is kept at the line's end (its ticking then never moves
the rest of the line); below it, that room goes to the fields and the age ranks last."""


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
    gateway_colour: str = "ok"
    """The gateway field's colour: its worst state (``gateway.level``)."""
    idle_source: str = "slots"
    active_window_s: float = 3600.0
    context: str | None = None
    """The config's context shown (a config with contexts): ranked near the top."""
    profile_name: str | None = None
    run: PodRun | None = None
    """The pod's run: its stop's cause and who, a start-up's phase."""
    alerts: tuple[Alert, ...] = ()
    drawn: tuple[list[Field], dict[int, Text]] = ([], {})
    """The fields of the last line drawn, and those on it (index → the text shown)."""

    def show_state(self, state: ConsoleState) -> None:
        self.refresh_s = state.view.refresh_s
        self.replay = state.replay
        self.gateway = state.gateway
        self.idle_source = state.idle_source
        self.active_window_s = state.active_window_s
        self.context = state.view.context
        self.profile_name = state.view.profile_name
        self.run = state.run
        self.alerts = state.alerts
        if state.gateway is not None:
            worst = gateway_level(state.gateway, state.gateway_limits,
                                  ((a.key, a.severity) for a in state.alerts
                                   if a.state == "firing"))
            self.gateway_colour = {"ok": "ok", "warn": "warn.strong"}.get(worst,
                                                                             "crit")
        self.show(state.pod, state.now, state.stale, state.operation, state.ages.get("pod"),
                  state.stop)

    def show(self, pod: PodSnapshot | None, now: float, stale: str | None = None,
             operation: str | None = None, age: float | None = None,
             stop: PlannedStop | None = None) -> None:
        """``age``: seconds since the pod was read, when that is older than a refresh:
        said at the line's right end (``read 8s ago``), in room kept for it whether it is
        shown or not (from ``AGE_ROOM_FROM`` columns), so that its coming, going and
        ticking never moves the rest of the line (each would rewrite the whole line:
        ~1 KB). ``stop``: the planned stop the pod is in (said instead of the
        countdown)."""
        self._args = (pod, now, stale, operation, age, stop)
        width = (self.size.width or self.app.size.width) - 2  # padding
        keep_room = width >= AGE_ROOM_FROM
        fields = self.fields(pod, now, stale, operation, None, stop)
        tail = Text(f"read {age_text(age)}", "dim") if age is not None else None
        if tail is not None and not keep_room:
            fields.append(Field(Rank.AGE, tail))
        picked = chosen(fields, max(1, width - AGE_ROOM if keep_room else width))
        self.drawn = (fields, picked)
        t = Text(no_wrap=True, overflow="ellipsis")
        for n, i in enumerate(sorted(picked)):
            if n:
                t.append(" │ ", "dim")
            t.append_text(picked[i])
        if tail is not None and keep_room:
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
        """(rank, text) in display order, every field at its full length."""
        return [(f.rank, f.text) for f in self.fields(pod, now, stale, operation, age, stop)]

    def fields(self, pod: PodSnapshot | None, now: float, stale: str | None,
               operation: str | None, age: float | None = None,
               stop: PlannedStop | None = None) -> list[Field]:
        """The fields in display order (``Rank`` says which go first). ``age``: said
        beside the pod's state here (``show`` says it at the line's end instead)."""
        out: list[Field] = []
        if self.demo:
            out.append(Field(Rank.STATE, Text(" DEMO ", "badge.demo")))
        if self.replay is not None:
            out.extend(replay_segments(self.replay))
        elif self.read_only:
            out.append(Field(Rank.STATE, Text(" READ-ONLY ", "badge.readonly"),
                             Text(" RO ", "badge.readonly")))
        p = pod or PodSnapshot()
        if self.context:
            out.append(Field(Rank.CONTEXT, Text.assemble(
                (self.context, "bold"), (f" · {self.profile_name}", "")
                if self.profile_name else ""), Text(self.context, "bold"), Rank.PROFILE))
        status = p.status or "?"
        style = {"RUNNING": "ok.strong", "EXITED": "warn", "TERMINATED": "crit.text",
                 "ERROR": "crit"}.get(status, "neutral")
        run = self.run if self.run is not None and self.run.pod_id == p.pod_id else None
        state = Text.assemble((status, style), *(((f" {age_text(age)}", "dim"),)
                                                 if age is not None else ()))
        if run is not None and run.state in ("provisioning", "booting") and p.status:
            # its phase is each slot's, on the slots table
            state.append(f" {run.state}", "accent")
        out.append(Field(Rank.STATE, Text.assemble(
            ("pod ", "dim"), (f"{p.pod_id or fmt.DASH} ", "bold"), state), state,
            Rank.POD_ID))
        plan = p.stop_plan
        ended = run is not None and run.stopping_or_ended
        if ended and run is not None:
            clock = fmt.clock(run.at)[:5] if run.at is not None else ""
            words = run.stop_text(clock)
            who = f" {run.who()}" if run.who() else ""
            out.append(Field(Rank.STOP, Text(words + who, "accent"),
                             Text(words, "accent"), Rank.OPERATION))
        elif plan is not None and plan.extension_until and stop is None \
                and p.watchdog_armed is not False and not plan.grace_until:
            # an extension moved the stop: its end is what is coming, not a countdown
            # with a reason that no longer holds
            soon = stop_near(p, now)
            colour = "warn.strong" if soon else "accent"
            until = fmt.wall_time(plan.extension_until)
            out.append(Field(Rank.STOP, Text.assemble(("extended → ", "dim"), (
                f"{until} {plan.extension_by or ''}".rstrip(), colour)), Text.assemble(
                ("extended → ", "dim"), (until, colour)), Rank.OPERATION))
        else:
            full = stop_text(p, now, stop)
            # its reason grows back after an operation running is said
            out.append(Field(Rank.STOP, full, short_stop(p, now, stop),
                             Rank.GATEWAY))
        if plan is not None and plan.failing_since and stop is None and not ended:
            out.append(Field(Rank.STOP, Text(
                f"watchdog failing since {fmt.wall_time(plan.failing_since)}", "crit"),
                Text("watchdog FAILING", "crit"), Rank.OPERATION))
        if stale:
            out.append(Field(Rank.STOP, Text(stale, "crit"),
                             Text(stale.split(" since ")[0], "crit"), Rank.OPERATION))
        counted = alert_count(self.alerts)
        if counted is not None:
            out.append(Field(Rank.ALERTS, *counted, Rank.OPERATION))
        if operation:
            out.append(Field(Rank.OPERATION, Text(f"▶ {operation} running", "busy.strong"),
                             Text(f"▶ {operation}", "busy.strong")))
        out.append(Field(Rank.COST, Text(f"{fmt.money(p.cost_per_hr)}/h", "bold")))
        gw = self.gateway
        if gw is not None:
            colour = self.gateway_colour
            out.append(Field(Rank.GATEWAY if colour == "ok" else Rank.ALERTS,
                             Text(gw.brief(), colour), Text(gw.short(), colour),
                             None if colour == "ok" else Rank.GATEWAY))
        if plan is not None and plan.idle_after_s is not None and plan.idle_s is not None \
                and stop is None and not ended:
            idle = idle_for(plan.idle(now), self.gateway, self.idle_source, now) or 0.0
            users = (self.gateway.active_users(now, self.active_window_s)
                     if self.gateway is not None else ())
            # yellow from the idle stop's own warning on (its warn_before)
            warn = plan.warn_before_s if plan.warn_before_s is not None \
                else 0.25 * plan.idle_after_s
            out.append(Field(Rank.IDLE, Text.assemble(("idle ", "dim"), (
                f"{fmt.duration(idle, False)} of {fmt.duration(plan.idle_after_s, False)}",
                "warn" if idle >= plan.idle_after_s - warn else ""), *(
                ((f" · {len(users)} user{'s' if len(users) > 1 else ''} "
                  f"{fmt.duration(self.active_window_s, False)}", "info"),) if users else ()))))
        # dimes: the spend changes ~every 90 s, not every poll
        spent, proj = p.spend_today(now), p.projected_today(now)
        out.append(Field(Rank.TODAY, Text.assemble(("today ", "dim"), fmt.money(spent, 1), *(
            (("→", "dim"), fmt.money(proj, 1)) if proj is not None and spent is not None
            and proj - spent >= 0.05 else ()))))
        if not self.context:  # with contexts the context's field names the profile
            out.append(Field(Rank.PROFILE, Text.assemble(("profile ", "dim"),
                                                         (self.profile, "bold"))))
        if p.gpu_name:
            name = p.gpu_name.removeprefix("NVIDIA ")
            short = name if len(name) <= 16 else name[:15] + "…"
            out.append(Field(Rank.GPU, Text(f"{p.gpu_count}× {name}"),
                             Text(f"{p.gpu_count}× {short}")))
        p2p = (Text(fmt.DASH) if p.p2p_disabled is None else
               Text("OFF", "warn.strong") if p.p2p_disabled else Text("on", "ok"))
        out.append(Field(Rank.P2P, Text.assemble(("P2P ", "dim"), p2p)))
        out.append(Field(Rank.CUDA, Text.assemble(("CUDA ", "dim"), p.host_cuda or fmt.DASH)))
        out.append(Field(Rank.UP, Text.assemble(("up ", "dim"),
                                                fmt.duration(p.uptime_s(now), seconds=False))))
        if self.refresh_s is not None:  # + and - change it: the header says it, once
            out.append(Field(Rank.REFRESH, Text.assemble(("refresh ", "dim"),
                                                         f"{self.refresh_s:g}s")))
        return out


AGE_ROOM = len("  read 59s ago")
"""Cells kept at the header's right end for how old the pod's fields are (an age over a
minute, a pod that stopped answering, takes a few more from the rest of the line)."""


def replay_segments(mark: ReplayMark) -> list[Field]:
    """``REPLAY 03:10:05 paused`` (always shown), then the day, then (the live pause)
    how far behind live it is and how to return."""
    out = [Field(Rank.STATE, Text(f" {mark.badge} ", "badge.replay")),
           Field(Rank.STATE, Text.assemble((mark.clock, "bold"), " ", (mark.play, "busy")))]
    if mark.behind_s is not None:
        out.append(Field(Rank.ALERTS, Text.assemble(
            (f"{fmt.duration(mark.behind_s)} behind live", "warn"), (" · p: live", "dim")),
            Text("p: live", "dim")))
    out.append(Field(Rank.GPU, Text(mark.day, "dim")))
    return out


def age_text(age: float) -> str:
    """How old a reading is, said beside it: ``8s ago``, ``2m05s ago``."""
    return f"{age:.0f}s ago" if age < 59.5 else f"{fmt.duration(age)} ago"


def alert_count(alerts: tuple[Alert, ...]) -> tuple[Text, Text] | None:
    """``2 CRIT · 4 WARN`` (short: ``2C 4W``) for the alerts firing and not resolving;
    None when none of them is a warning or worse."""
    crit = sum(1 for a in alerts if a.state == "firing" and a.severity == "crit")
    warn = sum(1 for a in alerts if a.state == "firing" and a.severity == "warn")
    if not crit and not warn:
        return None
    full, short = Text(), Text()
    for n, word, style in ((crit, "CRIT", "crit"), (warn, "WARN", "warn.strong")):
        if n:
            if full:
                full.append(" · ", "dim")
                short.append(" ")
            full.append(f"{n} {word}", style)
            short.append(f"{n}{word[0]}", style)
    return full, short


def chosen(fields: list[Field], width: int) -> dict[int, Text]:
    """Field index → its text as shown on one line of ``width``. By rank (rank 0
    always): each field whole, else short; the first that fits in neither form ends the
    line, so that no field is shown while a more important one is not. A field with a
    ``full_rank`` comes short at its rank and grows whole at that rank, room left."""
    sep = 3
    out: dict[int, Text] = {}
    used = 0
    steps = sorted([(f.rank, i, False) for i, f in enumerate(fields)]
                   + [(f.full_rank, i, True) for i, f in enumerate(fields)
                      if f.full_rank is not None and f.short is not None])
    full = False
    for _, i, grow in steps:
        f = fields[i]
        shown = out.get(i)
        if grow:
            if shown is not None and used + f.text.cell_len - shown.cell_len <= width:
                used += f.text.cell_len - shown.cell_len
                out[i] = f.text
            continue
        if full and f.rank != Rank.STATE:
            continue
        room = width - used - (sep if out else 0)
        whole = f.full_rank is None or f.short is None
        pick = f.text if whole and f.text.cell_len <= room else (
            f.short if f.short is not None and f.short.cell_len <= room else None)
        if pick is None and f.rank == Rank.STATE:
            pick = f.short or f.text
        if pick is None:
            full = True
            continue
        used += pick.cell_len + (sep if out else 0)
        out[i] = pick
    return out


def _left(s: float | None) -> str:
    """Time to a stop: ``–`` unknown, the last minute in seconds (``0m`` read as no time
    left, or as none), then minutes."""
    return fmt.DASH if s is None else fmt.elapsed(s)


def short_stop(p: PodSnapshot, now: float, stop: PlannedStop | None) -> Text | None:
    """The countdown without its reason (``stop 6h00m``), for a narrow terminal."""
    left = p.stop_in_s(now)
    if stop is not None or p.watchdog_armed is False or left is None or left <= 0 \
            or (p.stop_plan is not None and p.stop_plan.grace_until):
        return None
    return Text.assemble(("stop ", "dim"), (fmt.elapsed(left),
                                            "warn.strong" if stop_near(p, now) else ""))


def stop_text(p: PodSnapshot, now: float, stop: PlannedStop | None = None) -> Text:
    """"stop in 2h10m (schedule)", "stop in 4m (idle)", "held 6m: requests running",
    "watchdog DISARMED", "stop due now" (its time has come: the watchdog acts at its
    next tick), "stop overdue" (more than ``OVERDUE_S`` pod seconds late), "stopped at
    18:00 (idle)" (``stop``: a planned stop, being made or made)."""
    if stop is not None:
        return Text(stop.text(fmt.clock(stop.at)[:5]), "accent")
    plan = p.stop_plan
    if p.watchdog_armed is False:
        return Text("watchdog DISARMED", "warn.strong")
    left = p.stop_in_s(now)
    if plan is not None and plan.grace_until:
        return Text.assemble(("stop held ", "dim"), (
            f"{_left(left)}: requests running", "warn"))
    if left is not None and left < -OVERDUE_S:
        return Text.assemble(("stop ", "dim"), ("overdue", "warn"))
    if left is not None and left <= 0:
        return Text.assemble(("stop ", "dim"), ("due now", "warn"))
    why = f" ({plan.next_reason})" if plan is not None and plan.next_reason else ""
    if plan is not None and plan.clock_speed != 1.0:
        why += f" pod clock ×{plan.clock_speed:g}"
    soon = stop_near(p, now)
    # the last minute in seconds: "stop in 0m" read as no time at all, or as none left
    return Text.assemble(("stop in ", "dim"), (f"{_left(left)}{why}",
                                               "warn.strong" if soon else ""))
