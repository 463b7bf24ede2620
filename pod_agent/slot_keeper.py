"""The slots under supervision: each started, watched and restarted with backoff after a
crash; paused and started again by a rebalance (shrinking first, rolled back when a slot
fails to come up), a restart or the memory guard."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import Any, Dict, List, Tuple

from . import paths
from .actions import Action
from .engines import ENGINES
from .envfile import read_env
from .launch import SlotCommand, slot_command
from .profile import MAX_GPU_UTIL_PER_GPU, Profile, cross_checks
from .slots import SlotProcess

BACKOFF_S = (5.0, 10.0, 30.0, 60.0, 120.0)
"""Restart delays after a crash; the last repeats. A crash loop must not spin the host."""


class SlotKeeper:
    """Every slot's process, its supervising task and its gpu_util (the profile's, or a
    rebalance's kept in ``gpu_util_overrides.json``)."""

    def __init__(self, profile: Profile, stopping: asyncio.Event, *, vllm: str = "vllm",
                 models_root: str | None = None, backoff_s: Tuple[float, ...] = BACKOFF_S,
                 grace_s: float = 20.0, health_poll_s: float = 1.0) -> None:
        self.profile = profile
        self.stopping = stopping
        """Set when the agent stops: no slot is started or restarted any more."""
        self.vllm = vllm
        self.sglang = os.environ.get("POD_AGENT_SGLANG_PYTHON", "python3")
        """The Python whose ``-m sglang.launch_server`` an SGLang slot runs."""
        self.models_root = models_root
        self.backoff_s = backoff_s
        self.health_poll_s = health_poll_s
        self.utils: Dict[str, float] = {n: s.gpu_util for n, s in profile.slots.items()}
        self.utils.update(self._load_overrides())
        self.procs = {n: SlotProcess(n, s.port, paths.slot_log(n), grace_s,
                                     engine=ENGINES[s.engine])
                      for n, s in profile.slots.items()}
        self.tasks: Dict[str, asyncio.Task[Any]] = {}

    # -- configuration -------------------------------------------------------------
    def _overrides_path(self) -> str:
        return paths.path("gpu_util_overrides.json")

    def _load_overrides(self) -> Dict[str, float]:
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
                            sglang=self.sglang, model_path=model_path)

    # -- lifecycle -----------------------------------------------------------------
    async def bring_up(self, name: str) -> bool:
        proc = self.procs[name]
        env = dict(read_env(paths.env_file()))
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
        while not self.stopping.is_set():
            if not up:
                up = await self.bring_up(name)
            if up:
                attempt = 0
                assert proc.proc is not None
                await proc.proc.wait()
                if self.stopping.is_set():
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
                await asyncio.wait_for(self.stopping.wait(), delay)
                return
            except asyncio.TimeoutError:
                pass

    def start_supervising(self, name: str, already_up: bool = False) -> None:
        self.tasks[name] = asyncio.ensure_future(self._supervise(name, already_up))

    async def pause(self, name: str) -> None:
        """Take a slot out of supervision and stop it (rebalance, stop, memory guard)."""
        task = self.tasks.pop(name, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.procs[name].stop()

    async def pause_all(self) -> None:
        for name in list(self.procs):
            await self.pause(name)

    # -- rebalance and restart -----------------------------------------------------
    def validate_split(self, new: Dict[str, float]) -> List[str]:
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

    async def rebalance(self, act: Action, new: Dict[str, float]) -> None:
        old = dict(self.utils)
        changes = {n: u for n, u in new.items() if abs(u - old[n]) > 1e-9}
        if not changes:
            act.finish("ok", changed={}, message="nothing to do: split already applied")
            return
        # Shrink first: the growing slot needs the memory the shrinking one frees.
        order = sorted(changes, key=lambda n: changes[n] - old[n])
        act.progress("plan", 0.0, "order: " + ", ".join(
            f"{n} {old[n]:g}→{changes[n]:g}" for n in order))
        done: List[str] = []
        for i, name in enumerate(order):
            act.progress(f"stop {name}", i / len(order), f"stopping {name}")
            await self.pause(name)
            self.utils[name] = changes[name]
            done.append(name)
            act.progress(f"start {name}", (i + 0.5) / len(order),
                         f"starting {name} at gpu_util {changes[name]:g}")
            watcher = asyncio.ensure_future(self._relay_progress(act, name))
            ok = await self.bring_up(name)
            watcher.cancel()
            if not ok:
                reason = self.procs[name].state.detail
                act.log(f"{name} failed to start at {changes[name]:g}: {reason}")
                await self._rollback(act, old, done)
                act.finish("rolled_back", failed_slot=name, reason=reason,
                           restored={n: old[n] for n in done})
                return
            self.start_supervising(name, already_up=True)
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

    async def _rollback(self, act: Action, old: Dict[str, float], done: List[str]) -> None:
        for name in done:
            act.progress(f"rollback {name}", None, f"restoring {name} to {old[name]:g}")
            await self.pause(name)
            self.utils[name] = old[name]
        for name in done:
            ok = await self.bring_up(name)
            act.log(f"rollback: {name} {'up' if ok else 'FAILED'} at {old[name]:g}")
            self.start_supervising(name, already_up=ok)

    async def restart(self, act: Action, name: str) -> None:
        act.progress(f"stop {name}", 0.0)
        await self.pause(name)
        act.progress(f"start {name}", 0.5)
        ok = await self.bring_up(name)
        self.start_supervising(name, already_up=ok)
        if ok:
            act.finish("ok", slot=name, startup_s=self.procs[name].state.last_startup_s)
        else:
            act.finish("failed", slot=name, message=self.procs[name].state.detail)
