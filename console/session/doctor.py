"""``pod-console doctor``: what is wrong with this set-up, check by check, and what to do.

Every check has a stable id (``ssh.hostkey``, ``gateway.key``…), its own time limit of
three seconds at most, and one result: ``ok``, ``warn``, ``fail`` or ``skip`` (it does not
apply here: no gateway configured, the agent runs locally), with one sentence and the
next step. They run concurrently through the console's own parts — the SSH transport and
agent client, the slot probe, the Prometheus and gateway clients, the GPU metrics source,
the smoke test's checks — so the doctor sees what the console sees. What two checks both
need (one SSH login, one ``status --json``, one probe of each slot) is asked once and
shared; a check that runs out of time does not cancel it for the others.

No Textual here: the CLI prints the report, the console shows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from console.model.printable import printable
from console.session.record.export import scrub, secrets_of

if TYPE_CHECKING:
    from console.config.settings import Settings
    from console.session.deployment import Deployment
    from console.sources.agent_client import Transport
    from console.sources.collect.http import HttpClient
    from console.sources.collect.slot import SlotProbe
    from console.sources.remote import AgentResult

Status = Literal["ok", "warn", "fail", "skip"]
RANK: dict[str, int] = {"skip": 0, "ok": 0, "warn": 1, "fail": 2}
"""The exit status a result gives the command: 0 all ok (skips are not problems), 1 a
warning, 2 a failure."""
MAX_TIMEOUT_S = 3.0
CLOCK_WARN_S = 5.0
CLOCK_FAIL_S = 120.0
"""The console's own ``pod-clock`` alert says a pod clock more than 2 min off: the pod's
clock decides when its scheduled stop comes."""
DISK_FAIL_BYTES = 64 << 20
DISK_WARN_BYTES = 512 << 20


@dataclass(frozen=True)
class Finding:
    """One check's result."""

    id: str
    status: Status
    sentence: str
    next_step: str
    """What to do about it ("" when there is nothing to do)."""
    elapsed_s: float
    timeout_s: float

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "status": self.status, "sentence": self.sentence,
                "next_step": self.next_step, "elapsed_s": round(self.elapsed_s, 3),
                "timeout_s": self.timeout_s}


@dataclass(frozen=True)
class DoctorReport:
    findings: tuple[Finding, ...]
    started_at: float
    config: str | None = None
    context: str | None = None

    @property
    def exit_code(self) -> int:
        return max((RANK[f.status] for f in self.findings), default=0)

    def by_id(self) -> dict[str, Finding]:
        return {f.id: f for f in self.findings}

    def to_json(self) -> dict[str, object]:
        counts = {s: sum(f.status == s for f in self.findings)
                  for s in ("ok", "warn", "fail", "skip")}
        return {"started_at": self.started_at, "config": self.config,
                "context": self.context, "exit_code": self.exit_code, "counts": counts,
                "checks": [f.to_json() for f in self.findings]}

    def lines(self) -> list[str]:
        width = max((len(f.id) for f in self.findings), default=0)
        out = []
        for f in self.findings:
            out.append(f"{f.status.upper():<4}  {f.id:<{width}}  {f.sentence}")
            if f.next_step:
                out.append(f"{'':<4}  {'':<{width}}  → {f.next_step}")
        n = {s: sum(f.status == s for f in self.findings) for s in ("ok", "warn", "fail")}
        out.append(f"{n['ok']} ok, {n['warn']} warning(s), {n['fail']} failure(s)")
        return out


@dataclass(frozen=True)
class Verdict:
    status: Status
    sentence: str
    next_step: str = ""


def ok(sentence: str) -> Verdict:
    return Verdict("ok", sentence)


def skip(sentence: str) -> Verdict:
    return Verdict("skip", sentence)


def warn(sentence: str, next_step: str) -> Verdict:
    return Verdict("warn", sentence, next_step)


def fail(sentence: str, next_step: str) -> Verdict:
    return Verdict("fail", sentence, next_step)


def _said(text: object, n: int = 240) -> str:
    """Outside words (a server's, an exception's) as one printable line."""
    return printable(" ".join(str(text).split()), n)


@dataclass
class Doctor:
    """What the checks read: the settings (None: the config did not load), the
    deployment (None: its profiles did not), the agent's transport, one HTTP client."""

    settings: Settings | None
    deployment: Deployment | None
    transport: Transport | None
    client: HttpClient
    config_error: str | None = None
    profile_error: str | None = None
    secrets: list[str] = field(default_factory=list)
    """What no finding may say (``record export``'s list)."""
    _shared: dict[str, asyncio.Task[Any]] = field(default_factory=dict)

    def shared(self, name: str, make: Callable[[], Awaitable[Any]]) -> Awaitable[Any]:
        """One answer for every check that needs it; shielded, so that one check's time
        limit does not cancel it for another (the doctor cancels what is left at the
        end)."""
        task = self._shared.get(name)
        if task is None:
            task = self._shared[name] = asyncio.ensure_future(make())
        return asyncio.shield(task)

    async def aclose(self) -> None:
        for task in self._shared.values():
            task.cancel()
        for task in self._shared.values():
            with contextlib.suppress(BaseException):
                await task

    # -- what several checks share ------------------------------------------------------
    @property
    def s(self) -> Settings:
        assert self.settings is not None
        return self.settings

    @property
    def over_ssh(self) -> bool:
        from console.sources.remote import AgentTransport

        return isinstance(self.transport, AgentTransport)

    def ssh_login(self) -> Awaitable[Any]:
        from console.sources.remote import AgentTransport

        t = self.transport
        assert isinstance(t, AgentTransport)
        return self.shared("ssh", t.connection)

    def agent_run(self, name: str, command: str, timeout_s: float) -> Awaitable[Any]:
        t = self.transport
        assert t is not None
        return self.shared(name, lambda: t.run_raw(command, timeout_s=timeout_s))

    def slot_probes(self, timeout_s: float) -> Awaitable[list[SlotProbe]]:
        from console.sources.collect.slot import probe_slot

        dep = self.deployment
        assert dep is not None
        key = self.s.vllm_api_key.get_secret_value() if self.s.vllm_api_key else None

        async def probe() -> list[SlotProbe]:
            return list(await asyncio.gather(*(
                probe_slot(self.client, t, timeout_s, key, metrics=False)
                for t in dep.targets)))
        return self.shared("slots", probe)


CheckFn = Callable[[Doctor, float], Awaitable[Verdict]]


@dataclass(frozen=True)
class Check:
    id: str
    timeout_s: float
    run: CheckFn
    hang: str
    """The next step when it runs out of time."""
    needs: Literal["config", "profiles"] = "config"
    """What must have loaded for it to mean anything."""


# -- config and profiles ----------------------------------------------------------------
async def config_valid(d: Doctor, timeout_s: float) -> Verdict:
    if d.config_error is not None:
        first = d.config_error.splitlines()[0]
        more = len(d.config_error.splitlines()) - 1
        return fail(_said(first) + (f" (and {more} more)" if more > 0 else ""),
                    "fix that key of the config file (README, \"Configuration for a real "
                    "deployment\"), then run `pod-console doctor` again")
    src = d.s._source
    where = f"{src}" if src is not None else "no config file (defaults and environment)"
    ctx = f", context {d.s.context}" if d.s.context else ""
    return ok(f"settings read from {where}{ctx}")


async def profile_valid(d: Doctor, timeout_s: float) -> Verdict:
    if d.profile_error is not None:
        return fail(_said(d.profile_error.splitlines()[0]),
                    f"`pod-console profile check {d.s.profiles_dir}` names each problem "
                    "with its line")
    dep = d.deployment
    assert dep is not None
    return ok(f"profile {dep.today.name} ({len(dep.today.profile.slots)} slot(s)) of "
              f"{len(dep.profiles)} in {d.s.profiles_dir}")


# -- SSH and the agent ------------------------------------------------------------------
def _no_ssh(d: Doctor) -> Verdict | None:
    if d.transport is not None and not d.over_ssh:
        return skip("the agent runs on this machine (demo): no SSH")
    if not d.s.pod.ssh_host:
        return skip("no pod.ssh_host: the console reads no agent (wall mode)")
    return None


async def ssh_reach(d: Doctor, timeout_s: float) -> Verdict:
    from console.sources.remote import AgentError, HostKeyChanged

    if (why := _no_ssh(d)) is not None:
        return why
    p = d.s.pod
    where = f"{p.ssh_host}:{p.ssh_port}"
    try:
        reader, writer = await asyncio.open_connection(p.ssh_host, p.ssh_port)
    except OSError as exc:
        return fail(f"nothing answers at {where} ({_said(exc.strerror or exc, 80)})",
                    "is the pod running (`pod-console status`)? Check pod.ssh_host and "
                    "pod.ssh_port (RunPod: the public port mapped to 22)")
    try:
        banner = await reader.readline()
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    if not banner.startswith(b"SSH-"):
        return fail(f"{where} answers, but not as an SSH server",
                    "pod.ssh_port must be the pod's SSH port (RunPod: the TCP mapping of 22)")
    try:
        await d.ssh_login()
    except HostKeyChanged:
        return ok(f"sshd answers at {where}; its host key is refused (see ssh.hostkey)")
    except AgentError as exc:
        return fail(f"sshd answers at {where} but the login failed: {_said(exc, 160)}",
                    f"pod.ssh_key ({p.ssh_key}) must be the private key whose public half "
                    f"is in the pod's authorized_keys for user {p.ssh_user}")
    return ok(f"logged in as {p.ssh_user}@{where}")


async def ssh_hostkey(d: Doctor, timeout_s: float) -> Verdict:
    from console.sources.remote import AgentError, AgentTransport, HostKeyChanged

    if (why := _no_ssh(d)) is not None:
        return why
    t = d.transport
    assert isinstance(t, AgentTransport)
    try:
        await d.ssh_login()
    except HostKeyChanged as exc:
        return fail(_said(str(exc).split(". Refusing")[0], 300),
                    f"if the pod was really re-created, delete {t.known_hosts}; if not, "
                    "do not connect: the host answering may not be your pod")
    except AgentError:
        return skip("not checked: no SSH login (see ssh.reach)")
    if t.notice:
        return ok(f"first contact: {_said(t.notice, 200)}")
    return ok(f"the key matches the one recorded for pod {t.ep.pod_id}")


def _no_agent(d: Doctor) -> Verdict | None:
    if d.transport is None:
        return skip("no pod.ssh_host: no agent to ask (wall mode)")
    return None


def _agent_missing_next(d: Doctor) -> str:
    return (f"install the agent on the pod: `pod-console up` provisions a pod with it; on "
            f"a pod made by hand copy pod_agent/ to {d.s.pod.agent_dir}/pkg/ (pod.agent_dir)")


@dataclass(frozen=True)
class AgentAnswer:
    version: str | None
    """What ``pod-agent --version`` said (None: no agent answered)."""
    said: str
    """The last line it printed when it did not answer (an ImportError…)."""
    status: AgentResult
    """``status --json``: its final event is the supervisor's answer or error."""


async def _agent(d: Doctor, timeout_s: float) -> AgentAnswer:
    """The agent's version and its ``status --json``, from one command on the pod: one
    login shell and one channel where two would each pay a shell's start-up (a login
    shell that sets up pyenv costs a second of its own)."""
    from console.sources.remote import AgentResult

    t = d.transport
    assert t is not None
    cmd = t.ep.agent_cmd
    res = await d.agent_run("agent", f"{cmd} --version; {cmd} status --json", timeout_s)
    text = [str(ev.get("line") or ev.get("message") or "") for ev in res.events]
    m = next((re.match(r"pod-agent (\S+)$", ln.strip()) for ln in text
              if re.match(r"pod-agent \S+$", ln.strip())), None)
    said = next((ln for ln in text if ln.strip() and not ln.startswith("{")),
                f"exit {res.exit_status}")
    if "Error" in "\n".join(text):  # a traceback's last line says what was missing
        said = next(ln for ln in reversed(text) if "Error" in ln)
    status = AgentResult(res.exit_status, res.final, res.events)
    return AgentAnswer(m.group(1) if m else None, said, status)


async def agent_version(d: Doctor, timeout_s: float) -> Verdict:
    from console.sources.remote import AgentError
    from pod_agent import __version__ as ours

    if (why := _no_agent(d)) is not None:
        return why
    try:
        answer = await _agent(d, timeout_s)
        version, said = answer.version, answer.said
    except AgentError as exc:
        if d.over_ssh:
            return skip(f"not checked: no SSH login ({_said(exc, 120)})")
        return fail(f"the agent could not be run: {_said(exc, 160)}", _agent_missing_next(d))
    if version is None:
        return fail(f"no agent answers on the pod: {_said(said, 160)}", _agent_missing_next(d))
    if version != ours:
        return warn(f"the pod runs pod-agent {_said(version, 40)}, this console ships {ours}",
                    "install this console's agent on the pod (`pod-console up` does on a "
                    "new pod), or run the console of the agent's version")
    return ok(f"pod-agent {version}, the console's own")


async def agent_socket(d: Doctor, timeout_s: float) -> Verdict:
    from console.sources.remote import AgentError

    if (why := _no_agent(d)) is not None:
        return why
    t = d.transport
    assert t is not None
    try:
        answer = await _agent(d, timeout_s)
    except AgentError as exc:
        return skip(f"not checked: the agent could not be run ({_said(exc, 120)})")
    if answer.version is None:
        return skip("not checked: no agent on the pod (see agent.version)")
    r = answer.status
    final = r.final or {}
    if r.final is None:
        return fail(f"the agent's status did not come back (exit {r.exit_status})",
                    "see the supervisor's log on the pod (serve.log in the agent's home)")
    if r.ok:
        slots = final.get("slots") if isinstance(final.get("slots"), dict) else {}
        return ok(f"the supervisor answers on its socket (profile "
                  f"{_said(final.get('profile'), 60)}, {len(slots or {})} slot(s))")
    prof = d.deployment.remote_profile if d.deployment is not None else "PROFILE"
    if final.get("supervisor") == "not running":
        return fail(f"the agent is installed but its supervisor is not running "
                    f"({_said(r.message, 120)})",
                    f"start it on the pod: `{t.ep.agent_cmd} serve --profile {prof}` "
                    "(`pod-console up` starts it)")
    return fail(f"the supervisor answered with an error: {_said(r.message, 160)}",
                "see the supervisor's log on the pod (serve.log in the agent's home)")


async def clock_skew(d: Doctor, timeout_s: float) -> Verdict:
    from console.sources.remote import AgentError

    if (why := _no_agent(d)) is not None:
        return why
    t = d.transport
    assert t is not None

    async def read() -> tuple[Any, float, float]:
        t0 = time.time()
        res = await t.run_raw("date -u +%s.%N", timeout_s=timeout_s)
        return res, t0, time.time()
    try:
        res, t0, t1 = await d.shared("clock", read)
    except AgentError as exc:
        return skip(f"not checked: the pod could not be asked ({_said(exc, 120)})")
    pod = None
    for ev in reversed(res.events):
        with contextlib.suppress(ValueError):
            pod = float(str(ev.get("line", "")).strip())
            break
    if pod is None:
        return warn("the pod did not say its time (`date -u +%s.%N`)",
                    "check the pod's image has coreutils' date")
    skew = pod - (t0 + t1) / 2
    slack = (t1 - t0) / 2  # the answer was made somewhere within the round trip
    off = max(0.0, abs(skew) - slack)
    said = f"the pod's clock is {skew:+.1f} s off this machine's"
    step = ("the pod's clock decides when its scheduled stop comes: turn on time sync "
            "(NTP) on whichever clock is wrong (`timedatectl` on this machine; a pod's "
            "clock is its host's)")
    if off > CLOCK_FAIL_S:
        return fail(said, step)
    if off > CLOCK_WARN_S:
        return warn(said, step)
    return ok(f"the pod's clock is within {max(off, 0.1):.1f} s of this machine's")


# -- slots --------------------------------------------------------------------------
async def slots_health(d: Doctor, timeout_s: float) -> Verdict:
    probes = await d.slot_probes(timeout_s - 0.2)
    down = [p for p in probes if p.health != "up"]
    if down:
        what = "; ".join(f"{p.target.slot} at {p.target.base_url}: {_said(p.health_detail, 60)}"
                         for p in down)
        first = down[0].target.slot
        return fail(f"{len(down)} of {len(probes)} slot(s) down: {what}",
                    f"its log says why: `l` on the slot in the console, or `pod-agent logs "
                    f"{first}` on the pod; `r` in the console restarts it")
    return ok(f"{len(probes)} slot(s) answer /health: "
              f"{', '.join(p.target.slot for p in probes)}")


async def slots_models(d: Doctor, timeout_s: float) -> Verdict:
    probes = await d.slot_probes(timeout_s - 0.2)
    bad = [p for p in probes if p.health == "up"
           and p.target.served_model_name not in p.served_models]
    if bad:
        what = "; ".join(f"{p.target.slot} wants {p.target.served_model_name}, "
                         f"/v1/models lists {_said(', '.join(p.served_models) or 'none', 80)}"
                         + (f" ({_said(p.error, 60)})" if p.error else "") for p in bad)
        return fail(what, "the slot serves another model than its profile names: restart "
                          "it with today's profile (`r` in the console); a 401 means "
                          "VLLM_API_KEY is not the slots' key")
    up = [p for p in probes if p.health == "up"]
    if not up:
        return skip("no slot is up to list its models (see slots.health)")
    return ok(f"each slot serves its model: "
              f"{', '.join(f'{p.target.slot}={p.target.served_model_name}' for p in up)}")


# -- Prometheus, the gateway, Alertmanager, the exporter ---------------------------------
async def _ready(d: Doctor, url: str, timeout_s: float) -> tuple[bool, str]:
    from console.sources.collect.http import HttpError

    try:
        r = await d.client.get(url.rstrip("/") + "/-/ready", timeout=timeout_s)
    except HttpError as exc:
        return False, _said(exc.describe(), 120)
    return r.status_code == 200, f"HTTP {r.status_code}"


async def prometheus_reach(d: Doctor, timeout_s: float) -> Verdict:
    url = d.s.prometheus_url
    if not url:
        return skip("no prometheus_url: the console scrapes the slots itself")
    good, said = await _ready(d, url, timeout_s - 0.2)
    if not good:
        return fail(f"Prometheus at {url}: {said}",
                    "start Prometheus (`pod-console profile render` writes its "
                    "prometheus.yml) or fix prometheus_url")
    return ok(f"Prometheus at {url} is ready")


async def prometheus_targets_up(d: Doctor, timeout_s: float) -> Verdict:
    from console.operations.smoke import Smoke, SmokePlan

    if not d.s.prometheus_url:
        return skip("no prometheus_url")
    dep = d.deployment
    assert dep is not None
    plan = SmokePlan(served={}, slots={t.slot: t.served_model_name for t in dep.targets},
                     prometheus_url=d.s.prometheus_url, pod_id=d.s.pod.machine_id,
                     timeout_s=timeout_s - 0.2)
    good, said = await Smoke(plan, d.client).targets_up()
    if not good:
        return fail(f"Prometheus targets: {_said(said, 200)}",
                    "Prometheus must scrape each slot, labelled with its pod and slot: "
                    "load `pod-console profile render`'s prometheus.yml and check "
                    "Prometheus reaches the slots' ports")
    return ok(f"Prometheus targets {_said(said, 200)}")


async def gateway_reach(d: Doctor, timeout_s: float) -> Verdict:
    from console.sources.collect.http import HttpError

    url = d.s.gateway_url
    if not url:
        return skip("no gateway_url: users call the slots directly")
    try:
        r = await d.client.get(url.rstrip("/") + "/health/liveliness", timeout=timeout_s - 0.2)
    except HttpError as exc:
        return fail(f"the gateway at {url}: {_said(exc.describe(), 120)}",
                    "start the LiteLLM proxy on `pod-console profile render`'s litellm.yaml, "
                    "or fix gateway_url")
    if r.status_code != 200:
        return fail(f"the gateway at {url}: liveliness HTTP {r.status_code}",
                    "see the proxy's own log")
    return ok(f"the gateway at {url} is alive")


async def gateway_key(d: Doctor, timeout_s: float) -> Verdict:
    """The key users' requests and the console's smoke test send (``LITELLM_MASTER_KEY``)
    on ``/v1/models``, and the one the console's watcher sends on ``/metrics``
    (``gateway.key_env`` or ``gateway.key_file``), each as the console sends it."""
    from console.sources.collect.gateway import GatewayCollector
    from console.sources.collect.http import HttpError

    s = d.s
    url = s.gateway_url
    if not url:
        return skip("no gateway_url")
    headers = ({"Authorization": f"Bearer {s.gateway_key.get_secret_value()}"}
               if s.gateway_key else None)
    try:
        r = await d.client.get(url.rstrip("/") + "/v1/models", timeout=timeout_s - 0.2,
                               headers=headers)
    except HttpError as exc:
        return skip(f"not checked: the gateway did not answer ({_said(exc.describe(), 80)})")
    # LiteLLM answers a key that is not its master key with 401, or, without a database
    # of virtual keys to look it up in, 400 "No connected db." (1.100)
    body = r.text[:2000].lower()
    refused = r.status_code in (401, 403) or (
        r.status_code == 400 and ("auth" in body or "no_db_connection" in body))
    if refused:
        if s.gateway_key is None:
            return fail(f"the gateway asks for a key (HTTP {r.status_code}) and "
                        "LITELLM_MASTER_KEY is not set",
                        "export LITELLM_MASTER_KEY with the proxy's master key (never in "
                        "the config file)")
        return fail(f"the gateway refused the key in LITELLM_MASTER_KEY (HTTP {r.status_code})",
                    "set LITELLM_MASTER_KEY to the proxy's master_key (its litellm.yaml's "
                    "general_settings)")
    if r.status_code != 200 and s.gateway_key is None:
        # LiteLLM 1.100 without a database answers a request with no key 500
        return fail(f"the gateway's /v1/models answered HTTP {r.status_code} without a key "
                    f"({_said(r.text, 100)}), and LITELLM_MASTER_KEY is not set",
                    "export LITELLM_MASTER_KEY with the proxy's master key (never in the "
                    "config file)")
    if r.status_code != 200:
        return warn(f"the gateway's /v1/models answered HTTP {r.status_code}: "
                    f"{_said(r.text, 120)}",
                    "see the proxy's own log")
    if s.gateway.watch and s.gateway.via == "direct":
        col = GatewayCollector(url, s.gateway, s.window_s, timeout_s - 0.2, client=d.client)
        _, err = await col.scrape()
        if err is not None and ("key" in err or "401" in err or "403" in err):
            return fail(f"the gateway's metrics: {_said(err, 200)}",
                        f"set {s.gateway.key_env} (gateway.key_env) or gateway.key_file to a "
                        "key the proxy accepts on /metrics")
    how = "with LITELLM_MASTER_KEY" if s.gateway_key else "no key asked"
    return ok(f"the gateway lists its models ({how})")


async def alertmanager_reach(d: Doctor, timeout_s: float) -> Verdict:
    url = d.s.alertmanager_url
    if not url:
        return skip("no alertmanager_url: alerts stay in the console (and the webhook)")
    good, said = await _ready(d, url, timeout_s - 0.2)
    if not good:
        return fail(f"Alertmanager at {url}: {said}",
                    "start Alertmanager (`pod-console profile render` writes an "
                    "alertmanager.yml) or fix alertmanager_url: until then no alert is "
                    "delivered")
    return ok(f"Alertmanager at {url} is ready")


async def exporter_reach(d: Doctor, timeout_s: float) -> Verdict:
    from console.sources.collect.gpu_metrics import NO_GPU_READINGS, GpuMetrics

    s = d.s
    url = s.gpu_metrics_url
    if not url:
        return skip("no gpu_metrics_url: the GPUs are read from the agent")
    token = s.gpu_metrics_token.get_secret_value() if s.gpu_metrics_token else None
    rep = await GpuMetrics(d.client, timeout_s - 0.2, url=url, token=token).fetch()
    if rep.error == NO_GPU_READINGS:
        return warn(f"the GPU exporter at {url} answers but serves no GPU readings",
                    "see the exporter's log on the pod: it reads NVML (or the agent, "
                    "with --from-agent) and says why it has none")
    if rep.error:
        step = ("set GPU_METRICS_TOKEN to the exporter's token" if "401" in rep.error
                or "403" in rep.error else
                "start `pod-agent exporter` on the pod (`serve` runs it) or fix "
                "gpu_metrics_url")
        return fail(f"the GPU exporter at {url}: {_said(rep.error, 120)}", step)
    return ok(f"the GPU exporter at {url} serves {len(rep.gpus)} GPU(s)")


# -- this machine -------------------------------------------------------------------
def _probe_dir(path: Path, sqlite: bool = False) -> None:
    """Create ``path`` if needed and write (and remove) a file in it, as the console
    does (``sqlite``: a small database, as the recorder writes)."""
    path.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".doctor-", dir=path)
    try:
        try:
            if not sqlite:
                os.write(fd, b"\0" * 65536)
                os.fsync(fd)
        finally:
            os.close(fd)
        if sqlite:
            db = sqlite3.connect(name)
            try:
                db.execute("CREATE TABLE t (x BLOB)")
                db.execute("INSERT INTO t VALUES (?)", (b"\0" * 65536,))
                db.commit()
            finally:
                db.close()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)


def _disk_verdict(label: str, path: Path, sqlite: bool, fix: str) -> Verdict:
    try:
        _probe_dir(path, sqlite)
    except (OSError, sqlite3.Error) as exc:
        code = getattr(exc, "errno", None)
        # sqlite says a full disk in words ("database or disk is full"), the OS by errno
        full = code == errno.ENOSPC or (isinstance(exc, sqlite3.Error)
                                        and "full" in str(exc).lower())
        what = "full" if full else "not writable"
        why = _said(getattr(exc, "strerror", None) or exc, 80)
        return fail(f"{label} {path} is {what} ({why})",
                    (f"free space on its filesystem, or {fix}" if full else
                     f"make it writable by this user, or {fix}"))
    free = shutil.disk_usage(path).free
    if free < DISK_FAIL_BYTES:
        return fail(f"{label} {path} has {free >> 20} MiB free",
                    f"free space on its filesystem, or {fix}")
    if free < DISK_WARN_BYTES:
        return warn(f"{label} {path} has only {free >> 20} MiB free",
                    f"free space on its filesystem, or {fix}")
    return ok(f"{label} {path} is writable, {free >> 30} GiB free")


async def disk_state_dir(d: Doctor, timeout_s: float) -> Verdict:
    return await asyncio.to_thread(
        _disk_verdict, "the state directory", d.s.state_dir, False,
        "set state_dir (POD_CONSOLE_STATE_DIR) to another directory")


async def recording_writable(d: Doctor, timeout_s: float) -> Verdict:
    from console.session.record.store import recordings_dir

    s = d.s
    if not s.record:
        return skip("recording is off (record: false)")
    v = await asyncio.to_thread(
        _disk_verdict, "the recordings directory", recordings_dir(s.state_dir), True,
        "turn recording off (record: false)")
    if v.status == "ok":
        free = shutil.disk_usage(recordings_dir(s.state_dir)).free
        if free < s.record_max_mb * (1 << 20):
            return warn(f"the recordings may fill the disk: {free >> 20} MiB free, "
                        f"record_max_mb is {s.record_max_mb:g}",
                        "lower record_max_mb below the free space, or free space")
    return v


CHECKS: tuple[Check, ...] = (
    Check("config.valid", 1.0, config_valid, "report this: reading a file took too long"),
    Check("profile.valid", 1.0, profile_valid, "report this", needs="profiles"),
    Check("ssh.reach", 3.0, ssh_reach, "the pod's SSH port does not answer in time: is the "
          "pod running, and pod.ssh_host/ssh_port its address?"),
    Check("ssh.hostkey", 3.0, ssh_hostkey, "see ssh.reach"),
    Check("agent.version", 3.0, agent_version, "the pod did not run the agent in time: "
          "see ssh.reach; a very busy pod answers slowly"),
    Check("agent.socket", 3.0, agent_socket, "the supervisor did not answer in time: "
          "see its log on the pod (serve.log in the agent's home)"),
    Check("clock.skew", 3.0, clock_skew, "the pod did not answer in time (see ssh.reach)"),
    Check("slots.health", 3.0, slots_health, "a slot accepts connections but does not "
          "answer /health: see its log (`l` in the console)", needs="profiles"),
    Check("slots.models", 3.0, slots_models, "see slots.health", needs="profiles"),
    Check("prometheus.reach", 3.0, prometheus_reach, "Prometheus accepts connections but "
          "does not answer: see its log, or fix prometheus_url"),
    Check("prometheus.targets_up", 3.0, prometheus_targets_up, "Prometheus does not "
          "answer a query in time: see its log", needs="profiles"),
    Check("gateway.reach", 3.0, gateway_reach, "the gateway accepts connections but does "
          "not answer: see the proxy's log"),
    Check("gateway.key", 3.0, gateway_key, "the gateway accepts connections but does not "
          "answer: see the proxy's log"),
    Check("alertmanager.reach", 3.0, alertmanager_reach, "Alertmanager accepts "
          "connections but does not answer: see its log"),
    Check("exporter.reach", 3.0, exporter_reach, "the exporter accepts connections but "
          "does not answer: see `pod-agent exporter` on the pod"),
    Check("disk.state_dir", 3.0, disk_state_dir, "the state directory's filesystem hangs "
          "(a network mount?): set state_dir to a local directory"),
    Check("recording.writable", 3.0, recording_writable, "the recordings' filesystem "
          "hangs: set state_dir to a local directory, or record: false"),
)
assert all(c.timeout_s <= MAX_TIMEOUT_S for c in CHECKS)
IDS = tuple(c.id for c in CHECKS)


async def _one(d: Doctor, check: Check) -> Finding:
    t0 = time.monotonic()
    if check.id != "config.valid" and d.settings is None:
        v = skip("not checked: the config did not load (see config.valid)")
    elif check.needs == "profiles" and check.id != "profile.valid" and d.deployment is None:
        v = skip("not checked: the profiles did not load (see profile.valid)")
    else:
        try:
            v = await asyncio.wait_for(check.run(d, check.timeout_s), check.timeout_s)
        except TimeoutError:
            v = fail(f"no answer within {check.timeout_s:g} s", check.hang)
        except Exception as exc:  # a check's own bug is a finding, never a crash
            v = fail(f"the check itself failed: {_said(f'{type(exc).__name__}: {exc}', 200)}",
                     "report this with `pod-console doctor --bundle FILE.tar.gz`")
    # what a check says is printed and bundled: never a URL's password, never a secret
    # the settings or the environment hold (a server or an exception may repeat one)
    return Finding(check.id, v.status, scrub(v.sentence, d.secrets),
                   scrub(v.next_step, d.secrets), time.monotonic() - t0, check.timeout_s)


def load(config: Path | None) -> tuple[Settings | None, str | None]:
    """The settings (the pod ``up`` last brought up applied), or why they do not load."""
    from console.config.settings import ConfigError, load_settings
    from console.session.deployment import apply_current_pod

    try:
        settings = load_settings(config)
    except ConfigError as exc:
        return None, str(exc)
    apply_current_pod(settings)
    return settings, None


def open_for(settings: Settings) -> tuple[Deployment | None, str | None]:
    from console.session.deployment import DeploymentError, open_deployment

    try:
        return open_deployment(settings), None
    except DeploymentError as exc:
        return None, str(exc)


async def run_doctor(settings: Settings | None, config_error: str | None = None, *,
                     deployment: Deployment | None = None,
                     transport: Transport | Literal["ssh"] | None = "ssh",
                     client: HttpClient | None = None,
                     only: tuple[str, ...] | None = None) -> DoctorReport:
    """Every check (``only``: these ids), concurrently. ``transport``: the agent's (the
    demo's local one, a console's own); by default SSH as the settings say. ``client``:
    an HTTP client to share (the caller closes it)."""
    from console.session.deployment import ssh_transport
    from console.sources.collect.http import HttpClient

    started = time.time()
    profile_error = None
    if settings is not None and deployment is None:
        deployment, profile_error = await asyncio.to_thread(open_for, settings)
    own_transport = transport == "ssh"
    if transport == "ssh":
        transport = ssh_transport(settings) if settings is not None else None
        if transport is not None:
            transport.connect_timeout_s = MAX_TIMEOUT_S - 0.5
    own_client = client is None
    http = client or HttpClient(relay=None)
    d = Doctor(settings, deployment, transport if transport != "ssh" else None, http,
               config_error, profile_error, secrets_of(settings))
    checks = [c for c in CHECKS if only is None or c.id in only]
    try:
        findings = await asyncio.gather(*(_one(d, c) for c in checks))
    finally:
        await d.aclose()
        if own_transport and d.transport is not None:
            d.transport.close()
        if own_client:
            await http.aclose()
    src = settings._source if settings is not None else None
    return DoctorReport(tuple(findings), started, str(src) if src else None,
                        settings.context if settings is not None else None)
