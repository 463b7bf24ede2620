"""Every check by its id, each run within its own limit, all at once: ``run_doctor``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from console.session.record.export import scrub, secrets_of

if TYPE_CHECKING:
    from console.config.settings import Settings
    from console.session.deployment import Deployment
    from console.sources.agent_client import Transport
    from console.sources.collect.http import HttpClient

from console.session.doctor.local_checks import (
    config_valid,
    disk_state_dir,
    profile_valid,
    recording_writable,
)
from console.session.doctor.parts import Check, Doctor
from console.session.doctor.pod_checks import (
    agent_socket,
    agent_version,
    clock_skew,
    ssh_hostkey,
    ssh_reach,
)
from console.session.doctor.report import DoctorReport, Finding, fail, outside, skip
from console.session.doctor.service_checks import (
    alertmanager_reach,
    exporter_reach,
    gateway_key,
    gateway_reach,
    prometheus_reach,
    prometheus_targets_up,
    slots_health,
    slots_models,
)

MAX_TIMEOUT_S = 3.0


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
            v = fail(f"the check itself failed: {outside(f'{type(exc).__name__}: {exc}', 200)}",
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
