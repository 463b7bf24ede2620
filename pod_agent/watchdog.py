"""The pod's own evening stop, and a memory guard, for the days the laptop is off.

Stop: at the profile's ``schedule.stop`` local time on a scheduled day, stop
the pod with ``runpodctl stop pod $RUNPOD_POD_ID``, or with RunPod's REST v2
``POST /pods/{id}/action {"action": "stop"}`` and the pod-scoped
``RUNPOD_API_KEY`` when ``runpodctl`` is missing. Memory guard: when
MemAvailable falls under a floor, stop the largest slot, never the host.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass

from .profile import Schedule

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DEFAULT_API_BASE = "https://api.runpod.io/v2"


@dataclass
class WatchdogState:
    armed: bool = True
    mem_floor_gib: float = 12.0
    last_result: str | None = None
    last_mem_action: str | None = None
    last_warning: dict | None = None
    """The stop's own record (its day, reason, who) is the stop policy's
    (``PolicyState.last_stop``), kept on disk with the extension."""

    def to_json(self, schedule: Schedule, now: dt.datetime) -> dict:
        nxt = next_stop(schedule, now)
        return {"armed": self.armed, "stop_at": schedule.stop, "timezone": schedule.timezone,
                "days": schedule.days, "next_stop": nxt.isoformat() if nxt else None,
                "mem_floor_gib": self.mem_floor_gib, "last_result": self.last_result,
                "last_mem_action": self.last_mem_action, "last_warning": self.last_warning}


def _zone(schedule: Schedule):
    from zoneinfo import ZoneInfo

    return ZoneInfo(schedule.timezone)


def _stop_time(schedule: Schedule) -> tuple[int, int]:
    h, m = schedule.stop.split(":")
    return int(h), int(m)


def due(schedule: Schedule, now: dt.datetime, last_stop_day: str | None) -> bool:
    """True when it is at or past today's stop time on a scheduled day, not yet done today."""
    local = now.astimezone(_zone(schedule))
    if WEEKDAYS[local.weekday()] not in schedule.days:
        return False
    h, m = _stop_time(schedule)
    if (local.hour, local.minute) < (h, m):
        return False
    return last_stop_day != local.date().isoformat()


def next_stop(schedule: Schedule, now: dt.datetime) -> dt.datetime | None:
    local = now.astimezone(_zone(schedule))
    h, m = _stop_time(schedule)
    for add in range(8):
        day = local.date() + dt.timedelta(days=add)
        if WEEKDAYS[day.weekday()] not in schedule.days:
            continue
        at = dt.datetime(day.year, day.month, day.day, h, m, tzinfo=local.tzinfo)
        if at >= local:
            return at
    return None


def stop_pod(pod_id: str | None, timeout_s: float = 60.0) -> tuple[bool, str]:
    """Stop this pod. Returns (ok, what happened); never raises, never prints the key."""
    if not pod_id:
        return False, "RUNPOD_POD_ID is not set"
    exe = shutil.which("runpodctl")
    if exe:
        try:
            r = subprocess.run([exe, "stop", "pod", pod_id], capture_output=True, text=True,
                               timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"runpodctl failed: {exc}"
        out = (r.stdout + r.stderr).strip().splitlines()
        if r.returncode == 0:
            return True, f"runpodctl: {out[-1] if out else 'ok'}"
        return False, f"runpodctl exit {r.returncode}: {out[-1] if out else ''}"
    key = os.environ.get("RUNPOD_API_KEY")
    if not key:
        return False, "neither runpodctl nor RUNPOD_API_KEY is available"
    base = os.environ.get("RUNPOD_API_BASE", DEFAULT_API_BASE).rstrip("/")
    req = urllib.request.Request(
        f"{base}/pods/{pod_id}/action", method="POST",
        data=json.dumps({"action": "stop"}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return True, f"REST v2 stop: HTTP {resp.status}"
    except urllib.error.HTTPError as exc:
        return False, f"REST v2 stop: HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        return False, f"REST v2 stop failed: {getattr(exc, 'reason', exc)}"


def post_webhook(url: str, text: str, timeout_s: float = 10.0) -> tuple[bool, str]:
    """A Slack-compatible ``{"text": …}`` POST; never raises, never says the URL (it
    embeds a token)."""
    req = urllib.request.Request(url, method="POST", data=json.dumps({"text": text}).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return True, f"HTTP {resp.status}"
    except urllib.error.HTTPError as exc:
        return False, f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return False, f"failed: {type(exc).__name__}"
