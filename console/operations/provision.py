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
Every request that can make a pod bill is in the ledger (``actions/ledger.py``)
before it is sent, so even ``kill -9`` leaves the pod named on disk.
After a create: wait for real SSH (v2 says RUNNING before ports exist), upload
and check the host with the agent (driver CUDA below ``min_cuda`` → terminate
and try another host, up to 5 times), start the supervisor, wait for every
slot, then re-render the laptop side for the new address and reload Prometheus.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import secrets
import shlex
import tarfile
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from console.config.render import PodAddress, render_all, write_all
from console.operations.ledger import AuditError, Ledger
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


@dataclass
class ProvisionConfig:
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
    """``STATE_DIR/pods.jsonl``; None keeps no ledger (tests of the pieces)."""


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


@dataclass(frozen=True)
class ProvisionResult:
    pod: Machine
    profile: LoadedProfile
    address: PodAddress
    attempts: list[dict[str, Any]]


def agent_tarball(profile: LoadedProfile) -> bytes:
    """pod_agent + the profile (and its patches): what the pod needs to run the agent."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in sorted((PKG_ROOT / "pod_agent").glob("*.py")):
            tar.add(p, arcname=f"pod_agent/{p.name}")
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

    # -- the pieces ----------------------------------------------------------------
    async def terminate(self, pod: Machine, why: str) -> None:
        """DELETE first, then talk about it; the DELETE survives a cancellation."""
        try:
            await uncancellable(self.client.terminate(pod.id))
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
            await uncancellable(self.client.stop(pod_id))
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
            pods = [p for p in await self.client.find_by_name(name) if p.status != "TERMINATED"]
        except ProviderError as exc:
            self._say("terminate", f"COULD NOT LOOK UP {name} ({exc.message}): the ledger "
                      "keeps it for the next pod-console up/down")
            return
        for pod in pods:
            with contextlib.suppress(ProvisionFailed):  # said loudly by terminate
                await self.terminate(pod, why)
        if not pods:
            self._settle("terminated", name=name, why="not created")

    async def sweep(self) -> list[str]:
        """Settle what an earlier, interrupted run left in the ledger: terminate pods it
        created, stop pods it resumed. Returns one line per pod handled (or not)."""
        if self.ledger is None:
            return []
        out = []
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
                out.append(f"COULD NOT CHECK {e.pod_id or e.name} (created by an interrupted "
                           f"run): {exc.message}")
                continue
            live = [p for p in pods if p.status != "TERMINATED"]
            for pod in live:
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
                res = await AgentClient(t).status()
            except AgentError as exc:
                last = str(exc)
                await self.sleep(self.cfg.poll_s)
                continue
            slots = (res.final or {}).get("slots") or {}
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
            await self.stop_resumed(pod_id, "interrupted")
            raise
        self._settle("kept", pod=pod_id)
        return res

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
                            await self.terminate(pod, f"interrupted ({type(exc).__name__})")
                            raise
                        attempts.append({"round": rnd, "profile": lp.name, "gpu": gpu,
                                         "pod": pod.id, "outcome": "ok"})
                        self._settle("kept", pod=res.pod.id, name=spec.name)
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
                              f"({len(attempts)} attempts, {sold_out} sold out)")

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
    async def resume_action(self, progress: Progress) -> Outcome:
        self.progress = progress
        if not self.pod_id:
            return Outcome(False, "no pod id configured to resume", state="failed")
        try:
            res = await self.resume(self.pod_id, self.profiles[0])
        except CapacityError as exc:
            return Outcome(False, f"resume refused: {exc.message} — press f for fallback "
                                  "provisioning", {"capacity": True}, "failed")
        except ProvisionFailed as exc:
            return Outcome(False, exc.message, {"exit_code": exc.code}, "failed")
        return Outcome(True, f"pod {res.pod.id} up with {res.profile.name}")

    async def fallback_action(self, progress: Progress) -> Outcome:
        self.progress = progress
        left = await self.sweep()
        for line in left:
            self._say("leftovers", line)
        try:
            res = await self.fallback()
        except ProvisionFailed as exc:
            return Outcome(False, exc.message, {"exit_code": exc.code}, "failed")
        return Outcome(True, f"new pod {res.pod.id} on {res.profile.name} "
                             f"({len(res.attempts)} attempts)", {"pod": res.pod.id})
