"""The watchdog's state on disk: one small versioned record, ``watchdog.json``.

It holds what a restart of the agent must not lose: whether it is armed, the extension,
the grace that is counting (``due``), the warnings already sent, the day whose scheduled
stop is done, and the last stop with who made it and why. Each part has a lifetime:

  * everything but ``last_stop`` lives as long as the pod's run (one start of its
    container, ``run_id``): a record of another run means the pod was stopped and
    started since — by ``down``, ``down --force``, the RunPod console or its API — so
    its extension, grace and warnings are discarded (and logged), a disarmed watchdog is
    armed again (a pod started in the morning has its evening stop), and that stop is
    recorded if nobody recorded it;
  * an extension whose end has passed when the agent starts is stale: discarded and
    logged, never acted on (the stop it would have made was the agent's to make while
    it ran);
  * a record that cannot be read (not JSON, not an object, a newer version, a field
    that is not what it says: ``null``, a list, ``"until": "inf"``) is discarded as a
    whole and logged: the agent starts with the schedule alone.

The record before this one (``extension.json``, the extension alone) is read once the
same way and removed."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict
from typing import Any, TypeGuard

from .stoppolicy import Extension, LastStop, PolicyState, Warned

VERSION = 1
STATE_FILE = "watchdog.json"
LEGACY_FILE = "extension.json"


def run_id() -> str | None:
    """This start of the pod: ``$POD_AGENT_RUN_ID`` (a simulated pod's), else the
    kernel's boot id and the start time of the container's first process — a stopped
    and started pod is a new container, an agent restarted in it is not. None where
    neither can be read (then only time tells an extension stale)."""
    env = os.environ.get("POD_AGENT_RUN_ID")
    if env:
        return env[:128]
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            boot = fh.read().strip()
        with open("/proc/1/stat", encoding="ascii") as fh:
            # the command may hold spaces and parentheses: fields after the last ')'
            start = fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None
    return f"{boot}/{start}"


def record(st: PolicyState, run: str | None, now: float) -> dict[str, Any]:
    return {
        "version": VERSION, "run": run, "saved_at": now, "armed": st.armed,
        "extension": None if st.extension is None else asdict(st.extension),
        "last_stop_day": st.last_stop_day,
        "last_stop": None if st.last_stop is None else asdict(st.last_stop),
        "due": None if st.due_key is None or st.due_since is None else {
            "key": st.due_key, "since": st.due_since},
        # [at, sent] or, with a lead of its own (an extension ended by hand), [at, sent, lead]
        "warned": {k: [w.at, w.sent] if w.lead is None else [w.at, w.sent, w.lead]
                   for k, w in st.warned.items()},
    }


def save(path: str, rec: dict[str, Any]) -> None:
    """Atomic: a crash mid-write leaves the old record, never half a new one."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(rec, fh, sort_keys=True, allow_nan=False)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


MISSING = object()
"""``read``'s answer for no file (a file holding ``null`` is one, and is wrong)."""


def read(path: str) -> tuple[Any, str | None]:
    """(the decoded JSON, None), (MISSING, None) when there is no file, or
    (MISSING, why)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(1 << 20)
    except FileNotFoundError:
        return MISSING, None
    except (OSError, UnicodeDecodeError) as exc:
        return MISSING, f"cannot be read: {getattr(exc, 'strerror', None) or exc}"
    try:
        # NaN and Infinity are no JSON; a record holding them is hand-made or broken
        return json.loads(text, parse_constant=_no_constant), None
    except (ValueError, RecursionError) as exc:
        return MISSING, f"is not JSON: {str(exc)[:120]}"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a record holds")


def restore(st: PolicyState, raw: Any, run: str | None, now: float, mono: float,
            *, legacy: bool = False) -> list[dict[str, Any]]:
    """Put what ``raw`` (a record, or the legacy extension) still means into ``st``;
    returns what was discarded and why (for the audit log and the agent's log)."""
    notes: list[dict[str, Any]] = []
    if raw is MISSING:
        return notes
    if legacy:
        if not isinstance(raw, dict):
            return [{"what": "extension", "why": f"not an object but {type(raw).__name__}"}]
        raw = {"version": VERSION, "run": run, "extension": raw}
    if not isinstance(raw, dict):
        return [{"what": "state", "why": f"not an object but {type(raw).__name__}"}]
    if raw.get("version") != VERSION:
        return [{"what": "state", "why": f"version {str(raw.get('version'))[:20]!r}, "
                                         f"this agent reads {VERSION}"}]
    old_run = raw.get("run") if isinstance(raw.get("run"), str) else None
    same_run = run is None or old_run is None or old_run == run
    try:
        last = _last_stop(raw.get("last_stop"))
    except ValueError as exc:
        last = None
        notes.append({"what": "last_stop", "why": str(exc)})
    if same_run:
        _restore_run(st, raw, now, mono, notes)
    else:
        ext = raw.get("extension")
        if ext is not None:
            notes.append({"what": "extension", "why": "the pod was stopped and started "
                          "since it was set", "extension": _short(ext)})
        if last is None or last.run != old_run or last.ok is False:
            # stopped, and not by this agent's own hand (nor announced to it)
            last = LastStop("stopped outside the agent", detail="the pod was stopped and "
                            "started again since the agent last ran (down, the RunPod "
                            "console or its API)", run=old_run, seen_at=now)
    st.last_stop = last
    return notes


def _restore_run(st: PolicyState, raw: dict[str, Any], now: float, mono: float,
                 notes: list[dict[str, Any]]) -> None:
    ext_raw = raw.get("extension")
    if ext_raw is not None:
        try:
            ext = Extension.from_json(ext_raw)
        except ValueError as exc:
            notes.append({"what": "extension", "why": str(exc), "extension": _short(ext_raw)})
        else:
            if ext.until <= now:
                notes.append({"what": "extension", "why": "stale: it ended before the "
                              "agent started", "extension": _short(ext_raw)})
            elif ext.set_at > now + 60:
                notes.append({"what": "extension", "why": "set after the pod's clock's "
                              "now: a clock that went back, or a hand-made file",
                              "extension": _short(ext_raw)})
            else:
                st.extension = ext
    if isinstance(raw.get("armed"), bool):  # a disarm holds until armed, in this run
        st.armed = raw["armed"]
    day = raw.get("last_stop_day")
    if isinstance(day, str) and len(day) == 10:
        st.last_stop_day = day
    due = raw.get("due")
    if isinstance(due, dict) and isinstance(due.get("key"), str):
        since = due.get("since")
        if _finite(since) and since <= now:
            # the grace counts from the first tick that found the stop due, before the
            # restart too: its elapsed part carries over onto this process's clock
            st.due_key, st.due_since, st.due_mono = due["key"], since, mono - (now - since)
    warned = raw.get("warned")
    if isinstance(warned, dict):
        for k, v in list(warned.items())[:64]:
            if isinstance(k, str) and isinstance(v, list) and len(v) in (2, 3) \
                    and all(_finite(x) for x in v) and v[1] <= now:
                # how long ago it was given carries over onto this process's clock
                st.warned[k] = Warned(float(v[0]), float(v[1]), mono - (now - v[1]),
                                      float(v[2]) if len(v) == 3 else None)


def _last_stop(d: Any) -> LastStop | None:
    if d is None:
        return None
    if not isinstance(d, dict) or not isinstance(d.get("reason"), str):
        raise ValueError("not a stop record")
    at, seen = d.get("at"), d.get("seen_at")
    return LastStop(d["reason"][:80], float(at) if _finite(at) else None,
                    d["by"][:64] if isinstance(d.get("by"), str) else None,
                    d["ok"] if isinstance(d.get("ok"), bool) else None,
                    d["detail"][:300] if isinstance(d.get("detail"), str) else "",
                    d["run"] if isinstance(d.get("run"), str) else None,
                    float(seen) if _finite(seen) else None)


def _finite(v: Any) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v \
        and v not in (float("inf"), float("-inf"))


def _short(v: Any) -> str:
    try:
        s = json.dumps(v, default=str)
    except (ValueError, RecursionError):
        s = type(v).__name__
    return s if len(s) <= 200 else s[:197] + "..."


def remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
