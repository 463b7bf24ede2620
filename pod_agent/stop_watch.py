"""The watchdog's side of the supervisor: each tick the memory guard, the pods' traffic
and the stop policy (``stoppolicy``), and the stops, warnings and extensions they make,
kept on disk (``stopstate``) so that a restart of the agent keeps them."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import sys
from typing import Any, Dict, List, Tuple

from . import audit, clock, hostcheck, paths, stoppolicy, stopstate, traffic, watchdog
from .actions import Action
from .envfile import read_env
from .memory_guard import MemoryGuard
from .profile import Profile
from .requests import ExtendRequest, Refused, StoppingRequest
from .slot_keeper import SlotKeeper
from .stoppolicy import Decision, LastStop, PolicyState
from .tickfailures import TickFailures

TRAFFIC_TIMEOUT_S = 5.0
"""A slot's ``/metrics`` read for the idle stop; a slot busy generating on a loaded host
answers late, and a read that times out counts as no traffic."""

MIN_TICK_S = 0.5
"""The shortest real wait between two watchdog ticks on an accelerated pod clock: at x60
the default 30 pod-seconds is half a real second (each tick reads every slot's
/metrics: faster would spin the host)."""


def tick_wait_s(interval_s: float, speed: float) -> float:
    """Real seconds between ticks: ``interval_s`` is on the pod's clock, so the watchdog
    looks as often in pod time whatever its speed (the demo's ``--clock-speed``): a
    warning ``warn_before`` ahead stays ``warn_before`` ahead, not a tick late."""
    return max(min(interval_s, MIN_TICK_S), interval_s / max(speed, 1e-9))


def zone(profile: Profile) -> dt.tzinfo:
    from zoneinfo import ZoneInfo

    return ZoneInfo(profile.schedule.timezone)


class StopWatch:
    def __init__(self, profile: Profile, keeper: SlotKeeper, stopping: asyncio.Event, *,
                 pod_clock: Any = None, interval_s: float = 30.0) -> None:
        self.profile = profile
        self.keeper = keeper
        self.stopping = stopping
        self.interval_s = interval_s
        self.clock = pod_clock or clock
        """``now()`` (the wall clock, schedules) and ``monotonic()`` (durations); the
        tests pass their own."""
        self.state = watchdog.WatchdogState(mem_floor_gib=float(
            os.environ.get("POD_AGENT_MEM_FLOOR_GIB", "12")))
        self.guard = MemoryGuard(keeper, self.state, stopping, self.send_warning)
        self.run_id = stopstate.run_id()
        self.policy = PolicyState()
        self.policy.touch(self.clock.now(), self.clock.monotonic())
        self._saved: Dict[str, Any] | None = None
        self.restore()
        self.state.armed = self.policy.armed
        self.decision = Decision()
        """The last good tick's plan (a failing stop policy still carries out its stop)."""
        self.failures = TickFailures()
        self.busy = False
        """Whether the last tick saw requests (in flight, or finished since the tick
        before): the pod is not idle, whatever time passed since that tick."""
        self._traffic: Dict[str, traffic.SlotTraffic | None] = {}

    # -- kept on disk --------------------------------------------------------------
    def _state_path(self) -> str:
        return paths.path(stopstate.STATE_FILE)

    def restore(self) -> None:
        """The watchdog's record from before this start (``stopstate``): what it still
        means is kept; the rest is discarded and said, never acted on."""
        now, mono = self.clock.now(), self.clock.monotonic()
        raw, problem = stopstate.read(self._state_path())
        notes = [{"what": "state", "why": problem}] if problem else []
        notes += stopstate.restore(self.policy, raw, self.run_id, now, mono)
        legacy = paths.path(stopstate.LEGACY_FILE)
        if self.policy.extension is None and os.path.exists(legacy):
            raw, problem = stopstate.read(legacy)
            notes += [{"what": "extension", "why": problem}] if problem else \
                stopstate.restore(self.policy, raw, self.run_id, now, mono, legacy=True)
        for note in notes:
            print(f"pod-agent: watchdog {note['what']} discarded: {note['why']}",
                  file=sys.stderr, flush=True)
            with contextlib.suppress(OSError):
                audit.record({"op": "watchdog-state-discarded", **note})
        with contextlib.suppress(OSError):
            self.save()
            stopstate.remove(legacy)

    def save(self) -> None:
        """Written when it changed (and fsynced: it is what a restart keeps)."""
        rec = stopstate.record(self.policy, self.run_id, 0.0)
        if rec != self._saved:
            stopstate.save(self._state_path(), {**rec, "saved_at": self.clock.now()})
            self._saved = rec

    def set_armed(self, armed: bool) -> None:
        self.state.armed = self.policy.armed = armed
        with contextlib.suppress(OSError):
            self.save()  # a restart keeps it (this run of the pod)
        audit.record({"op": "watchdog", "cmd": "arm" if armed else "disarm"})

    # -- the tick ------------------------------------------------------------------
    async def loop(self) -> None:
        while not self.stopping.is_set():
            try:
                await self.tick()
            except Exception as exc:  # a tick's parts say their own failures; this is
                # anything past them, said the same way (never swallowed: issue 42)
                with contextlib.suppress(Exception):
                    self.failures.tick(self.clock.now(), [("tick", exc)], self._log_tick)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), tick_wait_s(
                    self.interval_s, clock.speed()))

    def _log_tick(self, rec: Dict[str, Any], tb: str) -> None:
        """A failed (or recovered) tick: the agent's log, with the traceback, and the
        audit log."""
        with contextlib.suppress(Exception):
            print(f"pod-agent: {rec['op']}: {rec.get('error') or ''}\n{tb}".rstrip(),
                  file=sys.stderr, flush=True)
        with contextlib.suppress(OSError):
            audit.record(rec)

    async def tick(self, now: float | None = None) -> None:
        """The memory guard, then the stop policy on this tick's traffic; ``now`` is the
        agent's wall clock (tests pass their own, or a clock).

        Each part fails on its own (``tickfailures``): a memory guard or a traffic read
        that raises never keeps the stop policy from deciding, and a stop policy that
        raises still carries out the last good plan's stop (``_fallback_stop``)."""
        now = self.clock.now() if now is None else now
        mono = self.clock.monotonic()
        failures: List[Tuple[str, BaseException]] = []
        try:
            avail = hostcheck.mem_available_gib()
            await self.guard.tick(avail, now)
            await self.guard.warn_near(avail)
        except Exception as exc:
            failures.append(("memory guard", exc))
        busy = False
        try:
            busy = await self._look_for_traffic(now, mono)
        except Exception as exc:
            # unknown traffic: none seen, as with a slot whose /metrics cannot be read
            # (stoppolicy: it serves nobody); the schedule's stop is decided all the same
            failures.append(("traffic", exc))
            self.busy = False
            self._traffic = {}
        try:
            await self._decide(now, mono, busy, failures)
        except Exception as exc:
            failures.append(("stop policy", exc))
            try:
                await self._fallback_stop(now, busy)
            except Exception as exc2:
                failures.append(("last good plan", exc2))
        self.failures.tick(now, failures, self._log_tick)

    async def _look_for_traffic(self, now: float, mono: float) -> bool:
        """Whether a request ran since the last tick (then the pod is not idle)."""
        loop = asyncio.get_running_loop()
        # each slot's own /metrics, in a thread (a hung slot must not hold the loop); the
        # tick waits for it: ticks never overlap, however slow a loaded slot answers
        ports = {n: p.port for n, p in self.keeper.procs.items()}
        reads = await loop.run_in_executor(None, traffic.read_all, ports, TRAFFIC_TIMEOUT_S)
        # busy: a request in flight now, or one finished since the last tick. In-flight
        # alone flickers to 0 between two requests of a steady stream, and a grace
        # that ends in such a gap is no grace
        busy = any(traffic.active(self._traffic.get(n), r) for n, r in reads.items())
        # a slot loading for the first time is a pod starting, not a pod nobody uses (a
        # crash loop's restarts are not: restarts > 0)
        loading = any(p.state.state == "starting" and p.state.restarts == 0
                      for p in self.keeper.procs.values())
        if loading or busy:
            self.policy.touch(now, mono)
        self.busy = busy
        self._traffic = reads
        return busy

    async def _decide(self, now: float, mono: float, busy: bool,
                      failures: List[Tuple[str, BaseException]]) -> None:
        sched = self.profile.schedule
        pol = self.policy
        pol.armed = self.state.armed
        ext = pol.extension
        if ext is not None and ext.until <= now and not stoppolicy.ends_with_stop(sched, ext):
            self.set_extension(None, "ended")  # its end stops nothing: the plan resumes
        d = self.decision = stoppolicy.decide(sched, pol, now, busy, mono)
        if d.announce:
            pol.note_warning(d, now, mono)
            with contextlib.suppress(OSError):
                self.save()  # sent once, a restart included
            try:
                await self.warn(d.next_reason or "stop", d.next_at or now, now)
            except Exception as exc:  # a warning that failed never holds back the stop
                failures.append(("warning", exc))
        if d.stop:
            if d.reason == "idle":  # a failed stop is retried after another idle period
                pol.touch(now, mono)
            await self.stop_pod(d.reason or "stop", "watchdog", now,
                                {"idle_s": round(d.idle_s), "busy": busy})
        else:
            with contextlib.suppress(OSError):
                self.save()

    async def _fallback_stop(self, now: float, busy: bool) -> None:
        """The stop policy raised: the last good tick's plan (``self.decision``) and the
        schedule's own next stop still stop the pod, the earlier first — warned
        ``warn_before`` ahead if it was not yet, then at its time. An idle stop only
        while no request is seen (a busy pod is not idle, plan or not); the schedule's
        and an extension's whatever the traffic."""
        d = self.decision
        pol = self.policy
        if not self.state.armed or d.stop:  # a plan carried out is no plan any more
            return
        plans: List[Tuple[float, str, str]] = []
        if d.next_at is not None and d.next_reason and not (d.next_reason == "idle" and busy):
            plans.append((d.next_at, d.next_reason, d.warn_key()))
        with contextlib.suppress(Exception):  # the schedule alone, as decide keys it
            at = stoppolicy.scheduled_stop(self.profile.schedule, pol, now)
            if at is not None:
                plans.append((at, "schedule", f"schedule@{round(at)}"))
        if not plans:
            return
        at, why, key = min(plans)
        warn_s = self.profile.schedule.seconds("warn_before") or 0.0
        sent = pol.warning_for(key, at)
        if sent is None:
            if at - now <= warn_s:
                pol.warned[key] = stoppolicy.Warned(at, now, self.clock.monotonic())
                with contextlib.suppress(OSError):
                    self.save()
                await self.warn(why, max(at, now + warn_s), now)
            return
        if now < max(at, sent.sent + (warn_s if sent.lead is None else sent.lead)):
            return
        reason = "extension ended" if why == "extension ends" else why
        self.decision = Decision(True, reason, now, reason, key=key)  # made once
        await self.stop_pod(reason, "watchdog", now, {"fallback": "the stop policy failed: "
                                                      "the last good plan's stop"})

    # -- stops and warnings --------------------------------------------------------
    async def stop_pod(self, reason: str, by: str, now: float,
                       extra: Dict[str, Any] | None = None) -> Tuple[bool, str]:
        """Any stop the agent makes: recorded (with the day's scheduled stop it carries
        out) and the extension ended *before* the pod goes — a stopped pod's extension
        must not come back with it — then stopped."""
        pol = self.policy
        day = stoppolicy.done_day(self.profile.schedule, pol, now, reason)
        if day is not None:  # the day's scheduled stop is done (or failed: never twice)
            pol.last_stop_day = day
        pol.last_stop = LastStop(reason, now, by, None, "stopping", self.run_id)
        pol.due_key = pol.due_since = pol.due_mono = None
        with contextlib.suppress(OSError):
            self.set_extension(None, f"ended by the stop ({reason})")
        ok, what = await asyncio.get_running_loop().run_in_executor(
            None, watchdog.stop_pod, os.environ.get("RUNPOD_POD_ID"))
        pol.last_stop = LastStop(reason, now, by, ok, what[:300], self.run_id)
        with contextlib.suppress(OSError):
            self.save()
        self.state.last_result = (f"{stoppolicy.iso(now)}: {'stopped' if ok else 'FAILED'} "
                                  f"({reason}): {what}")
        with contextlib.suppress(OSError):
            audit.record({"op": "watchdog-stop" if by == "watchdog" else "stop",
                          "reason": reason, "by": by, "ok": ok, "detail": what,
                          **(extra or {})})
        return ok, what

    async def stop_now(self, act: Action, by: str) -> None:
        act.progress("stop pod", 0.1, "stopping slots")
        await self.keeper.pause_all()
        ok, what = await self.stop_pod("stop-now", by, self.clock.now())
        self.state.last_result = f"stop-now: {'stopped' if ok else 'FAILED'}: {what}"
        act.finish("ok" if ok else "failed", message=what)

    async def warn(self, reason: str, at: float, now: float) -> None:
        tz = zone(self.profile)
        local = dt.datetime.fromtimestamp(at, tz).strftime("%H:%M %Z")
        mins = max(0, round((at - now) / 60))
        pod = os.environ.get("RUNPOD_POD_ID") or "this pod"
        await self.send_warning(
            {"reason": reason, "at": stoppolicy.iso(at, tz), "in_s": round(at - now)},
            f"pod {pod} ({self.profile.name}) stops at {local} (in {mins} min): {reason}. "
            "To keep it: press w in pod-console (extend +1h, +2h or until a time), or run "
            "`pod-agent watchdog extend +1h --reason WHY` on the pod.")

    async def send_warning(self, rec: Dict[str, Any], text: str) -> None:
        self.state.last_warning = {**rec, "text": text, "t": self.clock.now()}
        with contextlib.suppress(OSError):
            audit.record({"op": "stop-warning", **rec, "text": text})
        url = os.environ.get("POD_AGENT_WEBHOOK_URL") or read_env(paths.env_file()).get(
            "POD_AGENT_WEBHOOK_URL")
        if url:
            ok, detail = await asyncio.get_running_loop().run_in_executor(
                None, watchdog.post_webhook, url, text)
            with contextlib.suppress(OSError):
                audit.record({"op": "webhook", "ok": ok, "detail": detail})

    # -- extensions ----------------------------------------------------------------
    def set_extension(self, ext: stoppolicy.Extension | None, why: str | None) -> None:
        """Kept on disk and audited, or OSError (then not promised: the caller says so)."""
        old = self.policy.extension
        self.policy.extension = ext
        if ext is not None:
            self.policy.warned.clear()  # a new plan: its warnings are new
        self.save()
        if ext is not None:
            audit.record({"op": "extend", **ext.to_json(zone(self.profile))})
        elif old is not None and why:
            audit.record({"op": "extension-" + why.split(" ", 1)[0], "why": why,
                          "until": stoppolicy.iso(old.until), "by": old.by})

    def _extension_json(self, ext: stoppolicy.Extension) -> Dict[str, Any]:
        sched = self.profile.schedule
        return {**ext.to_json(zone(self.profile)),
                "stops_at_end": stoppolicy.ends_with_stop(sched, ext),
                "crosses_midnight": stoppolicy.crosses_midnight(sched, ext)}

    async def extend(self, req: ExtendRequest) -> Dict[str, Any]:
        """Keep the pod up until ``req.until`` (kept in the watchdog's record: a restart
        keeps it), or end the extension (``clear``); the result's fields, or Refused."""
        now = self.clock.now()
        if req.clear:
            return await self._clear(now)
        by = (req.by or "").strip()[:64] or "unknown"
        reason = (req.reason or "").strip()[:200]
        if not all(c.isprintable() for c in by + reason):
            raise Refused("by and reason must be printable text")
        try:
            until = stoppolicy.extension_until(req.until or "", self.profile.schedule, now)
        except ValueError as exc:
            raise Refused(f"extend: {exc}") from None
        ext = stoppolicy.make_extension(self.profile.schedule, self.policy, now, until, by,
                                        reason, req.replaces_next_stop)
        try:
            self.set_extension(ext, None)
        except OSError as exc:  # not kept on disk, or not audited: not promised
            self.policy.extension = None
            with contextlib.suppress(OSError):  # nor left to come back after a restart
                self.save()
            raise Refused(f"extend: cannot keep it on disk: {exc}") from None
        d = self.decision = stoppolicy.decide(self.profile.schedule, self.policy, now, False,
                                              self.clock.monotonic())
        return {"extension": self._extension_json(ext),
                "next_stop": stoppolicy.iso(d.next_at, zone(self.profile)),
                "next_stop_reason": d.next_reason}

    async def _clear(self, now: float) -> Dict[str, Any]:
        try:
            self.set_extension(None, "cleared")
        except OSError as exc:
            raise Refused(f"extend --clear: cannot keep it on disk: {exc}") from None
        # the plan resumes: a stop already due is warned now and made END_GRACE_S
        # later (what the console's confirmation says), not a fresh warn_before
        mono = self.clock.monotonic()
        d = self.decision = stoppolicy.resume_plan(self.profile.schedule, self.policy,
                                                   now, self.busy, mono)
        if d.announce:
            self.policy.note_warning(d, now, mono)
            with contextlib.suppress(OSError):
                self.save()
            with contextlib.suppress(Exception):  # said; the answer must still come
                await self.warn(d.next_reason or "stop", d.next_at or now, now)
        return {"extension": None, "next_stop": stoppolicy.iso(d.next_at, zone(self.profile)),
                "next_stop_reason": d.next_reason,
                "stop_in_s": None if d.next_at is None else round(d.next_at - now),
                "warned": d.announce}

    def stopping_from_outside(self, req: StoppingRequest) -> Dict[str, Any]:
        """Someone else (the console's ``down``) is about to stop this pod. The extension
        ends now and the stop is recorded; the next start finds a record it can read,
        not an extension to act on."""
        now = self.clock.now()
        by = "".join(c for c in req.by or "" if c.isprintable())[:64] or "unknown"
        reason = "".join(c for c in req.reason or "" if c.isprintable())[:80] or "down"
        old = self.policy.extension
        tz = zone(self.profile)
        self.policy.last_stop = LastStop(reason, now, by, None, "stopped by the console",
                                         self.run_id)
        try:
            self.set_extension(None, f"ended by the stop ({reason})")
            audit.record({"op": "stopping", "by": by, "reason": reason, "extension":
                          None if old is None else old.to_json(tz)})
        except OSError as exc:
            raise Refused(f"stopping: cannot keep it on disk: {exc}") from None
        return {"ended": None if old is None else old.to_json(tz)}

    # -- what status says ----------------------------------------------------------
    def to_json(self, now: float) -> Dict[str, Any]:
        sched = self.profile.schedule
        tz = zone(self.profile)
        d = self.decision
        pol = self.policy
        ext = pol.extension
        base = self.state.to_json(sched, dt.datetime.fromtimestamp(now, dt.timezone.utc))
        return {
            **base, "now": now, "clock_speed": clock.speed(),
            "clock_simulated": "POD_AGENT_CLOCK" in os.environ,
            # before the first tick (or disarmed): the schedule's own next stop
            "next_stop": base["next_stop"] if d.next_at is None else stoppolicy.iso(d.next_at,
                                                                                   tz),
            "next_stop_reason": d.next_reason, "stop_in_s":
                None if d.next_at is None else round(d.next_at - now, 1),
            "warning": d.warn, "grace_until": stoppolicy.iso(d.grace_until, tz),
            # requests at the last tick: not idle, however long ago (on an accelerated
            # clock) that tick was; a reader does not count idle time on from a busy pod
            "idle_s": 0.0 if self.busy else round(pol.idle_s(self.clock.monotonic()), 1),
            "busy": self.busy,
            "idle_stop_after_s": sched.seconds("idle_stop_after"),
            "idle_stop_in_hours": sched.idle_stop_in_hours,
            "busy_grace_s": sched.seconds("busy_grace"),
            "warn_before_s": sched.seconds("warn_before"),
            "extension": self._extension_json(ext) if ext is not None and ext.until > now
            else None,
            "last_stop_day": pol.last_stop_day,
            "last_stop": None if pol.last_stop is None else pol.last_stop.to_json(tz),
            "last_stop_reason": None if pol.last_stop is None else pol.last_stop.reason,
            "state_version": stopstate.VERSION,
            "memory_warning": self.guard.warning,
            # ticks failing (issue 42): since when, how many, why; None while they go well
            "failing": self._failing_json(tz),
        }

    def _failing_json(self, tz: dt.tzinfo) -> Dict[str, Any] | None:
        f = self.failures.to_json()
        if f is None:
            return None
        return {**f, "since_iso": stoppolicy.iso(f["since"], tz),
                "last_at_iso": stoppolicy.iso(f["last_at"], tz)}
