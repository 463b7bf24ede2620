"""When the pod stops: the schedule, an extension, idleness, and the busy grace.

Pure: ``decide`` reads a schedule, the policy's state and an instant (the agent's clock,
``pod_agent.clock``) and says whether to stop now, why, and what the next stop is. The
supervisor feeds it each watchdog tick; the unit tests feed it any instant they like
(time zones, a DST night, a skewed or stepped clock).

Two clocks: instants (the schedule, an extension's end) are read on the wall clock;
durations (idleness, the busy grace) on a monotonic one, so a wall-clock step (NTP, a VM
resume) neither stops a busy pod as idle nor cuts a grace short.

The rules, in the order they win:
  * disarmed: nothing stops the pod (the memory guard still stops slots, never the pod);
  * an extension (``keep running until T``) that has not ended: nothing stops the pod —
    not the schedule, not idleness. It holds back every scheduled stop before its end
    from the day it was set. At its end it carries out the stop it held only when it
    ends outside working hours (an evening or a night); one that ends in working hours
    (an overnight ``+23h``) stops nothing — the day's own stop applies — unless it was
    set to replace the next evening's stop (``replaces_next_stop``), then its end is
    that stop;
  * the scheduled stop (``schedule.stop`` on a scheduled day, in the profile's zone) is
    due from that minute until it is done that day. Requests running then postpone it by
    at most ``busy_grace``, counted from the first tick that found it due;
  * idle: no request finished, running or waiting on any slot for ``idle_stop_after``
    (inside working hours only when ``idle_stop_in_hours``: an idle stop that would fall
    in working hours is due when they end, where the schedule's own stop is — and at that
    instant it is the schedule's stop, warned once as such). A slot whose metrics cannot
    be read serves nobody: it counts as idle;
  * every stop is warned ``warn_before`` ahead, whatever its reason: a stop found due
    without its warning (a pod started after its stop time, an extension shorter than
    ``warn_before``) is warned then and waits ``warn_before``. How long ago a warning
    went out is measured on the monotonic clock: after a wall-clock step back, a warning
    that now lies further ahead of its stop than ``warn_before`` is given again, on time;
  * an extension ended by hand resumes the plan (``resume_plan``): a stop already due, or
    due within ``warn_before``, is warned then and made ``END_GRACE_S`` later (or at its
    own time, if later) — what the console's confirmation says.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any
from zoneinfo import ZoneInfo

from .profile import Schedule

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
MAX_EXTENSION_S = 24 * 3600.0
"""An extension ends within a day: a typo (20:00 tomorrow for tonight) must not buy a
weekend of billing."""
_CLOCK_TEXT = re.compile(r"^(?:(tomorrow)\s+)?(\d{1,2}):(\d{2})$", re.IGNORECASE)
END_GRACE_S = 120.0
"""An extension ended by hand (``w c``, ``extend --clear``) while the stop it held back is
due, or due within ``warn_before``: that stop is warned at once and comes this long
after (not a fresh ``warn_before``). Whoever ends an extension means the plan to resume;
two minutes are for a change of mind (``w`` again), and the console's confirmation says
so."""
EARLY_SLACK_S = 60.0
"""A warning given more than this before ``warn_before`` ahead of its stop (on the
monotonic clock) was given on a wall clock that has since gone back: it is given again,
on time. (The first tick inside the window gives it: within a tick, never early.)"""
_ORDER = {"idle": 0, "extension ended": 1, "schedule": 2, "idle after hours": 3}
"""Two stops due at the same instant: the one that says most about the pod wins — idle
at an extension's end is said as idle (the demo's story, the header's "(idle)")."""


@dataclass(frozen=True)
class Extension:
    until: float
    by: str
    reason: str
    set_at: float
    holds: float | None = None
    """The first scheduled stop it holds back (pending when it was set, or falling before
    its end); None: it only keeps idleness from stopping the pod."""
    replaces_next_stop: bool = False
    """Its end is a stop wherever it falls (in working hours too), and that day's
    scheduled stop is done by it. False: an end in working hours stops nothing."""

    def to_json(self, zone: dt.tzinfo | None = None) -> dict[str, Any]:
        d: dict[str, Any] = asdict(self)
        d["until_iso"] = iso(self.until, zone)
        return d

    @classmethod
    def from_json(cls, d: Any) -> Extension:
        """A record as saved; ValueError says what is wrong with one that is not (a
        file on a volume is input like any other: null, a list, ``"until": "inf"``)."""
        if not isinstance(d, dict):
            raise ValueError(f"an extension is an object, not {type(d).__name__}")
        holds = d.get("holds")
        ext = cls(_finite(d.get("until"), "until"), _text(d.get("by"), 64) or "?",
                  _text(d.get("reason"), 200), _finite(d.get("set_at", 0.0), "set_at"),
                  None if holds is None else _finite(holds, "holds"),
                  d.get("replaces_next_stop") is True)
        if not 0 < ext.until - ext.set_at <= MAX_EXTENSION_S + 60:
            raise ValueError(f"until is {ext.until - ext.set_at:.0f} s after set_at "
                             f"(an extension lasts at most {MAX_EXTENSION_S / 3600:.0f} h)")
        return ext


def _finite(v: Any, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number of seconds, got {str(v)[:40]!r}")
    return float(v)


def _text(v: Any, limit: int) -> str:
    return "".join(c for c in str(v or "") if c.isprintable())[:limit]


@dataclass
class Warned:
    """A warning sent: the stop instant it announced, and when it went out (wall)."""

    at: float
    sent: float
    mono: float | None = None
    """The monotonic clock when it went out (None: ``sent``, for callers of one clock):
    how long ago it was given is measured on it, so a wall-clock step neither makes an
    old warning look fresh nor a fresh one old."""
    lead: float | None = None
    """How long after it the stop may come (None: ``warn_before``); shorter for an
    extension ended by hand (``END_GRACE_S``)."""


@dataclass
class LastStop:
    """The pod's last stop, whoever made it. ``at`` None: made while no agent ran (seen
    at the next start, ``seen_at``)."""

    reason: str
    at: float | None = None
    by: str | None = None
    ok: bool | None = None
    """None while the stop is being made (or when the console said it was about to)."""
    detail: str = ""
    run: str | None = None
    seen_at: float | None = None

    def to_json(self, zone: dt.tzinfo | None = None) -> dict[str, Any]:
        return {**asdict(self), "at_iso": iso(self.at, zone)}


@dataclass
class PolicyState:
    """What the supervisor keeps between ticks. ``stopstate`` keeps all of it but the
    activity on disk (a restart must not move a stop, its grace, or an extension)."""

    armed: bool = True
    extension: Extension | None = None
    last_stop_day: str | None = None
    """The local date whose scheduled stop was carried out (or failed: never twice)."""
    last_stop: LastStop | None = None
    last_activity: float = 0.0
    """Wall clock: the last tick that saw a request, or the agent's start."""
    activity_mono: float | None = None
    """Monotonic clock at that tick (None: ``last_activity``, for callers of one clock)."""
    due_key: str | None = None
    """The stop whose grace is counting (its ``Decision.key``)."""
    due_since: float | None = None
    """Wall clock: the first tick that found that stop due (kept on disk)."""
    due_mono: float | None = None
    """Monotonic clock at that tick: the grace counts from here."""
    warned: dict[str, Warned] = field(default_factory=dict)

    def touch(self, now: float, mono: float | None = None) -> None:
        """Activity now (a request seen, a slot loading)."""
        self.last_activity = now
        self.activity_mono = now if mono is None else mono

    def idle_s(self, mono: float) -> float:
        since = self.last_activity if self.activity_mono is None else self.activity_mono
        return max(0.0, mono - since)

    def warning_for(self, key: str, at: float) -> Warned | None:
        """The warning sent for this stop: its own, or one that announced a stop at the
        same instant for another reason (idle at an extension's end, then a request and
        it is the extension's held stop: the same stop, already announced)."""
        w = self.warned.get(key)
        if w is not None:
            return w
        return next((w for w in self.warned.values() if abs(w.at - at) < 1.0), None)

    def note_warning(self, d: Decision, now: float, mono: float | None = None) -> None:
        """The warning of ``d`` went out now (the supervisor, the tests)."""
        if d.key is not None and d.next_at is not None:
            self.warned[d.key] = Warned(d.next_at, now, mono, d.lead)
        # old ones announce stops long past
        for k in [k for k, w in self.warned.items() if w.at < now - 2 * 86400]:
            del self.warned[k]


@dataclass(frozen=True)
class Decision:
    stop: bool = False
    reason: str | None = None
    """Why it stops now: ``schedule``, ``extension ended`` or ``idle``."""
    next_at: float | None = None
    next_reason: str | None = None
    idle_s: float = 0.0
    grace_until: float | None = None
    """Set while running requests hold a due stop back."""
    warn: bool = False
    """The next stop is within ``warn_before``."""
    key: str | None = None
    """Which stop this is (``schedule@…``, ``extension@…``, ``idle@<last activity>``):
    its warning is sent once."""
    announce: bool = False
    """Its warning is to be sent now (``PolicyState.note_warning`` once sent)."""
    lead: float | None = None
    """With ``announce``: how long after the warning the stop may come, when not
    ``warn_before`` (an extension ended by hand: ``resume_plan``)."""

    def warn_key(self) -> str:
        return self.key or f"{self.next_reason}@{round(self.next_at or 0)}"


def zone(schedule: Schedule) -> ZoneInfo:
    return ZoneInfo(schedule.timezone)


def iso(t: float | None, tz: dt.tzinfo | None = None) -> str | None:
    if t is None:
        return None
    return dt.datetime.fromtimestamp(t, tz or dt.timezone.utc).isoformat(timespec="seconds")


def _hm(text: str) -> tuple[int, int]:
    h, m = text.split(":")
    return int(h), int(m)


def _at(day: dt.date, hm: tuple[int, int], tz: ZoneInfo) -> float:
    """A local wall time of a day as an instant: the first instant the wall clock shows
    it or later — so a time a DST change repeats is its first occurrence, and a time it
    skips (02:30 on a spring-forward night) is the change itself (03:00 new time), the
    same minute ``stop_pending`` first finds it due."""
    t = dt.datetime(day.year, day.month, day.day, *hm, tzinfo=tz).timestamp()
    local = dt.datetime.fromtimestamp(t, tz)
    if (local.hour, local.minute) == hm:
        return t
    # skipped: fold=1 reads it with the new offset, an hour before; step to the change
    t = dt.datetime(day.year, day.month, day.day, *hm, fold=1, tzinfo=tz).timestamp()
    while True:
        w = dt.datetime.fromtimestamp(t, tz)
        if (w.date(), w.hour, w.minute) >= (day, *hm):
            return t
        t += 60


def scheduled_today(schedule: Schedule, now: float) -> float | None:
    """Today's (local) scheduled stop instant, or None on a day off."""
    tz = zone(schedule)
    local = dt.datetime.fromtimestamp(now, tz)
    if WEEKDAYS[local.weekday()] not in schedule.days:
        return None
    return _at(local.date(), _hm(schedule.stop), tz)


def stop_pending(schedule: Schedule, now: float, last_stop_day: str | None) -> float | None:
    """Today's scheduled stop when its minute has come and it is not done yet."""
    tz = zone(schedule)
    local = dt.datetime.fromtimestamp(now, tz)
    if WEEKDAYS[local.weekday()] not in schedule.days:
        return None
    if (local.hour, local.minute) < _hm(schedule.stop):
        return None
    if last_stop_day == local.date().isoformat():
        return None
    return _at(local.date(), _hm(schedule.stop), tz)


def next_scheduled(schedule: Schedule, now: float) -> float | None:
    tz = zone(schedule)
    local = dt.datetime.fromtimestamp(now, tz)
    for add in range(8):
        day = local.date() + dt.timedelta(days=add)
        if WEEKDAYS[day.weekday()] not in schedule.days:
            continue
        at = _at(day, _hm(schedule.stop), tz)
        if at >= now:
            return at
    return None


def in_hours(schedule: Schedule, now: float) -> bool:
    tz = zone(schedule)
    local = dt.datetime.fromtimestamp(now, tz)
    if WEEKDAYS[local.weekday()] not in schedule.days:
        return False
    return _hm(schedule.start) <= (local.hour, local.minute) < _hm(schedule.stop)


def _hours_end(schedule: Schedule, t: float) -> float:
    """The end of the working hours ``t`` falls in: that day's scheduled stop."""
    return _at(dt.datetime.fromtimestamp(t, zone(schedule)).date(), _hm(schedule.stop),
               zone(schedule))


def local_day(schedule: Schedule, now: float) -> str:
    return dt.datetime.fromtimestamp(now, zone(schedule)).date().isoformat()


def ends_with_stop(schedule: Schedule, ext: Extension) -> bool:
    """Whether the extension's end stops the pod (the module's rules)."""
    return ext.replaces_next_stop or (ext.holds is not None
                                      and not in_hours(schedule, ext.until))


def crosses_midnight(schedule: Schedule, ext: Extension) -> bool:
    return local_day(schedule, ext.set_at) != local_day(schedule, ext.until)


def _covered(schedule: Schedule, ext: Extension | None, at: float) -> bool:
    """A scheduled stop the extension holds back: before its end, from the day it was
    set (a stop already pending then included)."""
    return ext is not None and at < ext.until and \
        local_day(schedule, at) >= local_day(schedule, ext.set_at)


def _scheduled(schedule: Schedule, st: PolicyState, now: float,
               ext: Extension | None) -> float | None:
    """The first scheduled stop not done and not held back by ``ext``: today's once its
    minute has come (then due), else a later one."""
    tz = zone(schedule)
    today = dt.datetime.fromtimestamp(now, tz).date()
    for add in range(9):
        day = today + dt.timedelta(days=add)
        if WEEKDAYS[day.weekday()] not in schedule.days or st.last_stop_day == day.isoformat():
            continue
        at = _at(day, _hm(schedule.stop), tz)
        if not _covered(schedule, ext, at):
            return at
    return None


def scheduled_stop(schedule: Schedule, st: PolicyState, now: float) -> float | None:
    """The next scheduled stop not done and not held back by the extension (due once
    at or before ``now``): the schedule's part of the plan alone."""
    return _scheduled(schedule, st, now, st.extension)


def make_extension(schedule: Schedule, st: PolicyState, now: float, until: float, by: str,
                   reason: str, replaces_next_stop: bool = False) -> Extension:
    first = _scheduled(schedule, st, now, None)
    holds = first if first is not None and first <= until else None
    return Extension(until, by, reason, now, holds, replaces_next_stop)


def _plan(schedule: Schedule, st: PolicyState, now: float, busy: bool, idle_s: float
          ) -> tuple[float, str, str] | None:
    """The next stop if no request came from now on: (instant, reason, key). The instant
    is when it became or becomes due: at or before ``now``, it is due."""
    ext = st.extension
    cands: list[tuple[float, str, str, int]] = []
    if ext is not None and ends_with_stop(schedule, ext):
        cands.append((ext.until, "extension ended", f"extension@{round(ext.until)}",
                      _ORDER["extension ended"]))
    at = _scheduled(schedule, st, now, ext)  # not held back: never before ext's end
    if at is not None:
        cands.append((at, "schedule", f"schedule@{round(at)}", _ORDER["schedule"]))
    after = schedule.seconds("idle_stop_after")
    if after is not None:
        # a running request is activity until it ends
        t = now + after if busy else now - idle_s + after
        if ext is not None:  # nothing stops the pod before an extension's end
            t = max(t, ext.until)
        order = _ORDER["idle"]
        if not schedule.idle_stop_in_hours:
            # idle only outside working hours: one due inside them (or found while they
            # last) is due when they end — where the schedule's own stop ends them,
            # announced as the schedule. At that instant it stays that stop (warned once,
            # for its reason), not an idle stop warned again and made warn_before later
            # (issue 42)
            for when in (t, now):
                if in_hours(schedule, max(t, when)):
                    t = _hours_end(schedule, max(t, when))
                    order = _ORDER["idle after hours"]
        cands.append((t, "idle", f"idle@{round(st.last_activity, 3)}", order))
    if not cands:
        return None
    at, reason, key, _ = min(cands, key=lambda c: (round(c[0], 3), c[3]))
    return at, reason, key


def decide(schedule: Schedule, st: PolicyState, now: float, busy: bool,
           mono: float | None = None) -> Decision:
    """``busy``: a request is running or waiting on some slot now. ``now``: the wall
    clock; ``mono``: the monotonic clock (default ``now``, for callers of one clock).
    Updates the grace's start (``st.due_*``) and nothing else."""
    mono = now if mono is None else mono
    idle_s = 0.0 if busy else st.idle_s(mono)
    if not st.armed:
        _not_due(st)
        return Decision(idle_s=idle_s)
    warn_s = schedule.seconds("warn_before") or 0.0
    plan = _plan(schedule, st, now, busy, idle_s)
    if plan is None:
        _not_due(st)
        return Decision(idle_s=idle_s)
    at, reason, key = plan
    # said of a stop to come: "extension ends"; of the stop made: "extension ended"
    coming = "extension ends" if reason == "extension ended" else reason
    sent = st.warning_for(key, at)
    if sent is not None:
        lead = warn_s if sent.lead is None else sent.lead
        given = now - sent.sent if sent.mono is None else mono - sent.mono
        if given + (at - now) > lead + EARLY_SLACK_S:
            # given long before its stop is due: the wall clock went back since (the
            # stop is further away than the warning said). Given again, on time
            sent = None
    if sent is None:
        _not_due(st)
        if at - now > warn_s:
            return Decision(next_at=at, next_reason=coming, idle_s=idle_s, key=key)
        # its warning is due (late, when the stop is already due): it waits warn_before
        return Decision(next_at=max(at, now + warn_s), next_reason=coming, idle_s=idle_s,
                        warn=True, key=key, announce=True)
    # never sooner than its lead after the warning, counted on the monotonic clock
    at = max(at, now + (lead - given))
    if at > now:
        _not_due(st)
        return Decision(next_at=at, next_reason=coming, idle_s=idle_s,
                        warn=at - now <= warn_s, key=key)
    if reason != "idle":  # a stop at a set time waits for running requests, bounded
        if st.due_key != key or st.due_mono is None:
            st.due_key, st.due_since, st.due_mono = key, now, mono
        grace_end = st.due_mono + (schedule.seconds("busy_grace") or 0.0)
        if busy and mono < grace_end:
            until = now + (grace_end - mono)
            return Decision(False, None, until, reason, idle_s, until, True, key)
    return Decision(True, reason, now, reason, idle_s, key=key)


def resume_plan(schedule: Schedule, st: PolicyState, now: float, busy: bool,
                mono: float | None = None) -> Decision:
    """The decision right after an extension was ended by hand (its ``extension`` already
    None): the plan resumes. A stop that is due now, or due within ``warn_before``, is
    warned now (``announce``) and comes at its own time but not before ``END_GRACE_S``
    from now — not a fresh ``warn_before``: the one who ended it was told so."""
    mono = now if mono is None else mono
    d = decide(schedule, st, now, busy, mono)
    plan = _plan(schedule, st, now, busy, 0.0 if busy else st.idle_s(mono))
    if not d.announce or plan is None:
        return d
    warn_s = schedule.seconds("warn_before") or 0.0
    lead = min(warn_s, max(END_GRACE_S, plan[0] - now))
    return replace(d, next_at=max(plan[0], now + lead), lead=lead)


def _not_due(st: PolicyState) -> None:
    st.due_key = st.due_since = st.due_mono = None


def done_day(schedule: Schedule, st: PolicyState, now: float, reason: str | None
             ) -> str | None:
    """The local day whose scheduled stop a stop made now carries out: today once its
    stop time has come (a failed one too: never twice a day), or the day an extension
    that replaces it ends; None for an idle stop before the day's stop time."""
    today = scheduled_today(schedule, now)
    ext = st.extension
    if today is not None and today <= now:
        return local_day(schedule, now)
    if reason == "extension ended" and ext is not None and ext.replaces_next_stop:
        return local_day(schedule, ext.until)
    return None


def extension_until(text: str, schedule: Schedule, now: float) -> float:
    """``+1h`` / ``+90m`` (from now), ``HH:MM`` (today, in the profile's zone; refused
    once past), ``tomorrow HH:MM``, or an ISO instant → the instant; ValueError says
    what is accepted."""
    from .profile import duration_s

    text = text.strip()
    tz = zone(schedule)
    local = dt.datetime.fromtimestamp(now, tz)
    clock_text = _CLOCK_TEXT.match(text)
    if text.startswith("+"):
        until = now + duration_s(text[1:])
    elif clock_text:
        tomorrow, h, m = clock_text.group(1), int(clock_text.group(2)), int(clock_text.group(3))
        if not (0 <= h <= 23 and 0 <= m <= 59):
            raise ValueError(f"{text!r}: not a time of day (00:00 … 23:59)")
        day = local.date() + dt.timedelta(days=1 if tomorrow else 0)
        until = _at(day, (h, m), tz)
        if not tomorrow and until <= now:
            # never silently tomorrow: 17:45 typed at 17:50 is a typo, not 23.9 h
            raise ValueError(f"{text!r} is already past today (it is {local:%H:%M %Z} on "
                             f"this pod's clock); say 'tomorrow {h:02d}:{m:02d}' or +Nh "
                             "to mean tomorrow")
    else:
        try:
            when = dt.datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{text!r}: give +1h, +90m, HH:MM, tomorrow HH:MM or an ISO "
                             "time") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=tz)
        until = when.timestamp()
    if until <= now:
        raise ValueError(f"{text!r} is not in the future on this pod's clock "
                         f"({iso(now, tz)})")
    if until - now > MAX_EXTENSION_S:
        raise ValueError(f"{text!r} is more than {MAX_EXTENSION_S / 3600:.0f} h away; "
                         "disarm the watchdog for longer")
    return until
