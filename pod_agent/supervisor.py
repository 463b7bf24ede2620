"""``pod-agent serve``: keeps every slot running, rebalances, and stops the pod in the evening.

It listens on a Unix socket in the agent's home directory (mode 0600), never on
a network port: the console reaches it by running ``pod-agent …`` over SSH,
and those short-lived commands talk to this process. Long actions run here,
so a dropped SSH connection never leaves a half-done rebalance.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import math
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from . import clock, paths, stoppolicy, stopstate, traffic
from .actions import Action, ActionBook, parse_request, read_recorded, valid_action_id
from .engines import ENGINES
from .envfile import read_env
from .events import encode, event
from .gpu_monitor import SAMPLE_EVERY_S, GpuMonitor, slot_pgids
from .heartbeat import DEFAULT_INTERVAL_S, Heartbeat, agent_labels, configured_url
from .hostcheck import mem_available_gib, mem_total_gib
from .launch import SlotCommand, slot_command
from .patches import apply_patch, vllm_site_root
from .profile import MAX_GPU_UTIL_PER_GPU, Profile, cross_checks
from .profiles import load_profile, profile_name
from .slots import SlotProcess, group_rss_kib
from .stoppolicy import Decision, LastStop, PolicyState
from .tickfailures import TickFailures
from .watchdog import WatchdogState, post_webhook, stop_pod

MEM_FLOOR_MAX_GIB = 4096.0


def mem_floor_problem(floor: float, avail: float | None) -> str | None:
    """Why ``floor`` would stop running slots at once: it is above what they leave free
    (MemAvailable now). None when it is a floor the host meets, or nothing is known."""
    if avail is None or floor <= avail:
        return None
    return (f"mem-floor {floor:g} GiB is above the {avail:.1f} GiB the running slots "
            f"leave free (MemAvailable): the memory guard would stop them one by one. "
            f"Choose at most {math.floor(avail * 10) / 10:g} GiB.")
"""No pod has more host memory than this; a larger floor is a typo that stops every slot."""

TRAFFIC_TIMEOUT_S = 5.0
"""A slot's ``/metrics`` read for the idle stop; a slot busy generating on a loaded host
answers late, and a read that times out counts as no traffic."""

EXPORTER_SAMPLE_S = 1.0
"""GPU sampling when the profile serves GPU metrics (``gpu_metrics_port``): dcgm-exporter's
default pace; one sample of 8 GPUs costs ~0.3 ms of CPU (bench/gpu_telemetry_bench.py)."""

BACKOFF_S = (5.0, 10.0, 30.0, 60.0, 120.0)
"""Restart delays after a crash; the last repeats. A crash loop must not spin the host."""

MIN_TICK_S = 0.5
"""The shortest real wait between two watchdog ticks on an accelerated pod clock: at x60
the default 30 pod-seconds is half a real second (each tick reads every slot's
/metrics: faster would spin the host)."""


def tick_wait_s(interval_s: float, speed: float) -> float:
    """Real seconds between ticks: ``interval_s`` is on the pod's clock, so the watchdog
    looks as often in pod time whatever its speed (the demo's ``--clock-speed``): a
    warning ``warn_before`` ahead stays ``warn_before`` ahead, not a tick late."""
    return max(min(interval_s, MIN_TICK_S), interval_s / max(speed, 1e-9))


def _audit(record: dict[str, Any]) -> None:
    with open(paths.audit_log(), "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"t": round(time.time(), 3), **record}, sort_keys=True,
                            default=str) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


class Supervisor:
    def __init__(self, profile_path: str, *, vllm: str = "vllm",
                 models_root: str | None = None, backoff_s: tuple = BACKOFF_S,
                 watchdog_interval_s: float = 30.0, grace_s: float = 20.0,
                 health_poll_s: float = 1.0, apply_patches: bool = True,
                 pod_clock: Any = None,
                 heartbeat_interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.profile_path = os.path.abspath(profile_path)
        self.profile: Profile = load_profile(profile_path)
        self.vllm = vllm
        self.sglang = os.environ.get("POD_AGENT_SGLANG_PYTHON", "python3")
        """The Python whose ``-m sglang.launch_server`` an SGLang slot runs."""
        self.models_root = models_root
        self.backoff_s = backoff_s
        self.watchdog_interval_s = watchdog_interval_s
        self.health_poll_s = health_poll_s
        self.apply_patches = apply_patches
        self.utils: dict[str, float] = {n: s.gpu_util for n, s in self.profile.slots.items()}
        self.utils.update(self._load_overrides())
        self.procs = {n: SlotProcess(n, s.port, paths.slot_log(n), grace_s,
                                     engine=ENGINES[s.engine])
                      for n, s in self.profile.slots.items()}
        self.tasks: dict[str, asyncio.Task] = {}
        self.book = ActionBook()
        self.watchdog = WatchdogState(mem_floor_gib=float(
            os.environ.get("POD_AGENT_MEM_FLOOR_GIB", "12")))
        self.clock = pod_clock or clock
        """``now()`` (the wall clock, schedules) and ``monotonic()`` (durations); the
        tests pass their own."""
        self.run_id = stopstate.run_id()
        self.policy = PolicyState()
        self.policy.touch(self.clock.now(), self.clock.monotonic())
        self._saved_state: dict[str, Any] | None = None
        self._restore_state()
        self.watchdog.armed = self.policy.armed
        self.decision = Decision()
        """The last good tick's plan (a failing stop policy still carries out its stop)."""
        self.tick_failures = TickFailures()
        self.busy = False
        """Whether the last watchdog tick saw requests (in flight, or finished since the
        tick before): the pod is not idle, whatever time passed since that tick."""
        self._mem_warned = False
        self._guard_stopped: dict[str, float] = {}
        """Slots the memory guard stopped → the GiB each held then (what it needs back)."""
        self.memory_warning: str | None = None
        """Said while MemAvailable is near the memory guard's floor."""
        self._traffic: dict[str, traffic.SlotTraffic | None] = {}
        self.patch_results: list[dict[str, str]] = []
        self.started_at = time.time()
        self._stop = asyncio.Event()
        self._server: asyncio.AbstractServer | None = None
        # with an exporter, the supervisor's sample is what Prometheus scrapes: taken
        # as often as the exporter serves it (the exporter holds no NVML of its own)
        self.gpus = GpuMonitor(_audit, sample_every_s=EXPORTER_SAMPLE_S
                               if self.profile.gpu_metrics_port else SAMPLE_EVERY_S,
                               kmsg_path=os.environ.get("POD_AGENT_KMSG", "/dev/kmsg"))
        self._bg: set = set()
        # the agent's own Watchdog alert to Alertmanager, when POD_AGENT_ALERTMANAGER_URL
        # is set: a dead-man's switch then tells this pod's agent gone from no console
        self.heartbeat = Heartbeat(
            agent_labels(os.environ.get("RUNPOD_POD_ID") or socket.gethostname(),
                         profile_name(Path(self.profile_path), self.profile)),
            heartbeat_interval_s, lambda: configured_url(paths.env_file()),
            self._say_heartbeat)

    def _say_heartbeat(self, record: dict[str, Any]) -> None:
        """The heartbeat starting to fail, failing for another reason, going through
        (again): one line in the agent's log and one audit record (never the URL:
        ``to`` is its scheme, host and port)."""
        if record.get("ok"):
            line = (f"heartbeat reaches Alertmanager at {record.get('to')} every "
                    f"{self.heartbeat.interval_s:g} s")
        else:
            line = (f"heartbeat to {record.get('to') or 'Alertmanager'} failed: "
                    f"{record.get('error')} ({record.get('failures')} failed so far; "
                    "tried again at every beat)")
        with contextlib.suppress(Exception):
            print(f"pod-agent: {line}", file=sys.stderr, flush=True)
        with contextlib.suppress(OSError):
            _audit(record)

    # -- configuration -------------------------------------------------------------
    def _state_path(self) -> str:
        return paths.path(stopstate.STATE_FILE)

    def _restore_state(self) -> None:
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
                _audit({"op": "watchdog-state-discarded", **note})
        with contextlib.suppress(OSError):
            self._save_state()
            stopstate.remove(legacy)

    def _save_state(self) -> None:
        """Written when it changed (and fsynced: it is what a restart keeps)."""
        rec = stopstate.record(self.policy, self.run_id, 0.0)
        if rec != self._saved_state:
            stopstate.save(self._state_path(), {**rec, "saved_at": self.clock.now()})
            self._saved_state = rec

    def _overrides_path(self) -> str:
        return paths.path("gpu_util_overrides.json")

    def _load_overrides(self) -> dict[str, float]:
        try:
            with open(self._overrides_path(), encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            return {}
        return {k: float(v) for k, v in data.items() if k in self.profile.slots}

    def _save_overrides(self) -> None:
        tmp = self._overrides_path() + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(self.utils, fh, sort_keys=True)
        os.replace(tmp, self._overrides_path())

    def p2p_disabled(self) -> bool:
        return read_env(paths.env_file()).get("NCCL_P2P_DISABLE") == "1"

    def command_for(self, name: str) -> SlotCommand:
        slots = dict(self.profile.slots)
        slots[name] = slots[name].model_copy(update={"gpu_util": self.utils[name]})
        prof = self.profile.model_copy(update={"slots": slots})
        model_path = None
        if self.models_root:
            cand = os.path.join(self.models_root, prof.slots[name].hf_repo_id)
            if os.path.isdir(cand):
                model_path = cand
        return slot_command(prof, name, p2p_disabled=self.p2p_disabled(), vllm=self.vllm,
                            sglang=self.sglang,
                            model_path=model_path)

    # -- slot lifecycle ------------------------------------------------------------
    async def _bring_up(self, name: str) -> bool:
        proc = self.procs[name]
        env = {k: v for k, v in read_env(paths.env_file()).items()}
        await proc.start(self.command_for(name), env)
        ok = await proc.wait_healthy(self.profile.slots[name].startup_timeout_s,
                                     self.health_poll_s)
        if not ok:
            tail = proc.tail(3)
            await proc.stop()
            proc.state.state = "failed"
            proc.state.detail = (tail[-1] if tail else "did not become healthy")[:300]
        return ok

    async def _supervise(self, name: str, already_up: bool = False) -> None:
        proc = self.procs[name]
        attempt = 0
        up = already_up
        while not self._stop.is_set():
            if not up:
                up = await self._bring_up(name)
            if up:
                attempt = 0
                assert proc.proc is not None
                await proc.proc.wait()
                if self._stop.is_set():
                    return
                proc.state.state = "crashed"
                proc.state.last_exit = proc.proc.returncode
                await proc.stop()  # reap the rest of the group
                proc.state.state = "crashed"
            proc.state.restarts += 1
            delay = self.backoff_s[min(attempt, len(self.backoff_s) - 1)]
            attempt += 1
            up = False
            proc.state.state = "backoff"
            proc.state.detail = f"restart in {delay:g} s (attempt {attempt})"
            try:
                await asyncio.wait_for(self._stop.wait(), delay)
                return
            except asyncio.TimeoutError:
                pass

    def _start_supervising(self, name: str, already_up: bool = False) -> None:
        self.tasks[name] = asyncio.ensure_future(self._supervise(name, already_up))

    async def _pause(self, name: str) -> None:
        """Take a slot out of supervision and stop it (for rebalance or the memory guard)."""
        task = self.tasks.pop(name, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.procs[name].stop()

    # -- rebalance -----------------------------------------------------------------
    def validate_split(self, new: dict[str, float]) -> list[str]:
        problems = []
        unknown = [n for n in new if n not in self.profile.slots]
        if unknown:
            return [f"unknown slot {unknown[0]!r}"]
        slots = {}
        for name, slot in self.profile.slots.items():
            util = new.get(name, self.utils[name])
            if not 0 < util <= MAX_GPU_UTIL_PER_GPU:
                problems.append(f"{name}: gpu_util {util:g} outside (0, {MAX_GPU_UTIL_PER_GPU}]")
            if slot.min_gpu_util is not None and util < slot.min_gpu_util:
                problems.append(f"{name}: gpu_util {util:g} below its min_gpu_util "
                                f"{slot.min_gpu_util:g}")
            slots[name] = slot.model_copy(update={"gpu_util": util})
        raw = self.profile.model_dump()
        problems += [msg for _, msg in cross_checks(raw, slots)]
        return problems

    async def rebalance(self, act: Action, new: dict[str, float]) -> None:
        old = dict(self.utils)
        changes = {n: u for n, u in new.items() if abs(u - old[n]) > 1e-9}
        if not changes:
            act.finish("ok", changed={}, message="nothing to do: split already applied")
            return
        # Shrink first: the growing slot needs the memory the shrinking one frees.
        order = sorted(changes, key=lambda n: changes[n] - old[n])
        act.progress("plan", 0.0, "order: " + ", ".join(
            f"{n} {old[n]:g}→{changes[n]:g}" for n in order))
        done: list[str] = []
        for i, name in enumerate(order):
            act.progress(f"stop {name}", i / len(order), f"stopping {name}")
            await self._pause(name)
            self.utils[name] = changes[name]
            done.append(name)
            act.progress(f"start {name}", (i + 0.5) / len(order),
                         f"starting {name} at gpu_util {changes[name]:g}")
            watcher = asyncio.ensure_future(self._relay_progress(act, name))
            ok = await self._bring_up(name)
            watcher.cancel()
            if not ok:
                reason = self.procs[name].state.detail
                act.log(f"{name} failed to start at {changes[name]:g}: {reason}")
                await self._rollback(act, old, done)
                act.finish("rolled_back", failed_slot=name, reason=reason,
                           restored={n: old[n] for n in done})
                return
            self._start_supervising(name, already_up=True)
        self._save_overrides()
        act.finish("ok", changed=changes,
                   startup_s={n: self.procs[n].state.last_startup_s for n in order})

    async def _relay_progress(self, act: Action, name: str) -> None:
        last = None
        while True:
            st = self.procs[name].state
            cur = (st.step, round(st.fraction, 2))
            if cur != last:
                act.progress(f"start {name}", st.fraction, st.step)
                last = cur
            await asyncio.sleep(0.5)

    async def _rollback(self, act: Action, old: dict[str, float], done: list[str]) -> None:
        for name in done:
            act.progress(f"rollback {name}", None, f"restoring {name} to {old[name]:g}")
            await self._pause(name)
            self.utils[name] = old[name]
        for name in done:
            ok = await self._bring_up(name)
            act.log(f"rollback: {name} {'up' if ok else 'FAILED'} at {old[name]:g}")
            self._start_supervising(name, already_up=ok)

    async def restart_slot(self, act: Action, name: str) -> None:
        act.progress(f"stop {name}", 0.0)
        await self._pause(name)
        act.progress(f"start {name}", 0.5)
        ok = await self._bring_up(name)
        self._start_supervising(name, already_up=ok)
        if ok:
            act.finish("ok", slot=name, startup_s=self.procs[name].state.last_startup_s)
        else:
            act.finish("failed", slot=name, message=self.procs[name].state.detail)

    # -- watchdog ------------------------------------------------------------------
    async def _watchdog_loop(self) -> None:
        while not self._stop.is_set():
            try:
                await self.watchdog_tick()
            except Exception as exc:  # a tick's parts say their own failures; this is
                # anything past them, said the same way (never swallowed: issue 42)
                with contextlib.suppress(Exception):
                    self.tick_failures.tick(self.clock.now(), [("tick", exc)],
                                            self._log_tick)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), tick_wait_s(
                    self.watchdog_interval_s, clock.speed()))

    def _log_tick(self, record: dict[str, Any], tb: str) -> None:
        """A failed (or recovered) tick: the agent's log, with the traceback, and the
        audit log."""
        with contextlib.suppress(Exception):
            print(f"pod-agent: {record['op']}: {record.get('error') or ''}\n{tb}".rstrip(),
                  file=sys.stderr, flush=True)
        with contextlib.suppress(OSError):
            _audit(record)

    async def watchdog_tick(self, now: float | None = None) -> None:
        """The memory guard, then the stop policy (``stoppolicy``) on this tick's traffic;
        ``now`` is the agent's wall clock (tests pass their own, or a clock).

        Each part fails on its own (``tickfailures``): a memory guard or a traffic read
        that raises never keeps the stop policy from deciding, and a stop policy that
        raises still carries out the last good plan's stop (``_fallback_stop``)."""
        now = self.clock.now() if now is None else now
        mono = self.clock.monotonic()
        failures: list[tuple[str, BaseException]] = []
        try:
            avail = mem_available_gib()
            await self._memory_guard(avail, now)
            await self._memory_warning(avail)
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
        self.tick_failures.tick(now, failures, self._log_tick)

    async def _look_for_traffic(self, now: float, mono: float) -> bool:
        """Whether a request ran since the last tick (then the pod is not idle)."""
        loop = asyncio.get_running_loop()
        # traffic: each slot's own /metrics, in a thread (a hung slot must not hold the loop)
        ports = {n: p.port for n, p in self.procs.items()}
        # (the tick waits for it: ticks never overlap, however slow a loaded slot answers)
        reads = await loop.run_in_executor(None, _read_traffic, ports, TRAFFIC_TIMEOUT_S)
        # busy: a request in flight now, or one finished since the last tick. In-flight
        # alone flickers to 0 between two requests of a steady stream, and a grace
        # that ends in such a gap is no grace
        busy = any(traffic.active(self._traffic.get(n), r) for n, r in reads.items())
        # a slot loading for the first time is a pod starting, not a pod nobody uses (a
        # crash loop's restarts are not: restarts > 0)
        loading = any(p.state.state == "starting" and p.state.restarts == 0
                      for p in self.procs.values())
        if loading or busy:
            self.policy.touch(now, mono)
        self.busy = busy
        self._traffic = reads
        return busy

    async def _decide(self, now: float, mono: float, busy: bool,
                      failures: list[tuple[str, BaseException]]) -> None:
        wd = self.watchdog
        sched = self.profile.schedule
        pol = self.policy
        pol.armed = wd.armed
        ext = pol.extension
        if ext is not None and ext.until <= now and not stoppolicy.ends_with_stop(sched, ext):
            self._set_extension(None, "ended")  # its end stops nothing: the plan resumes
        d = self.decision = stoppolicy.decide(sched, pol, now, busy, mono)
        if d.announce:
            pol.note_warning(d, now, mono)
            with contextlib.suppress(OSError):
                self._save_state()  # sent once, a restart included
            try:
                await self._warn(d.next_reason or "stop", d.next_at or now, now)
            except Exception as exc:  # a warning that failed never holds back the stop
                failures.append(("warning", exc))
        if d.stop:
            if d.reason == "idle":  # a failed stop is retried after another idle period
                pol.touch(now, mono)
            await self._stop_pod(d.reason or "stop", "watchdog", now,
                                 {"idle_s": round(d.idle_s), "busy": busy})
        else:
            with contextlib.suppress(OSError):
                self._save_state()

    async def _fallback_stop(self, now: float, busy: bool) -> None:
        """The stop policy raised: the last good tick's plan (``self.decision``) and the
        schedule's own next stop still stop the pod, the earlier first — warned
        ``warn_before`` ahead if it was not yet, then at its time. An idle stop only
        while no request is seen (a busy pod is not idle, plan or not); the schedule's
        and an extension's whatever the traffic."""
        d = self.decision
        pol = self.policy
        if not self.watchdog.armed or d.stop:  # a plan carried out is no plan any more
            return
        plans: list[tuple[float, str, str]] = []
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
                    self._save_state()
                await self._warn(why, max(at, now + warn_s), now)
            return
        if now < max(at, sent.sent + (warn_s if sent.lead is None else sent.lead)):
            return
        reason = "extension ended" if why == "extension ends" else why
        self.decision = Decision(True, reason, now, reason, key=key)  # made once
        await self._stop_pod(reason, "watchdog", now, {"fallback": "the stop policy failed: "
                                                       "the last good plan's stop"})

    async def _stop_pod(self, reason: str, by: str, now: float,
                        extra: dict[str, Any] | None = None) -> tuple[bool, str]:
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
            self._set_extension(None, f"ended by the stop ({reason})")
        ok, what = await asyncio.get_running_loop().run_in_executor(
            None, stop_pod, os.environ.get("RUNPOD_POD_ID"))
        pol.last_stop = LastStop(reason, now, by, ok, what[:300], self.run_id)
        with contextlib.suppress(OSError):
            self._save_state()
        self.watchdog.last_result = (f"{stoppolicy.iso(now)}: {'stopped' if ok else 'FAILED'} "
                                     f"({reason}): {what}")
        with contextlib.suppress(OSError):
            _audit({"op": "watchdog-stop" if by == "watchdog" else "stop", "reason": reason,
                    "by": by, "ok": ok, "detail": what, **(extra or {})})
        return ok, what

    async def _memory_guard(self, avail: float | None, now: float) -> None:
        """Below the floor, stop the slot holding the most memory (one a tick). A slot
        the guard stopped starts again once MemAvailable, less what it held, is back at
        the floor (the floor lowered, or memory freed): never sooner, or it would be
        stopped again at the next tick."""
        wd = self.watchdog
        for name in [n for n in self._guard_stopped
                     if self.procs[n].running() or n in self.tasks]:
            del self._guard_stopped[name]  # started again by someone else (restart)
        if avail is None:
            return
        if avail < wd.mem_floor_gib:
            pids = {n: p.running_pid() for n, p in self.procs.items()}
            rss = {n: group_rss_kib(pid) for n, pid in pids.items() if pid is not None}
            if rss:
                biggest = max(rss, key=rss.__getitem__)
                await self._pause(biggest)
                held = rss[biggest] / 2**20
                self._guard_stopped[biggest] = held
                self.procs[biggest].state.detail = (
                    f"stopped by the memory guard (it held {held:.1f} GiB); it starts again "
                    f"once MemAvailable would stay at the floor ({wd.mem_floor_gib:g} GiB) "
                    "with it back")
                wd.last_mem_action = (f"{stoppolicy.iso(now)}: MemAvailable {avail:.1f} GiB "
                                      f"< {wd.mem_floor_gib:g}: stopped {biggest}")
                _audit({"op": "memory-guard", "slot": biggest, "mem_available_gib": avail,
                        "held_gib": round(held, 2)})
            return
        if self._guard_stopped and not self._stop.is_set():
            # the one that held least first: the likeliest to fit
            name = min(self._guard_stopped, key=self._guard_stopped.__getitem__)
            held = self._guard_stopped[name]
            if avail - held >= wd.mem_floor_gib:
                del self._guard_stopped[name]
                self.procs[name].state.detail = "started again by the memory guard"
                self._start_supervising(name)
                wd.last_mem_action = (
                    f"{stoppolicy.iso(now)}: MemAvailable {avail:.1f} GiB leaves "
                    f"{avail - held:.1f} GiB once {name} is back (floor "
                    f"{wd.mem_floor_gib:g}): restarted {name}")
                _audit({"op": "memory-guard-restart", "slot": name,
                        "mem_available_gib": avail, "held_gib": round(held, 2),
                        "floor_gib": wd.mem_floor_gib})

    async def _memory_warning(self, avail: float | None) -> None:
        """Before the memory guard stops a slot: MemAvailable within a quarter of the
        floor. Said once until memory recovers."""
        floor = self.watchdog.mem_floor_gib
        near = avail is not None and floor > 0 and floor <= avail < floor * 1.25
        if near and not self._mem_warned:
            self._mem_warned = True
            rss = {n: group_rss_kib(pid) for n, p in self.procs.items()
                   if (pid := p.running_pid()) is not None}
            biggest = max(rss, key=rss.__getitem__) if rss else "none"
            self.memory_warning = (
                f"MemAvailable {avail:.1f} GiB is near the memory guard's floor "
                f"({floor:g} GiB): below it the guard stops slot {biggest}. Free memory, "
                "or lower the floor (pod-agent watchdog mem-floor GIB).")
            await self._send_warning({
                "reason": "memory guard", "mem_available_gib": round(avail or 0, 1),
                "floor_gib": floor, "slot": biggest}, self.memory_warning)
        elif not near:
            self._mem_warned = False
            self.memory_warning = None

    async def _warn(self, reason: str, at: float, now: float) -> None:
        tz = _tz(self.profile)
        local = dt.datetime.fromtimestamp(at, tz).strftime("%H:%M %Z")
        mins = max(0, round((at - now) / 60))
        pod = os.environ.get("RUNPOD_POD_ID") or "this pod"
        await self._send_warning(
            {"reason": reason, "at": stoppolicy.iso(at, tz), "in_s": round(at - now)},
            f"pod {pod} ({self.profile.name}) stops at {local} (in {mins} min): {reason}. "
            "To keep it: press w in pod-console (extend +1h, +2h or until a time), or run "
            "`pod-agent watchdog extend +1h --reason WHY` on the pod.")

    async def _send_warning(self, record: dict[str, Any], text: str) -> None:
        self.watchdog.last_warning = {**record, "text": text, "t": self.clock.now()}
        with contextlib.suppress(OSError):
            _audit({"op": "stop-warning", **record, "text": text})
        url = os.environ.get("POD_AGENT_WEBHOOK_URL") or read_env(paths.env_file()).get(
            "POD_AGENT_WEBHOOK_URL")
        if url:
            ok, detail = await asyncio.get_running_loop().run_in_executor(
                None, post_webhook, url, text)
            with contextlib.suppress(OSError):
                _audit({"op": "webhook", "ok": ok, "detail": detail})

    def _set_extension(self, ext: stoppolicy.Extension | None, why: str | None) -> None:
        """Kept on disk and audited, or OSError (then not promised: the caller says so)."""
        old = self.policy.extension
        self.policy.extension = ext
        if ext is not None:
            self.policy.warned.clear()  # a new plan: its warnings are new
        self._save_state()
        if ext is not None:
            _audit({"op": "extend", **ext.to_json(_tz(self.profile))})
        elif old is not None and why:
            _audit({"op": "extension-" + why.split(" ", 1)[0], "why": why,
                    "until": stoppolicy.iso(old.until), "by": old.by})

    def watchdog_json(self, now: float) -> dict[str, Any]:
        sched = self.profile.schedule
        tz = _tz(self.profile)
        d = self.decision
        pol = self.policy
        ext = pol.extension
        base = self.watchdog.to_json(sched, dt.datetime.fromtimestamp(now, dt.timezone.utc))
        ext_json = None
        if ext is not None and ext.until > now:
            ext_json = {**ext.to_json(tz), "stops_at_end": stoppolicy.ends_with_stop(sched, ext),
                        "crosses_midnight": stoppolicy.crosses_midnight(sched, ext)}
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
            "extension": ext_json,
            "last_stop_day": pol.last_stop_day,
            "last_stop": None if pol.last_stop is None else pol.last_stop.to_json(tz),
            "last_stop_reason": None if pol.last_stop is None else pol.last_stop.reason,
            "state_version": stopstate.VERSION,
            "memory_warning": self.memory_warning,
            # ticks failing (issue 42): since when, how many, why; None while they go well
            "failing": self._failing_json(tz),
        }

    def _failing_json(self, tz: dt.tzinfo) -> dict[str, Any] | None:
        f = self.tick_failures.to_json()
        if f is None:
            return None
        return {**f, "since_iso": stoppolicy.iso(f["since"], tz),
                "last_at_iso": stoppolicy.iso(f["last_at"], tz)}

    async def _extend(self, req: dict[str, Any], send) -> None:
        """``{"until": "+1h" | "HH:MM" | "tomorrow HH:MM" | ISO, "by": NAME, "reason":
        TEXT, "replaces_next_stop": BOOL}``, or ``{"clear": true}``. Kept in the
        watchdog's record: a restart keeps it."""
        now = self.clock.now()
        if req.get("clear"):
            try:
                self._set_extension(None, "cleared")
            except OSError as exc:
                await send(event("error", message=f"extend --clear: cannot keep it on disk: "
                                                  f"{exc}"))
                return
            # the plan resumes: a stop already due is warned now and made END_GRACE_S
            # later (what the console's confirmation says), not a fresh warn_before
            mono = self.clock.monotonic()
            d = self.decision = stoppolicy.resume_plan(self.profile.schedule, self.policy,
                                                       now, self.busy, mono)
            if d.announce:
                self.policy.note_warning(d, now, mono)
                with contextlib.suppress(OSError):
                    self._save_state()
                with contextlib.suppress(Exception):  # said; the answer must still come
                    await self._warn(d.next_reason or "stop", d.next_at or now, now)
            tz = _tz(self.profile)
            await send(event("result", extension=None,
                             next_stop=stoppolicy.iso(d.next_at, tz),
                             next_stop_reason=d.next_reason,
                             stop_in_s=None if d.next_at is None else round(d.next_at - now),
                             warned=d.announce))
            return
        by = str(req.get("by") or "").strip()[:64] or "unknown"
        reason = str(req.get("reason") or "").strip()[:200]
        if not all(c.isprintable() for c in by + reason):
            await send(event("error", message="by and reason must be printable text"))
            return
        replaces = req.get("replaces_next_stop", False)
        if replaces is None:
            replaces = False
        if not isinstance(replaces, bool):
            await send(event("error", message="bad request: replaces_next_stop must be true "
                                              "or false"))
            return
        try:
            until = stoppolicy.extension_until(str(req.get("until") or ""),
                                               self.profile.schedule, now)
        except ValueError as exc:
            await send(event("error", message=f"extend: {exc}"))
            return
        ext = stoppolicy.make_extension(self.profile.schedule, self.policy, now, until, by,
                                        reason, replaces)
        try:
            self._set_extension(ext, None)
        except OSError as exc:  # not kept on disk, or not audited: not promised
            self.policy.extension = None
            with contextlib.suppress(OSError):  # nor left to come back after a restart
                self._save_state()
            await send(event("error", message=f"extend: cannot keep it on disk: {exc}"))
            return
        self.decision = stoppolicy.decide(self.profile.schedule, self.policy, now, False,
                                          self.clock.monotonic())
        tz = _tz(self.profile)
        await send(event("result", extension={
            **ext.to_json(tz), "stops_at_end": stoppolicy.ends_with_stop(self.profile.schedule,
                                                                         ext),
            "crosses_midnight": stoppolicy.crosses_midnight(self.profile.schedule, ext)},
            next_stop=stoppolicy.iso(self.decision.next_at, tz),
            next_stop_reason=self.decision.next_reason))

    async def _stopping(self, req: dict[str, Any], send) -> None:
        """``{"by": NAME, "reason": TEXT}``: someone else (the console's ``down``) is
        about to stop this pod. The extension ends now and the stop is recorded; the
        next start finds a record it can read, not an extension to act on."""
        now = self.clock.now()
        by = "".join(c for c in str(req.get("by") or "") if c.isprintable())[:64] or "unknown"
        reason = "".join(c for c in str(req.get("reason") or "")
                         if c.isprintable())[:80] or "down"
        old = self.policy.extension
        self.policy.last_stop = LastStop(reason, now, by, None, "stopped by the console",
                                         self.run_id)
        try:
            self._set_extension(None, f"ended by the stop ({reason})")
            _audit({"op": "stopping", "by": by, "reason": reason, "extension":
                    None if old is None else old.to_json(_tz(self.profile))})
        except OSError as exc:
            await send(event("error", message=f"stopping: cannot keep it on disk: {exc}"))
            return
        await send(event("result", ended=None if old is None else old.to_json(
            _tz(self.profile))))

    async def stop_now(self, act: Action, by: str = "stop-now") -> None:
        act.progress("stop pod", 0.1, "stopping slots")
        for name in list(self.procs):
            await self._pause(name)
        ok, what = await self._stop_pod("stop-now", by, self.clock.now())
        self.watchdog.last_result = f"stop-now: {'stopped' if ok else 'FAILED'}: {what}"
        act.finish("ok" if ok else "failed", message=what)

    # -- status --------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return {
            "supervisor": "running", "pid": os.getpid(), "started_at": self.started_at,
            "profile": self.profile.name, "profile_path": self.profile_path,
            "p2p_disabled": self.p2p_disabled(), "patches": self.patch_results,
            "slots": {n: {**p.state.to_json(), **p.phases_json(), "port": p.port,
                          "engine": getattr(self.profile.slots.get(n), "engine", "vllm"),
                          "gpu_util": self.utils[n]}
                      for n, p in self.procs.items()},
            "watchdog": self.watchdog_json(self.clock.now()),
            "mem_available_gib": mem_available_gib(),
            "actions": self.book.recent(),
            "gpus": self.gpu_status(),
            "heartbeat": self.heartbeat.state.to_json(),
        }

    def gpu_status(self) -> dict[str, Any]:
        return self.gpus.status(slot_pgids(
            {n: p.proc.pid if p.running() and p.proc else None
             for n, p in self.procs.items()}))

    # -- control socket ------------------------------------------------------------
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def send(ev: dict[str, Any]) -> None:
            writer.write((encode(ev) + "\n").encode())
            await writer.drain()

        try:
            line = await asyncio.wait_for(reader.readline(), 10)
            req = parse_request(line)  # every field a request's op reads, type-checked
            await self.dispatch(req, send)
        except (asyncio.TimeoutError, ValueError) as exc:
            with contextlib.suppress(Exception):
                await send(event("error", message=f"bad request: {exc}"))
        except (ConnectionError, BrokenPipeError):
            # The client went away; any action it started keeps running in the book.
            _audit({"op": "client-gone"})
        except Exception as exc:  # a bug answers and is recorded; it never kills the agent
            what = f"{type(exc).__name__}: {exc}"[:300]
            with contextlib.suppress(Exception):
                _audit({"op": "request-failed", "error": what})
            with contextlib.suppress(Exception):
                await send(event("error", message=f"the agent failed this request: {what}"))
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def dispatch(self, req: dict[str, Any], send) -> None:
        op = req.get("op")
        if op == "status":
            await send(event("result", **self.status()))
        elif op == "gpus":  # the exporter's feed: the GPUs and the stop plan alone
            await send(event("result", **self.gpu_status(),
                             watchdog=self.watchdog_json(self.clock.now())))
        elif op == "logs":
            slot = req.get("slot")
            if slot not in self.procs:
                await send(event("error", message=f"unknown slot {slot!r}"))
                return
            n = max(1, min(int(req.get("lines", 50)), 2000))
            await send(event("result", slot=slot, lines=self.procs[slot].tail(n)))
        elif op == "attach":
            await self._attach(str(req.get("action_id", "")), send)
        elif op in ("rebalance", "restart", "stop-now"):
            await self._run_action(op, req, send)
        elif op == "watchdog":
            cmd = req.get("cmd")
            if cmd == "extend":
                await self._extend(req, send)
            elif cmd == "stopping":
                await self._stopping(req, send)
            elif cmd in ("arm", "disarm"):
                self.watchdog.armed = self.policy.armed = cmd == "arm"
                with contextlib.suppress(OSError):
                    self._save_state()  # a restart keeps it (this run of the pod)
                _audit({"op": "watchdog", "cmd": cmd})
                await send(event("result", armed=self.watchdog.armed))
            elif cmd == "mem-floor":
                try:
                    value = req.get("value")
                    floor = float(value) if isinstance(value, (int, float, str)) else math.nan
                except (TypeError, ValueError):
                    floor = math.nan
                # nan would switch the guard off silently; a floor above the host's whole
                # memory (1e308) can never be met and stops every slot at once
                top = min(MEM_FLOOR_MAX_GIB, mem_total_gib() or MEM_FLOOR_MAX_GIB)
                if not (math.isfinite(floor) and 0 <= floor <= top):
                    await send(event("error", message=f"mem-floor needs a number of GiB "
                                     f"from 0 to {top:.1f} (this host's memory), got "
                                     f"{str(req.get('value'))[:40]!r}"))
                    return
                problem = mem_floor_problem(floor, mem_available_gib())
                if problem:  # the guard would stop slot after slot at its next ticks
                    await send(event("error", message=problem))
                    return
                self.watchdog.mem_floor_gib = floor
                _audit({"op": "watchdog", "cmd": cmd, "value": floor})
                waiting = sorted(self._guard_stopped)
                await send(event("result", mem_floor_gib=floor, guard_stopped=waiting,
                                 message=(f"{', '.join(waiting)} (stopped by the memory "
                                          "guard) start again once the floor allows"
                                          if waiting else "")))
            else:
                await send(event("error", message=f"unknown watchdog command {cmd!r}"))
        elif op == "shutdown":
            _audit({"op": "shutdown"})
            await send(event("result", message="shutting down"))
            self._stop.set()
        else:
            await send(event("error", message=f"unknown op {op!r}"))

    async def _attach(self, action_id: str, send) -> None:
        if not valid_action_id(action_id):
            await send(event("error", message=f"bad action id {action_id[:80]!r}: letters, "
                                              "digits and _.- only"))
            return
        act = self.book.get(action_id)
        if act is not None:
            await act.follow(send)
            return
        recorded = read_recorded(action_id)
        if not recorded:
            await send(event("error", message=f"no action {action_id!r}"))
            return
        for ev in recorded:
            await send(ev)
        if recorded[-1].get("kind") not in ("result", "error"):
            await send(event("error", message="the action was interrupted by an agent restart"))

    async def _run_action(self, op: str, req: dict[str, Any], send) -> None:
        action_id = str(req.get("action_id") or f"{op}-{int(time.time() * 1000)}")
        if not valid_action_id(action_id):
            await send(event("error", message=f"bad action id {action_id[:80]!r}: letters, "
                                              "digits and _.- only"))
            return
        existing = self.book.get(action_id)
        if existing is not None:  # idempotent retry after a dropped connection
            await existing.follow(send)
            return
        args = {k: v for k, v in req.items() if k not in ("op", "action_id")}
        if op == "rebalance":
            new = {str(k): float(v) for k, v in (req.get("set") or {}).items()}
            problems = self.validate_split(new)
            if problems:
                _audit({"op": op, "action": action_id, "args": args, "result": "rejected",
                        "problems": problems})
                await send(event("error", message="; ".join(problems), problems=problems))
                return
        elif op == "restart" and req.get("slot") not in self.procs:
            await send(event("error", message=f"unknown slot {req.get('slot')!r}"))
            return
        if self.book.lock.locked():
            await send(event("error", message="another action is running; try again later"))
            return
        act = self.book.new(action_id, op, args)
        _audit({"op": op, "action": action_id, "args": args, "result": "started"})
        task = asyncio.ensure_future(self._action_body(op, act, req))
        self._bg.add(task)  # keep a strong reference: the client may leave before it ends
        task.add_done_callback(self._bg.discard)
        await act.follow(send)

    async def _action_body(self, op: str, act: Action, req: dict[str, Any]) -> None:
        async with self.book.lock:
            try:
                if op == "rebalance":
                    await self.rebalance(act, {str(k): float(v)
                                               for k, v in (req.get("set") or {}).items()})
                elif op == "restart":
                    await self.restart_slot(act, str(req["slot"]))
                elif op == "stop-now":
                    by = "".join(c for c in str(req.get("by") or "") if c.isprintable())
                    await self.stop_now(act, by[:64] or "stop-now")
            except Exception as exc:  # an action must always end with a record
                if not act.done:
                    act.finish("failed", message=f"{type(exc).__name__}: {exc}")
            _audit({"op": op, "action": act.id, "result": act.state})

    # -- main ----------------------------------------------------------------------
    async def run(self) -> None:
        sock = paths.socket_path()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sock)
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self.handle, path=sock)
        finally:
            os.umask(old_umask)
        _audit({"op": "serve", "profile": self.profile_path, "pid": os.getpid()})
        if self.apply_patches and self.profile.patches:
            self._apply_patches()
        for name in self.procs:
            self._start_supervising(name)
        wd = asyncio.ensure_future(self._watchdog_loop())
        hb = asyncio.ensure_future(self.heartbeat.run(self._stop))
        self.gpus.start()
        exporter = await self._start_exporter()
        try:
            await self._stop.wait()
        finally:
            wd.cancel()
            hb.cancel()
            self.gpus.stop()
            if exporter is not None and exporter.returncode is None:
                exporter.terminate()
                try:
                    await asyncio.wait_for(exporter.wait(), 10)
                except asyncio.TimeoutError:
                    exporter.kill()
            for name in list(self.procs):
                await self._pause(name)
            self._server.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(sock)

    async def _start_exporter(self) -> asyncio.subprocess.Process | None:
        """``pod-agent exporter`` on the profile's ``gpu_metrics_port``: its own process
        (metrics only; this supervisor keeps no port), with the token in
        ``$POD_AGENT_HOME/exporter.token`` when that file exists."""
        port = self.profile.gpu_metrics_port
        if port is None:
            return None
        # all interfaces: Prometheus reaches it through the pod's exposed port
        host = os.environ.get("POD_AGENT_EXPORTER_HOST", "0.0.0.0")
        argv = [sys.executable, "-m", "pod_agent", "exporter", "--listen", f"{host}:{port}",
                "--from-agent", "--interval", str(EXPORTER_SAMPLE_S)]
        token = paths.path("exporter.token")
        if os.path.exists(token):
            argv += ["--token-file", token]
        log = open(paths.path("exporter.log"), "ab")  # noqa: SIM115 - the child's
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdout=log, stderr=asyncio.subprocess.STDOUT,
                stdin=asyncio.subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()
        _audit({"op": "exporter", "port": port, "pid": proc.pid,
                "token": os.path.exists(token)})
        return proc

    def _apply_patches(self) -> None:
        root = os.environ.get("POD_AGENT_PATCH_ROOT") or vllm_site_root(self.vllm)
        pdir = os.path.join(os.path.dirname(self.profile_path), "patches")
        for name in self.profile.patches:
            if root is None:
                res = {"name": name, "state": "failed", "detail": "vLLM package not found"}
            else:
                r = apply_patch(os.path.join(pdir, name), root)
                res = {"name": r.name, "state": r.state, "detail": r.detail}
            self.patch_results.append(res)
            _audit({"op": "patch", **res})

    def request_stop(self) -> None:
        self._stop.set()


def _read_traffic(ports: dict[str, int], timeout_s: float
                  ) -> dict[str, traffic.SlotTraffic | None]:
    return {name: traffic.read(port, timeout_s) for name, port in ports.items()}


def _tz(profile: Profile):
    from zoneinfo import ZoneInfo

    return ZoneInfo(profile.schedule.timezone)
