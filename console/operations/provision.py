"""Resume and fallback provisioning on a GPU cloud, with no pod left behind.

It knows the cloud only through the ``Provider`` protocol (``provider/base.py``);
RunPod is one implementation (``provider/runpod.py``).

Loops (SkyPilot-style): rounds × profiles in order × each profile's GPU types.
Capacity → next candidate; all sold out → wait and go round again; fatal API
error, or an API that answers nothing at all for a whole round → stop at once.
Once a pod exists, *every* way out — an exception, a cancellation (Escape is
not one: it only hides the dialog), SIGTERM/SIGHUP/SIGINT turned into a
cancellation by the CLI — terminates it (a resumed pod is stopped instead),
and that cleanup cannot itself be cancelled half-way. If terminating fails,
the error says so loudly with the pod id and its $/h. At most one create is
ever outstanding with an unknown outcome: when a create's answer is lost and
the pod cannot be looked up, provisioning stops instead of creating another.
Every request that can make a pod bill is in the ledger (``operations/ledger.py``)
before it is sent, so even ``kill -9`` leaves the pod named on disk. While a create's
outcome is unknown (its name in the ledger, never found), no other create is sent, in
this run or a later one. A pod is adopted only once ``current_pod.json`` names it and the
ledger says ``kept``; when either cannot be written it is not adopted but terminated
(a resumed one stopped), and the run fails saying so. A sweep never terminates a pod that
some context calls its current pod. After an interruption, the cleanup is bounded
(``cleanup_s``) so that a service manager's stop timeout is not reached first.
After a create: wait for real SSH (v2 says RUNNING before ports exist), upload
and check the host with the agent (driver CUDA below ``min_cuda`` → terminate
and try another host, up to 5 times), start the supervisor, wait for every
slot, then re-render the laptop side for the new address and reload Prometheus.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import math
import secrets
import shlex
import tarfile
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
from msgspec import Struct

from console.config import config_file
from console.config.render import PodAddress, render_all, write_all
from console.model import fmt
from console.operations.ledger import AuditError, Busy, Ledger, exclusive
from console.operations.registry import Outcome, Progress
from console.sources.agent_client import AgentClient
from console.sources.provider.base import (
    CapacityError,
    ConflictError,
    FatalError,
    Machine,
    MachineSpec,
    NotFoundError,
    Provider,
    ProviderError,
    TransientError,
    UnknownOutcomeError,
)
from console.sources.remote import AgentError, agent_command, report_from
from pod_agent.profiles import LoadedProfile
from pod_agent.requests import StatusRequest

EXIT_OK, EXIT_NO_CAPACITY, EXIT_FATAL, EXIT_HOST_CHECKS, EXIT_UNHEALTHY = 0, 2, 3, 4, 5
EXIT_INTERRUPTED = 6
"""Interrupted (signal, Escape-and-quit); everything it had created is terminated."""
EXIT_LEAKED = 7
"""A pod may still be billing: named, with its $/h, on stderr and in the ledger."""
GONE = ("TERMINATED", "EXITED")
T = Any


async def uncancellable(coro: Coroutine[Any, Any, T]) -> T:
    """Run cleanup to its end even if the caller is cancelled meanwhile (a DELETE cut
    half-way leaves a pod billing); the cancellation is re-raised once it is done."""
    task = asyncio.ensure_future(coro)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
            break
        except asyncio.CancelledError:
            if task.done():
                if task.cancelled():
                    raise
                result = task.result()
                break
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError()
    return result
PKG_ROOT = Path(__file__).resolve().parents[2]
"""Where ``pod_agent`` sits beside ``console`` (the agent is uploaded from there)."""


class ProvisionConfig(Struct):
    rounds: int = 12
    round_wait_s: float = 600.0
    cuda_attempts: int = 5
    ssh_wait_s: float = 600.0
    health_wait_s: float = 1800.0
    poll_s: float = 5.0
    pod_name: str = "pod-console"
    agent_dir: str = "/workspace/pod-agent"
    python: str = "python3"
    render_dir: Path | None = None
    prometheus_url: str | None = None
    ports: tuple[int, ...] = ()
    ledger: Path | None = None
    """``STATE_DIR/pods.jsonl``; None keeps no ledger (tests of the pieces). Its directory
    is the state directory: the lock (``up.lock``) and ``current_pod.json`` sit beside it."""
    cleanup_s: float = 45.0
    """After an interruption (SIGTERM, SIGHUP, SIGINT, a cancelled task), all cleanup —
    looking a lost create up, terminating, stopping — ends within this long: under
    systemd's default 90 s stop timeout, with room for the rest of the exit. What it could
    not settle stays in the ledger and the run says a pod may still be billing."""
    in_use: Callable[[], set[str]] | None = None
    """Pods some context calls its own (its configured pod, its ``current_pod.json``):
    a sweep never terminates one of them, whatever the ledger says."""

    def __post_init__(self) -> None:
        for name in ("rounds", "cuda_attempts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        for name in ("round_wait_s", "ssh_wait_s", "health_wait_s", "poll_s", "cleanup_s"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number of seconds, not {v}")

    @property
    def state_dir(self) -> Path | None:
        return self.ledger.parent if self.ledger is not None else None


class ProvisionFailed(Exception):
    def __init__(self, code: int, message: str, leaked: Machine | None = None,
                 leaked_name: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.leaked = leaked
        self.leaked_name = leaked_name


class HostRejected(Exception):
    pass


class ProvisionResult(Struct, frozen=True):
    pod: Machine
    profile: LoadedProfile
    address: PodAddress
    attempts: list[dict[str, Any]]


def agent_tarball(profile: LoadedProfile) -> bytes:
    """pod_agent + the profile (and its patches): what the pod needs to run the agent."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        agent = PKG_ROOT / "pod_agent"
        # its subpackages too (pod_agent/engines): a module left out is an ImportError
        # on the pod, where nobody sees it but "check-host gave no report"
        for p in sorted(agent.rglob("*.py")):
            if "__pycache__" not in p.parts:
                tar.add(p, arcname=f"pod_agent/{p.relative_to(agent).as_posix()}")
        tar.add(profile.path, arcname=f"profiles/{profile.path.name}")
        pdir = profile.path.parent / "patches"
        for name in profile.profile.patches:
            if (pdir / name).exists():
                tar.add(pdir / name, arcname=f"profiles/patches/{name}")
    return buf.getvalue()


class Provisioner:
    def __init__(self, client: Provider, profiles: list[LoadedProfile],
                 transport_factory: Callable[[Machine, str], Any], cfg: ProvisionConfig, *,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 log: Callable[[str], None] = print,
                 pod_id: str | None = None,
                 on_ready: Callable[[ProvisionResult], Awaitable[None]] | None = None) -> None:
        self.client = client
        self.profiles = profiles
        self.transport_factory = transport_factory
        self.cfg = cfg
        self.sleep = sleep
        self.log = log
        self.pod_id = pod_id
        self.on_ready = on_ready
        self.progress: Progress = lambda *a: None
        self.agent_dir = cfg.agent_dir
        self.ledger = Ledger(cfg.ledger) if cfg.ledger is not None else None
        self._deadline: float | None = None
        """Monotonic time by which an interrupted run's cleanup must be done."""

    def for_pod(self, pod: Machine) -> None:
        """``{pod}`` in agent_dir becomes the pod id (the demo keeps one dir per pod)."""
        self.agent_dir = self.cfg.agent_dir.replace("{pod}", pod.id)

    def agent_cmd(self) -> str:
        return agent_command(self.agent_dir, self.cfg.python)

    def remote_profile(self, lp: LoadedProfile) -> str:
        return f"{self.agent_dir}/pkg/profiles/{lp.path.name}"

    def _say(self, step: str, message: str, fraction: float | None = None) -> None:
        # Reporting must never change what happens: a closed dialog, a broken pipe on
        # stdout or a bug in a callback cannot be allowed to skip a DELETE.
        for fn, arg in ((self.log, (f"{step}: {message}",)), (self.progress,
                                                               (step, fraction, message))):
            with contextlib.suppress(Exception):
                fn(*arg)

    def _record(self, event: str, **fields: Any) -> None:
        """Ledger first: raises AuditError, and then the request is not sent."""
        if self.ledger is not None:
            self.ledger.record(event, **fields)

    def _settle(self, event: str, **fields: Any) -> None:
        """Settling a ledger entry may fail (full disk): the pod's state is what counts,
        and the next sweep finds an unsettled entry already handled."""
        try:
            self._record(event, **fields)
        except AuditError as exc:
            self._say("ledger", f"could not record {event} ({exc})")

    def _interrupted(self) -> None:
        """Cleanup after an interruption starts now: it has ``cleanup_s`` in all."""
        if self._deadline is None:
            self._deadline = time.monotonic() + self.cfg.cleanup_s

    async def _cleanup_call(self, coro: Coroutine[Any, Any, T]) -> T:
        """A call that settles a pod: it survives a cancellation and, once the run was
        interrupted, ends by the cleanup deadline (a hung API cannot hold the exit)."""
        if self._deadline is None:
            return await uncancellable(coro)
        left = max(0.1, self._deadline - time.monotonic())
        try:
            return await uncancellable(asyncio.wait_for(coro, left))
        except TimeoutError:
            raise TransientError(f"no answer within the {self.cfg.cleanup_s:g} s an "
                                 "interrupted run has to clean up") from None

    # -- the pieces ----------------------------------------------------------------
    async def terminate(self, pod: Machine, why: str) -> None:
        """DELETE first, then talk about it; the DELETE survives a cancellation."""
        try:
            await self._cleanup_call(self.client.terminate(pod.id))
        except ProviderError as exc:
            cost = f"${pod.cost:.2f}/h" if pod.cost else "unknown $/h"
            self._say("terminate", f"FAILED for {pod.id}: {exc.message}")
            raise ProvisionFailed(
                EXIT_LEAKED, f"TERMINATE FAILED for pod {pod.id} ({cost}) after {why}: "
                f"{exc.message} — it may still be billing; terminate it by hand "
                "(or run pod-console down, which retries it)", pod) from None
        self._settle("terminated", pod=pod.id, name=pod.name, why=why)
        self._say("terminate", f"terminated {pod.id} ({why})")

    async def stop_resumed(self, pod_id: str, why: str) -> str | None:
        """Stop a pod we started (its volume is ours to keep); an error text if it failed."""
        try:
            await self._cleanup_call(self.client.stop(pod_id))
        except ConflictError:
            # not running (it never started): nothing bills
            pass
        except NotFoundError:
            pass
        except ProviderError as exc:
            self._say("stop", f"FAILED to stop {pod_id}: {exc.message}")
            return exc.message
        self._settle("stopped", pod=pod_id, why=why)
        self._say("stop", f"stopped {pod_id} ({why})")
        return None

    async def _terminate_by_name(self, name: str, why: str) -> None:
        try:
            pods = [p for p in await self._cleanup_call(self.client.find_by_name(name))
                    if p.status != "TERMINATED"]
        except ProviderError as exc:
            self._say("terminate", f"COULD NOT LOOK UP {name} ({exc.message}): the ledger "
                      "keeps it for the next pod-console up/down")
            return
        for pod in pods:
            with contextlib.suppress(ProvisionFailed):  # said loudly by terminate
                await self.terminate(pod, why)
        if not pods:
            self._settle("terminated", name=name, why="not created")

    def in_use(self) -> set[str]:
        """Pods no sweep may terminate: the one this run follows, the state directory's
        ``current_pod.json``, and whatever ``cfg.in_use`` adds (every context's)."""
        ids = {self.pod_id}
        if self.cfg.state_dir is not None:
            ids.add(config_file.read_current_pod(self.cfg.state_dir).get("machine_id"))
        if self.cfg.in_use is not None:
            try:
                ids |= self.cfg.in_use()
            except Exception as exc:  # a config that no longer loads: say it, go on
                self._say("leftovers", f"could not read every context's pod ({exc})")
        return {i for i in ids if i}

    async def sweep(self) -> list[str]:
        """Settle what an earlier, interrupted run left in the ledger: terminate pods it
        created, stop pods it resumed. Returns one line per pod handled (or not).

        Run under the lock (:func:`~console.operations.ledger.exclusive`): no other run
        can have a bring-up in progress, so an open entry is a leftover — unless its pod
        is some context's current pod, which is kept (and the entry settled as kept)."""
        if self.ledger is None:
            return []
        out = []
        for b in self.ledger.bad_lines():
            out.append(f"ledger {self.ledger.path} line {b.number} skipped ({b.why}): "
                       f"{b.text!r}")
            self._settle("skipped", line=b.number, why=b.why)
        keep = await asyncio.to_thread(self.in_use)  # reads every context's files
        for e in self.ledger.open_entries():
            try:
                if e.kind == "resume" and e.pod_id:
                    err = await self.stop_resumed(e.pod_id, "left over by an interrupted run")
                    out.append(f"stopped {e.pod_id} (resumed by an interrupted run)"
                               if err is None else f"COULD NOT STOP {e.pod_id}: {err}")
                    continue
                pods = ([await self.client.get(e.pod_id)] if e.pod_id
                        else await self.client.find_by_name(e.name or ""))
            except NotFoundError:
                self._settle("terminated", pod=e.pod_id, name=e.name, why="already gone")
                out.append(f"{e.pod_id or e.name}: already gone")
                continue
            except ProviderError as exc:
                what = (f"pod {e.pod_id}" if e.pod_id else
                        f"{e.name}, a create whose outcome is unknown")
                out.append(f"COULD NOT CHECK {what} (created by an interrupted "
                           f"run): {exc.message}")
                continue
            live = [p for p in pods if p.status != "TERMINATED"]
            for pod in live:
                if pod.id in keep:
                    # adopted, though the ledger never heard: terminating it would take a
                    # deployment (and its volume) away from under its context
                    self._settle("kept", pod=pod.id, name=e.name,
                                 why="the current pod of a context")
                    out.append(f"kept {pod.id} ({pod.name}): it is the current pod of a "
                               "context, not a leftover")
                    continue
                try:
                    await self.terminate(pod, "left over by an interrupted run")
                    out.append(f"terminated {pod.id} ({pod.name}, left over by an "
                               "interrupted run)")
                except ProvisionFailed as exc:
                    out.append(exc.message)
            if not live:
                self._settle("terminated", pod=e.pod_id, name=e.name, why="none found")
                out.append(f"{e.pod_id or e.name}: nothing billing")
        return out

    def unknown_creates(self) -> list[str]:
        """Names of creates whose outcome is still unknown (never found, never settled)."""
        if self.ledger is None:
            return []
        return [e.name for e in self.ledger.open_entries()
                if e.kind == "create" and not e.pod_id and e.name]

    def left_billing(self) -> list[str]:
        """What the ledger still holds open: pods that may be billing, as words."""
        if self.ledger is None:
            return []
        return [e.describe() for e in self.ledger.open_entries()]

    async def wait_ssh(self, pod: Machine) -> tuple[Machine, Any]:
        deadline = time.monotonic() + self.cfg.ssh_wait_s
        last = "no SSH endpoint yet"
        while time.monotonic() < deadline:
            try:
                pod = await self.client.get(pod.id)
            except NotFoundError:
                raise RuntimeError(f"pod {pod.id} is gone (the provider answers 404)") from None
            except ProviderError as exc:
                last = exc.message
                self._say("wait ssh", f"{pod.id}: {last}")
                await self.sleep(self.cfg.poll_s)
                continue
            if pod.status in GONE:
                raise RuntimeError(f"pod {pod.id} is {pod.status} while waiting for SSH")
            if pod.status == "RUNNING" and pod.ssh_endpoint:
                t = self.transport_factory(pod, self.agent_cmd())
                try:
                    await t.run_raw("true", timeout_s=30)
                    return pod, t
                except AgentError as exc:
                    last = str(exc)
                    t.close()
            self._say("wait ssh", f"{pod.id} {pod.status}: {last}")
            await self.sleep(self.cfg.poll_s)
        raise TimeoutError(f"SSH not reachable after {self.cfg.ssh_wait_s:g} s: {last}")

    async def upload_agent(self, t: Any, lp: LoadedProfile) -> None:
        with tempfile.NamedTemporaryFile(suffix=".tgz", delete=False) as fh:
            fh.write(agent_tarball(lp))
            local = Path(fh.name)
        try:
            # a name of its own: two uploads in the same second (two consoles, or pods
            # sharing a host's /tmp) must not unpack or delete each other's tarball
            remote = f"/tmp/pod-agent-{uuid.uuid4().hex}.tgz"
            await t.put_file(local, remote)
        finally:
            local.unlink(missing_ok=True)
        d = shlex.quote(self.agent_dir + "/pkg")
        res = await t.run_raw(f"mkdir -p {d} && tar -xzf {remote} -C {d} && rm -f {remote}",
                              timeout_s=120)
        if res.exit_status not in (0, None):
            raise RuntimeError(f"agent upload failed (exit {res.exit_status})")

    async def check_host(self, t: Any, lp: LoadedProfile) -> dict[str, Any]:
        res = await AgentClient(t, self.remote_profile(lp)).check_host(
            timeout_s=300, agent_cmd=self.agent_cmd())
        report = report_from(res)
        if report is None:
            raise RuntimeError(f"check-host gave no report (exit {res.exit_status})")
        checks = {c["name"]: c for c in report.get("checks", [])}
        cuda = checks.get("driver_cuda", {})
        if cuda.get("ok") is False:
            raise HostRejected(cuda.get("detail", "driver CUDA too old"))
        gpus = checks.get("gpus", {})
        if gpus.get("ok") is False:
            raise HostRejected(gpus.get("detail", "GPU check failed"))
        p2p = checks.get("p2p", {})
        if (p2p.get("value") or {}).get("fallback_proven") is False:
            raise HostRejected(f"P2P failed and the P2P-disabled fallback failed too: "
                               f"{p2p.get('detail', '')}")
        self._say("host checks", f"driver CUDA {cuda.get('value')}; P2P "
                  f"{(p2p.get('value') or {}).get('verdict', 'skipped')}")
        return report

    async def bootstrap(self, t: Any, lp: LoadedProfile) -> None:
        await AgentClient(t, self.remote_profile(lp)).serve_detached(
            self.agent_cmd(), self.agent_dir + "/serve.log")

    async def wait_slots(self, t: Any, lp: LoadedProfile) -> None:
        deadline = time.monotonic() + self.cfg.health_wait_s
        last = ""
        while time.monotonic() < deadline:
            try:
                res = await AgentClient(t).request(StatusRequest())
            except AgentError as exc:
                last = str(exc)
                await self.sleep(self.cfg.poll_s)
                continue
            final = res.final or {}
            if final.get("supervisor") == "not running":
                # started a moment ago (``bootstrap``: setsid nohup … &) and not yet
                # listening: its socket comes once it has loaded the profile. Said as
                # what it is, not as the client's "not running (No such file …)".
                msg = "waiting for the slot supervisor to start"
                if msg != last:
                    self._say("slots", msg)
                    last = msg
                await self.sleep(self.cfg.poll_s)
                continue
            slots = final.get("slots") or {}
            if slots and all(s.get("state") == "ready" for s in slots.values()):
                return
            parts = [f"{n} {s.get('state')} {s.get('step', '')}".strip()
                     for n, s in sorted(slots.items())]
            fracs = [float(s.get("fraction") or 0) for s in slots.values()]
            frac = sum(fracs) / len(fracs) if fracs else None
            msg = "; ".join(parts) or (res.final or {}).get("message", "")
            if msg != last:
                self._say("slots", msg, frac)
                last = msg
            failed = [n for n, s in slots.items() if s.get("state") == "failed"
                      and s.get("restarts", 0) >= 3]
            if failed:
                raise RuntimeError(f"slot {failed[0]} keeps failing to start: "
                                   f"{slots[failed[0]].get('detail', '')}")
            await self.sleep(self.cfg.poll_s)
        if last == "waiting for the slot supervisor to start":
            last = f"the slot supervisor never started (its log: {self.agent_dir}/serve.log)"
        raise TimeoutError(f"slots not healthy after {self.cfg.health_wait_s:g} s: {last}")

    def address(self, pod: Machine) -> PodAddress:
        host = pod.ssh_endpoint[0] if pod.ssh_endpoint else "127.0.0.1"
        return PodAddress(host=host, pod_id=pod.id, port_map=dict(pod.ports))

    async def verify_from_laptop(self, lp: LoadedProfile, addr: PodAddress) -> None:
        """Every slot's /health is 200 and a real completion answers, from this side."""
        async with httpx.AsyncClient(timeout=30, trust_env=False) as c:
            for name, slot in lp.profile.slots.items():
                base = addr.base_url(slot.port)
                r = await c.get(base + "/health")
                if r.status_code != 200:
                    raise RuntimeError(f"{name}: /health {r.status_code}")
                r = await c.post(base + "/v1/chat/completions", json={
                    "model": slot.served_model_name, "max_tokens": 4, "temperature": 0,
                    "messages": [{"role": "user", "content": "Reply with OK."}]})
                if r.status_code != 200 or not r.json().get("choices"):
                    raise RuntimeError(f"{name}: completion failed (HTTP {r.status_code})")

    async def follow_laptop_side(self, lp: LoadedProfile, addr: PodAddress) -> str:
        notes = []
        if self.cfg.render_dir is not None:
            files = render_all(lp.profile, lp.name, addr)
            write_all(files, self.cfg.render_dir)
            notes.append(f"rendered {len(files)} files to {self.cfg.render_dir}")
        if self.cfg.prometheus_url:
            try:
                async with httpx.AsyncClient(timeout=10, trust_env=False) as c:
                    r = await c.post(self.cfg.prometheus_url.rstrip("/") + "/-/reload")
                notes.append(f"Prometheus reload HTTP {r.status_code}")
            except httpx.HTTPError as exc:
                notes.append(f"Prometheus reload failed: {type(exc).__name__}")
        return "; ".join(notes)

    async def bring_up(self, pod: Machine, lp: LoadedProfile) -> ProvisionResult:
        """Everything after a pod exists. The caller terminates the pod on any exception."""
        self.for_pod(pod)
        self._say("ssh", f"waiting for SSH on {pod.id}")
        pod, t = await self.wait_ssh(pod)
        try:
            self._say("upload", "uploading the agent")
            await self.upload_agent(t, lp)
            self._say("host checks", "checking the host")
            await self.check_host(t, lp)
            self._say("bootstrap", "starting the slot supervisor")
            await self.bootstrap(t, lp)
            await self.wait_slots(t, lp)
        finally:
            t.close()
        addr = self.address(pod)
        await self.verify_from_laptop(lp, addr)
        note = await self.follow_laptop_side(lp, addr)
        if note:
            self._say("laptop side", note)
        return ProvisionResult(pod, lp, addr, [])

    # -- the flows -----------------------------------------------------------------
    async def resume(self, pod_id: str, lp: LoadedProfile) -> ProvisionResult:
        """Start the stopped pod; CapacityError propagates (the caller offers fallback).

        A resumed pod is ours to keep: on any failure — an unreadable or lost answer to
        the start, a bring-up error, a cancellation — it is stopped (volume kept)."""
        self._say("resume", f"starting pod {pod_id}")
        try:
            self._record("resume-requested", pod=pod_id)
        except AuditError as exc:
            raise ProvisionFailed(EXIT_FATAL, f"not started: cannot record it ({exc})"
                                  ) from None
        try:
            pod = await self.client.start(pod_id)
        except CapacityError:
            self._settle("stopped", pod=pod_id, why="refused: no capacity")
            raise
        except (FatalError, NotFoundError) as exc:
            self._settle("stopped", pod=pod_id, why="refused")
            raise ProvisionFailed(EXIT_FATAL, exc.message) from None
        except ProviderError as exc:
            # a 5xx or a timeout may hide a start that happened: stop it to be sure
            err = await self.stop_resumed(pod_id, f"start answered {exc.message}")
            if err is not None:
                raise ProvisionFailed(
                    EXIT_LEAKED, f"start of {pod_id} answered {exc.message!r} and the stop "
                    f"that followed failed ({err}): pod {pod_id} may be billing; run "
                    "pod-console down", leaked_name=pod_id) from None
            raise ProvisionFailed(EXIT_FATAL, f"provider API failing: start of {pod_id} "
                                  f"answered {exc.message}; the pod was stopped again"
                                  ) from None
        except BaseException:
            self._interrupted()
            await self.stop_resumed(pod_id, "interrupted")
            raise
        try:
            pod = pod or await self.client.get(pod_id)
            res = await self.bring_up(pod, lp)
        except (TimeoutError, RuntimeError, AgentError, HostRejected, OSError, ProviderError,
                httpx.HTTPError) as exc:
            self._say("resume", f"failed: {exc}; stopping {pod_id}")
            err = await self.stop_resumed(pod_id, f"resume failed: {exc}")
            if err is not None:
                raise ProvisionFailed(EXIT_LEAKED, f"resume of {pod_id} failed ({exc}) and "
                                      f"STOP FAILED ({err}): it may still be billing",
                                      leaked_name=pod_id) from None
            code = EXIT_HOST_CHECKS if isinstance(exc, HostRejected) else EXIT_UNHEALTHY
            raise ProvisionFailed(code, f"resume of {pod_id} failed: {exc}") from None
        except BaseException:
            self._interrupted()
            await self.stop_resumed(pod_id, "interrupted")
            raise
        await self._adopt(res, None)
        if self.on_ready is not None:  # a resumed pod may answer at a new address
            await self.on_ready(res)
        return res

    async def _adopt(self, res: ProvisionResult, name: str | None) -> None:
        """Make the pod this deployment's: ``current_pod.json`` names it (every later
        ``down``, ``up`` and console follows it, and no sweep touches it), then the
        ledger says ``kept``. Both or neither: when either cannot be written the pod is
        not adopted — terminated (a resumed one stopped) — and the run fails saying why.
        Following a pod the disk does not know would leave it to the next sweep."""
        pod, d = res.pod, self.cfg.state_dir
        before = config_file.current_pod_bytes(d) if d is not None else None
        wrote = False
        try:
            # current first: a crash between the two leaves a pod that a sweep sees is
            # some context's and keeps (settling its entry), never an adopted pod swept
            if d is not None:
                config_file.write_current_pod(d, pod.id, res.profile.name,
                                              res.address.host, res.address.port_map)
                wrote = True
            # with what it costs on which GPUs: a later fallback's question names the
            # $/h last paid for a kind (the provider has no price list before a create)
            self._record("kept", pod=pod.id, gpu=pod.gpu_type, count=pod.gpu_count,
                         cost=pod.cost, **({"name": name} if name else {}))
        except (AuditError, OSError) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            self._say("ledger", f"CANNOT RECORD pod {pod.id} as kept ({why})")
            if wrote and d is not None:
                with contextlib.suppress(OSError):  # the pod followed before, if any
                    config_file.restore_current_pod(d, before)
            cost = f"${pod.cost:.2f}/h" if pod.cost else "unknown $/h"
            if name is None:
                err = await self.stop_resumed(pod.id, "could not be recorded as kept")
                if err is not None:
                    raise ProvisionFailed(
                        EXIT_LEAKED, f"pod {pod.id} ({cost}) is up but could NOT be recorded "
                        f"as kept ({why}), and the stop that followed FAILED ({err}): it is "
                        "billing; stop it by hand", pod) from None
                raise ProvisionFailed(
                    EXIT_FATAL, f"pod {pod.id} came up but could NOT be recorded as kept "
                    f"({why}); it was stopped again. Free the state directory "
                    f"{self.cfg.state_dir} and run it again") from None
            await self.terminate(pod, f"could not be recorded as kept: {why}")
            raise ProvisionFailed(
                EXIT_FATAL, f"new pod {pod.id} came up but could NOT be recorded as kept "
                f"({why}); not following a pod the disk does not know: it was terminated. "
                f"Free the state directory {self.cfg.state_dir} and run it again") from None

    def _spec(self, lp: LoadedProfile, gpu: str) -> MachineSpec:
        # a unique name per create: a lost answer is resolved by looking this name up,
        # and it must not match an older pod of the same profile
        return MachineSpec(
            name=f"{self.cfg.pod_name}-{lp.name}-{secrets.token_hex(3)}",
            image=lp.profile.image, gpu_type_id=gpu, gpu_count=lp.profile.effective_gpu_count,
            cloud=lp.profile.cloud_type, disk_gb=lp.profile.container_disk_gb,
            volume_gb=lp.profile.volume_gb,
            ports=("22/tcp", *(f"{s.port}/tcp" for s in lp.profile.slots.values()),
                   *((f"{lp.profile.gpu_metrics_port}/tcp",)
                     if lp.profile.gpu_metrics_port else ())))

    async def _create(self, spec: MachineSpec) -> Machine:
        """One create, in the ledger before it is sent and after it answers."""
        try:
            self._record("create-requested", name=spec.name, gpu=spec.gpu_type_id)
        except AuditError as exc:
            raise ProvisionFailed(EXIT_FATAL, f"nothing created: cannot record the create "
                                  f"({exc})") from None
        try:
            pod = await self.client.create(spec)
        except UnknownOutcomeError as exc:
            raise ProvisionFailed(
                EXIT_LEAKED, f"provider API failing: {exc.message}. Not creating another. If "
                f"a pod named {exc.name} exists it is billing: pod-console up/down will "
                "look for it and terminate it", leaked_name=exc.name) from None
        except asyncio.CancelledError:
            # interrupted while the create was in flight: it may have happened
            self._interrupted()
            await uncancellable(self._terminate_by_name(spec.name, "interrupted mid-create"))
            raise
        except ProviderError as exc:
            if not getattr(exc, "sent", True) or isinstance(
                    exc, CapacityError | FatalError | ConflictError):
                self._settle("terminated", name=spec.name, why="not created")
            raise
        try:
            self._record("created", name=spec.name, pod=pod.id, cost=pod.cost)
        except AuditError as exc:
            self._say("ledger", f"could not record pod {pod.id} ({exc})")
        return pod

    async def fallback(self) -> ProvisionResult:
        unknown = self.unknown_creates()
        if unknown:
            # an earlier create may have made a pod nobody can see yet: another create
            # now could make two billing, and one more with every run while the API fails
            raise ProvisionFailed(
                EXIT_LEAKED, f"a create of pod {unknown[0]} may have succeeded and could "
                "not be looked up: not creating another until it is found (pod-console "
                "up/down look for it first; when the provider answers again it is settled)",
                leaked_name=unknown[0])
        attempts: list[dict[str, Any]] = []
        host_rejections = 0
        sold_out = 0
        for rnd in range(1, self.cfg.rounds + 1):
            round_api_errors: list[str] = []
            round_tries = 0
            for lp in self.profiles:
                for gpu in lp.profile.gpu_type_ids:
                    while True:
                        spec = self._spec(lp, gpu)
                        self._say("create", f"round {rnd}: {lp.name} on {gpu}")
                        round_tries += 1
                        try:
                            pod = await self._create(spec)
                        except CapacityError as exc:
                            sold_out += 1
                            attempts.append({"round": rnd, "profile": lp.name, "gpu": gpu,
                                             "outcome": "sold out"})
                            self._say("create", f"{gpu}: sold out ({exc.message[:60]})")
                            break
                        except TransientError as exc:
                            round_api_errors.append(exc.message)
                            attempts.append({"round": rnd, "profile": lp.name, "gpu": gpu,
                                             "outcome": f"transient: {exc.message}"})
                            self._say("create", f"{gpu}: {exc.message}")
                            break
                        except ProviderError as exc:
                            raise ProvisionFailed(
                                EXIT_FATAL, f"{self.client.name} refused: {exc.message}"
                            ) from None
                        try:
                            res = await self.bring_up(pod, lp)
                        except HostRejected as exc:
                            host_rejections += 1
                            attempts.append({"round": rnd, "profile": lp.name, "gpu": gpu,
                                             "pod": pod.id, "outcome": f"host rejected: {exc}"})
                            await self.terminate(pod, f"host rejected: {exc}")
                            if host_rejections >= self.cfg.cuda_attempts:
                                raise ProvisionFailed(
                                    EXIT_HOST_CHECKS, f"host checks failed on "
                                    f"{host_rejections} hosts; last: {exc}") from None
                            continue  # another host of the same kind
                        except (TimeoutError, RuntimeError, AgentError, OSError,
                                ProviderError, httpx.HTTPError) as exc:
                            attempts.append({"round": rnd, "profile": lp.name, "gpu": gpu,
                                             "pod": pod.id, "outcome": f"failed: {exc}"})
                            await self.terminate(pod, f"bring-up failed: {exc}")
                            raise ProvisionFailed(EXIT_UNHEALTHY,
                                                  f"pod {pod.id} never became healthy: {exc}; "
                                                  "terminated") from None
                        except BaseException as exc:  # cancelled, interrupted, a bug
                            self._interrupted()
                            await self.terminate(pod, f"interrupted ({type(exc).__name__})")
                            raise
                        attempts.append({"round": rnd, "profile": lp.name, "gpu": gpu,
                                         "pod": pod.id, "outcome": "ok"})
                        await self._adopt(res, spec.name)
                        result = ProvisionResult(res.pod, lp, res.address, attempts)
                        self.pod_id = res.pod.id
                        if self.on_ready is not None:
                            await self.on_ready(result)
                        return result
            if round_tries and len(round_api_errors) == round_tries:
                # nothing answered "sold out" all round: the API is down, not the stock
                raise ProvisionFailed(EXIT_FATAL, f"provider API failing on every create of "
                                      f"round {rnd}: {round_api_errors[-1]}")
            if rnd < self.cfg.rounds:
                await self._countdown(rnd)
        raise ProvisionFailed(EXIT_NO_CAPACITY, f"no capacity after {self.cfg.rounds} rounds "
                              f"({fmt.count(len(attempts), 'attempt')}, {sold_out} sold out)")

    async def _countdown(self, rnd: int) -> None:
        left = self.cfg.round_wait_s
        step = max(1.0, min(30.0, left / 20))
        while left > 0:
            self._say("wait", f"everything sold out; round {rnd + 1}/{self.cfg.rounds} in "
                              f"{left:.0f} s", 1 - left / self.cfg.round_wait_s)
            await self.sleep(min(step, left))
            left -= step

    async def up(self, pod_id: str | None, lp_for_resume: LoadedProfile | None
                 ) -> ProvisionResult:
        """Resume if there is a pod to resume; on a capacity refusal, fall back."""
        if pod_id and lp_for_resume is not None:
            try:
                return await self.resume(pod_id, lp_for_resume)
            except CapacityError as exc:
                self._say("resume", f"refused: {exc.message} — falling back to a new pod")
        return await self.fallback()

    async def down(self, pod_id: str) -> str:
        """Stop the pod (volume kept); safe to run twice."""
        try:
            pod = await self.client.get(pod_id)
        except NotFoundError:
            return f"pod {pod_id} does not exist (terminated)"
        except ProviderError as exc:
            raise ProvisionFailed(EXIT_FATAL, f"cannot read pod {pod_id}: {exc.message}"
                                  ) from None
        if pod.status in GONE:
            return f"pod {pod_id} already {pod.status}"
        try:
            await uncancellable(self.client.stop(pod_id))
        except ConflictError:
            # it stopped meanwhile: read it again below
            pass
        except ProviderError as exc:
            cost = f"${pod.cost:.2f}/h" if pod.cost else "unknown $/h"
            raise ProvisionFailed(EXIT_LEAKED, f"STOP FAILED for pod {pod_id} ({cost}): "
                                  f"{exc.message} — it is still billing", pod) from None
        try:
            pod = await self.client.get(pod_id)
        except ProviderError as exc:
            raise ProvisionFailed(EXIT_FATAL, f"stop of {pod_id} sent; reading it back "
                                  f"failed: {exc.message}") from None
        if pod.status != "EXITED":
            raise ProvisionFailed(EXIT_FATAL, f"pod {pod_id} is {pod.status} after stop")
        return f"pod {pod_id} stopped (EXITED, volume kept)"

    # -- registry handlers -----------------------------------------------------------
    def _exclusive(self, who: str) -> contextlib.AbstractContextManager[None]:
        """The state directory's lock, as ``up`` and ``down`` take it (none without one)."""
        d = self.cfg.state_dir
        return exclusive(d, who) if d is not None else contextlib.nullcontext()

    async def resume_action(self, progress: Progress) -> Outcome:
        self.progress = progress
        if not self.pod_id:
            return Outcome(False, "no pod id configured to resume", state="failed")
        try:
            with self._exclusive("console r (resume)"):
                res = await self.resume(self.pod_id, self.profiles[0])
        except Busy as exc:
            return Outcome(False, f"not started: {exc}", state="failed")
        except CapacityError as exc:
            return Outcome(False, f"resume refused: {exc.message} — press f for fallback "
                                  "provisioning", {"capacity": True}, "failed")
        except ProvisionFailed as exc:
            return Outcome(False, exc.message, {"exit_code": exc.code}, "failed")
        return Outcome(True, f"pod {res.pod.id} up with {res.profile.name}")

    async def old_pod_fate(self, pod_id: str) -> str:
        """What became of the pod a fallback replaced, as the provider says now: "old pod
        abc: stopped, volume kept, $0.00/h" — or still billing, said with its $/h."""
        try:
            m = await asyncio.wait_for(self.client.get(pod_id), 15.0)
        except NotFoundError:
            return f"old pod {pod_id}: terminated, $0.00/h"
        except (ProviderError, TimeoutError) as exc:
            why = getattr(exc, "message", None) or "no answer within 15 s"
            return (f"old pod {pod_id}: not known ({why}); it may still bill: look at it "
                    f"in {self.client.name}")
        cost = fmt.money(m.cost or 0.0)
        if m.status == "TERMINATED":
            return f"old pod {pod_id}: terminated, {cost}/h"
        if m.status == "EXITED":
            return f"old pod {pod_id}: stopped, volume kept, {cost}/h"
        if m.billing:
            return (f"old pod {pod_id}: still {m.status}, {cost}/h — it bills until it is "
                    f"stopped ({self.client.name}: stop {pod_id})")
        return f"old pod {pod_id}: {m.status}, {cost}/h"

    @staticmethod
    def new_pod_text(res: ProvisionResult) -> str:
        """"new pod xyz on h100-2x (2× NVIDIA H100 80GB HBM3), $6.58/h"."""
        m = res.pod
        gpus = f" ({m.gpu_count}× {m.gpu_type})" if m.gpu_type and m.gpu_count else ""
        return f"new pod {m.id} on {res.profile.name}{gpus}, {fmt.money(m.cost)}/h"

    async def fallback_action(self, progress: Progress) -> Outcome:
        """``f``: under the same lock as ``up``/``down`` (a cron ``up`` bringing a pod up
        is never swept as a leftover here, nor this one's by a ``down``). Its result says
        what became of the old pod and what the new one costs."""
        self.progress = progress
        old = self.pod_id
        try:
            with self._exclusive("console f (fallback)"):
                for line in await self.sweep():
                    self._say("leftovers", line)
                res = await self.fallback()
        except Busy as exc:
            return Outcome(False, f"nothing created: {exc}", state="failed")
        except ProvisionFailed as exc:
            return Outcome(False, exc.message, {"exit_code": exc.code}, "failed")
        fate = await self.old_pod_fate(old) if old and old != res.pod.id else None
        text = f"{self.new_pod_text(res)} ({fmt.count(len(res.attempts), 'attempt')})"
        return Outcome(True, f"{fate}; {text}" if fate else text,
                       {"pod": res.pod.id, "cost_per_hr": res.pod.cost,
                        **({"old_pod": old, "old_pod_fate": fate} if fate else {})})
