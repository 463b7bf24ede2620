"""Resume and fallback provisioning on RunPod, with no pod left behind.

Loops (SkyPilot-style): rounds × profiles in order × each profile's GPU types.
Capacity → next candidate; all sold out → wait and go round again; fatal API
error → stop at once. Once a pod exists, *every* failure path terminates it;
if terminating fails, the error says so loudly with the pod id and its $/h.
After a create: wait for real SSH (v2 says RUNNING before ports exist), upload
and check the host with the agent (driver CUDA below ``min_cuda`` → terminate
and try another host, up to 5 times), start the supervisor, wait for every
slot, then re-render the laptop side for the new address and reload Prometheus.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import shlex
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from pod_agent.profiles import LoadedProfile

from .actions.registry import Outcome, Progress
from .provider.runpod import (
    CapacityError,
    CreateSpec,
    FatalError,
    Pod,
    RunPodClient,
    RunPodError,
    TransientError,
)
from .remote import AgentError, report_from
from .render import PodAddress, render_all, write_all

EXIT_OK, EXIT_NO_CAPACITY, EXIT_FATAL, EXIT_HOST_CHECKS, EXIT_UNHEALTHY = 0, 2, 3, 4, 5
PKG_ROOT = Path(__file__).resolve().parent.parent


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


class ProvisionFailed(Exception):
    def __init__(self, code: int, message: str, leaked: Pod | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.leaked = leaked


class HostRejected(Exception):
    pass


@dataclass(frozen=True)
class ProvisionResult:
    pod: Pod
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
    def __init__(self, client: RunPodClient, profiles: list[LoadedProfile],
                 transport_factory: Callable[[Pod, str], Any], cfg: ProvisionConfig, *,
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

    def for_pod(self, pod: Pod) -> None:
        """``{pod}`` in agent_dir becomes the pod id (the demo keeps one dir per pod)."""
        self.agent_dir = self.cfg.agent_dir.replace("{pod}", pod.id)

    def agent_cmd(self) -> str:
        # `env` so the prefix also works after nohup/setsid; keep the image's PYTHONPATH
        return f"env PYTHONPATH={shlex.quote(self.agent_dir + '/pkg')}:\"$PYTHONPATH\" " \
               f"{self.cfg.python} -m pod_agent"

    def remote_profile(self, lp: LoadedProfile) -> str:
        return f"{self.agent_dir}/pkg/profiles/{lp.path.name}"

    def _say(self, step: str, message: str, fraction: float | None = None) -> None:
        self.log(f"{step}: {message}")
        self.progress(step, fraction, message)

    # -- the pieces ----------------------------------------------------------------
    async def terminate(self, pod: Pod, why: str) -> None:
        self._say("terminate", f"terminating {pod.id} ({why})")
        try:
            await self.client.terminate(pod.id)
        except RunPodError as exc:
            cost = f"${pod.cost:.2f}/h" if pod.cost else "unknown $/h"
            raise ProvisionFailed(
                EXIT_FATAL, f"TERMINATE FAILED for pod {pod.id} ({cost}) after {why}: "
                f"{exc.message} — it may still be billing; terminate it by hand", pod) from None

    async def wait_ssh(self, pod: Pod) -> tuple[Pod, Any]:
        deadline = time.monotonic() + self.cfg.ssh_wait_s
        last = "no SSH endpoint yet"
        while time.monotonic() < deadline:
            try:
                pod = await self.client.get_pod(pod.id)
            except RunPodError as exc:
                last = exc.message
                await self.sleep(self.cfg.poll_s)
                continue
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
            remote = f"/tmp/pod-agent-{int(time.time())}.tgz"
            await t.put_file(local, remote)
        finally:
            local.unlink(missing_ok=True)
        d = shlex.quote(self.agent_dir + "/pkg")
        res = await t.run_raw(f"mkdir -p {d} && tar -xzf {remote} -C {d} && rm -f {remote}",
                              timeout_s=120)
        if res.exit_status not in (0, None):
            raise RuntimeError(f"agent upload failed (exit {res.exit_status})")

    async def check_host(self, t: Any, lp: LoadedProfile) -> dict[str, Any]:
        cmd = f"{self.agent_cmd()} check-host --json --profile " \
              f"{shlex.quote(self.remote_profile(lp))}"
        res = await t.run_raw(cmd, timeout_s=300)
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
        self._say("host checks", f"driver CUDA {cuda.get('value')}; P2P "
                  f"{(p2p.get('value') or {}).get('verdict', 'skipped')}")
        return report

    async def bootstrap(self, t: Any, lp: LoadedProfile) -> None:
        log = shlex.quote(self.agent_dir + "/serve.log")
        cmd = (f"{self.agent_cmd()} status --json >/dev/null 2>&1 || "
               f"(setsid nohup {self.agent_cmd()} serve --profile "
               f"{shlex.quote(self.remote_profile(lp))} > {log} 2>&1 < /dev/null &)")
        await t.run_raw(cmd, timeout_s=60)

    async def wait_slots(self, t: Any, lp: LoadedProfile) -> None:
        deadline = time.monotonic() + self.cfg.health_wait_s
        last = ""
        while time.monotonic() < deadline:
            try:
                res = await t.run(["status", "--json"], timeout_s=30)
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

    def address(self, pod: Pod) -> PodAddress:
        host = pod.ssh_endpoint[0] if pod.ssh_endpoint else "127.0.0.1"
        port_map = {}
        if pod.runtime:
            for p in pod.runtime.ports:
                if p.public and p.private != 22:
                    port_map[p.private] = p.public
        return PodAddress(host=host, pod_id=pod.id, port_map=port_map)

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

    async def bring_up(self, pod: Pod, lp: LoadedProfile) -> ProvisionResult:
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
        """Start the stopped pod; CapacityError propagates (the caller offers fallback)."""
        self._say("resume", f"starting pod {pod_id}")
        try:
            pod = await self.client.start(pod_id)
        except FatalError as exc:
            raise ProvisionFailed(EXIT_FATAL, exc.message) from None
        pod = pod or await self.client.get_pod(pod_id)
        try:
            return await self.bring_up(pod, lp)
        except (TimeoutError, RuntimeError, AgentError, HostRejected) as exc:
            # a resumed pod is ours to keep: stop it (volume kept) rather than terminate
            self._say("resume", f"failed: {exc}; stopping {pod_id}")
            with contextlib.suppress(RunPodError):
                await self.client.stop(pod_id)
            code = EXIT_HOST_CHECKS if isinstance(exc, HostRejected) else EXIT_UNHEALTHY
            raise ProvisionFailed(code, f"resume of {pod_id} failed: {exc}") from None

    async def fallback(self) -> ProvisionResult:
        attempts: list[dict[str, Any]] = []
        host_rejections = 0
        for rnd in range(1, self.cfg.rounds + 1):
            for lp in self.profiles:
                for gpu in lp.profile.gpu_type_ids:
                    while True:
                        spec = CreateSpec(
                            name=f"{self.cfg.pod_name}-{lp.name}", image=lp.profile.image,
                            gpu_type_id=gpu, gpu_count=lp.profile.effective_gpu_count,
                            cloud=lp.profile.cloud_type, disk_gb=lp.profile.container_disk_gb,
                            volume_gb=lp.profile.volume_gb,
                            ports=("22/tcp", *(f"{s.port}/tcp" for s in
                                               lp.profile.slots.values())))
                        self._say("create", f"round {rnd}: {lp.name} on {gpu}")
                        try:
                            pod = await self.client.create_pod(spec)
                        except CapacityError as exc:
                            attempts.append({"round": rnd, "profile": lp.name, "gpu": gpu,
                                             "outcome": "sold out"})
                            self._say("create", f"{gpu}: sold out ({exc.message[:60]})")
                            break
                        except TransientError as exc:
                            attempts.append({"round": rnd, "profile": lp.name, "gpu": gpu,
                                             "outcome": f"transient: {exc.message}"})
                            self._say("create", f"{gpu}: {exc.message}")
                            break
                        except RunPodError as exc:
                            raise ProvisionFailed(EXIT_FATAL, f"RunPod refused: {exc.message}"
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
                                RunPodError, httpx.HTTPError) as exc:
                            attempts.append({"round": rnd, "profile": lp.name, "gpu": gpu,
                                             "pod": pod.id, "outcome": f"failed: {exc}"})
                            await self.terminate(pod, f"bring-up failed: {exc}")
                            raise ProvisionFailed(EXIT_UNHEALTHY,
                                                  f"pod {pod.id} never became healthy: {exc}; "
                                                  "terminated") from None
                        except BaseException:
                            await self.terminate(pod, "interrupted")
                            raise
                        attempts.append({"round": rnd, "profile": lp.name, "gpu": gpu,
                                         "pod": pod.id, "outcome": "ok"})
                        result = ProvisionResult(res.pod, lp, res.address, attempts)
                        self.pod_id = res.pod.id
                        if self.on_ready is not None:
                            await self.on_ready(result)
                        return result
            if rnd < self.cfg.rounds:
                await self._countdown(rnd)
        raise ProvisionFailed(EXIT_NO_CAPACITY, f"no capacity after {self.cfg.rounds} rounds "
                              f"({len(attempts)} attempts)")

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
            pod = await self.client.get_pod(pod_id)
        except RunPodError as exc:
            raise ProvisionFailed(EXIT_FATAL, f"cannot read pod {pod_id}: {exc.message}"
                                  ) from None
        if pod.status in ("EXITED", "TERMINATED"):
            return f"pod {pod_id} already {pod.status}"
        try:
            await self.client.stop(pod_id)
        except RunPodError as exc:
            raise ProvisionFailed(EXIT_FATAL, f"stop failed: {exc.message}") from None
        pod = await self.client.get_pod(pod_id)
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
            return Outcome(False, exc.message, state="failed")
        return Outcome(True, f"pod {res.pod.id} up with {res.profile.name}")

    async def fallback_action(self, progress: Progress) -> Outcome:
        self.progress = progress
        try:
            res = await self.fallback()
        except ProvisionFailed as exc:
            return Outcome(False, exc.message, {"exit_code": exc.code}, "failed")
        return Outcome(True, f"new pod {res.pod.id} on {res.profile.name} "
                             f"({len(res.attempts)} attempts)", {"pod": res.pod.id})
