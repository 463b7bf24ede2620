"""When the pod stops: the schedule, an extension, idleness, and the busy grace.

Pure: ``decide`` reads a schedule, the policy's state and an instant (the agent's clock,
``pod_agent.clock``) and says whether to stop now, why, and what the next stop is. The
supervisor feeds it each watchdog tick; the unit tests feed it any instant they like
(time zones, a DST night, a skewed clock).

The rules, in the order they win:
  * disarmed: nothing stops the pod (the memory guard still stops slots, never the pod);
  * an extension (``keep running until T``) that has not ended: nothing stops the pod —
    not the schedule, not idleness;
  * the scheduled stop (``schedule.stop`` on a scheduled day, in the profile's zone) is
    due from that minute until it is done that day; an extension that covered it moves
    it to the extension's end. Requests running then postpone it by at most
    ``busy_grace``, counted from the first tick that found it due;
  * idle: no request finished, running or waiting on any slot for ``idle_stop_after``
    (inside working hours only when ``idle_stop_in_hours``). A slot whose metrics cannot
    be read serves nobody: it counts as idle.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from .profile import Schedule

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
MAX_EXTENSION_S = 24 * 3600.0
"""An extension ends within a day: a typo (20:00 tomorrow for tonight) must not buy a
weekend of billing."""


@dataclass(frozen=True)
class Extension:
    until: float
    by: str
    reason: str
    set_at: float
    holds: float | None = None
    """The scheduled stop it holds back (pending when it was set, or falling before its
    end), carried out when it ends; None: it only keeps idleness from stopping the pod."""

    def to_json(self, zone: dt.tzinfo | None = None) -> dict[str, Any]:
        d: dict[str, Any] = asdict(self)
        d["until_iso"] = iso(self.until, zone)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Extension:
        holds = d.get("holds")
        return cls(float(d["until"]), str(d.get("by") or "?"), str(d.get("reason") or ""),
                   float(d.get("set_at") or 0.0), None if holds is None else float(holds))


@dataclass
class PolicyState:
    """What the supervisor keeps between ticks; only the extension is kept on disk (it
    must survive a restart of the agent; the rest is re-learned in one tick)."""

    armed: bool = True
    extension: Extension | None = None
    last_stop_day: str | None = None
    """The local date whose scheduled stop was carried out (or failed: never twice)."""
    last_activity: float = 0.0
    """Agent clock: the last tick that saw a request, or the agent's start."""
    due_since: float | None = None
    """Agent clock: the first tick that found the scheduled stop due (the grace counts
    from here)."""
    warned: set[str] = field(default_factory=set)
    started_at: float = 0.0
    """Agent clock: when the agent started. A pod started after its stop time (an
    engineer's evening ``up``) gets ``warn_before`` — warned at once — to be extended,
    instead of being stopped within a tick."""


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

    def warn_key(self) -> str:
        return f"{self.next_reason}@{round(self.next_at or 0)}"


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


def local_day(schedule: Schedule, now: float) -> str:
    return dt.datetime.fromtimestamp(now, zone(schedule)).date().isoformat()


def make_extension(schedule: Schedule, st: PolicyState, now: float, until: float, by: str,
                   reason: str) -> Extension:
    pending = stop_pending(schedule, now, st.last_stop_day)
    sched = next_scheduled(schedule, now)
    holds = pending if pending is not None else (
        sched if sched is not None and sched <= until else None)
    return Extension(until, by, reason, now, holds)


def decide(schedule: Schedule, st: PolicyState, now: float, busy: bool) -> Decision:
    """``busy``: a request is running or waiting on some slot now. Updates
    ``st.due_since`` (the grace's start) and nothing else."""
    idle_s = max(0.0, now - st.last_activity)
    if not st.armed:
        st.due_since = None
        return Decision(idle_s=idle_s)
    warn_s = schedule.seconds("warn_before") or 0.0
    ext = st.extension
    if ext is not None and ext.until > now:
        st.due_since = None
        if ext.holds is not None:
            return _decision(ext.until, "extension ends", idle_s, now, warn_s)
        # it holds no scheduled stop back: only idleness, until it ends
        return _decision(next_scheduled(schedule, now), "schedule", idle_s, now, warn_s)
    ended = ext is not None and ext.holds is not None
    pending = stop_pending(schedule, now, st.last_stop_day)
    if not ended and pending is not None and now < st.started_at + warn_s:
        return _decision(st.started_at + warn_s, "schedule", idle_s, now, warn_s)
    if ended or pending is not None:
        reason = "extension ended" if ended else "schedule"
        if st.due_since is None:
            st.due_since = now
        grace_until = st.due_since + (schedule.seconds("busy_grace") or 0.0)
        if busy and now < grace_until:
            return Decision(False, None, grace_until, reason, idle_s, grace_until, True)
        return Decision(True, reason, now, reason, idle_s)
    st.due_since = None
    nxt, why = next_scheduled(schedule, now), "schedule"
    after = schedule.seconds("idle_stop_after")
    if after is not None and (schedule.idle_stop_in_hours or not in_hours(schedule, now)):
        # a running request is activity until it ends
        idle_at = (now if busy else st.last_activity) + after
        if now >= idle_at:
            return Decision(True, "idle", now, "idle", idle_s)
        if nxt is None or idle_at < nxt:
            nxt, why = idle_at, "idle"
    return _decision(nxt, why, idle_s, now, warn_s)


def _decision(nxt: float | None, why: str, idle_s: float, now: float, warn_s: float
              ) -> Decision:
    warn = nxt is not None and 0 <= nxt - now <= warn_s
    return Decision(False, None, nxt, why if nxt is not None else None, idle_s, None, warn)


def extension_until(text: str, schedule: Schedule, now: float) -> float:
    """``+1h`` / ``+90m`` (from now), ``HH:MM`` (the next such wall time in the profile's
    zone), or an ISO instant → the instant; ValueError says what is accepted."""
    from .profile import duration_s

    text = text.strip()
    if text.startswith("+"):
        until = now + duration_s(text[1:])
    elif len(text) == 5 and text[2] == ":":
        h, m = _hm(text)
        tz = zone(schedule)
        local = dt.datetime.fromtimestamp(now, tz)
        until = _at(local.date(), (h, m), tz)
        if until <= now:
            until = _at(local.date() + dt.timedelta(days=1), (h, m), tz)
    else:
        try:
            when = dt.datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{text!r}: give +1h, +90m, HH:MM or an ISO time") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=zone(schedule))
        until = when.timestamp()
    if until <= now:
        raise ValueError(f"{text!r} is not in the future on this pod's clock "
                         f"({iso(now, zone(schedule))})")
    if until - now > MAX_EXTENSION_S:
        raise ValueError(f"{text!r} is more than {MAX_EXTENSION_S / 3600:.0f} h away; "
                         "disarm the watchdog for longer")
    return until


# -- the extension on disk -----------------------------------------------------------

def load_extension(path: str) -> Extension | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return Extension.from_json(json.load(fh))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_extension(path: str, ext: Extension | None) -> None:
    """Atomic: a crash mid-write leaves the old file, never half a new one."""
    if ext is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(asdict(ext), fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
