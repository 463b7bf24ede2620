"""The checks of the pod: SSH (reach, host key), the agent (version, supervisor socket) and
the pod's clock, through the console's own transport."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import time
from typing import TYPE_CHECKING, Any

from msgspec import Struct

if TYPE_CHECKING:
    from console.sources.remote import AgentResult

from console.session.doctor.parts import Doctor
from console.session.doctor.report import Verdict, fail, ok, outside, skip, warn

CLOCK_WARN_S = 5.0
CLOCK_FAIL_S = 120.0
"""The console's own ``pod-clock`` alert says a pod clock more than 2 min off: the pod's
clock decides when its scheduled stop comes."""


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
        return fail(f"nothing answers at {where} ({outside(exc.strerror or exc, 80)})",
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
        return fail(f"sshd answers at {where} but the login failed: {outside(exc, 160)}",
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
        return fail(outside(str(exc).split(". Refusing")[0], 300),
                    f"if the pod was really re-created, delete {t.known_hosts}; if not, "
                    "do not connect: the host answering may not be your pod")
    except AgentError:
        return skip("not checked: no SSH login (see ssh.reach)")
    if t.notice:
        return ok(f"first contact: {outside(t.notice, 200)}")
    return ok(f"the key matches the one recorded for pod {t.ep.pod_id}")


def _no_agent(d: Doctor) -> Verdict | None:
    if d.transport is None:
        return skip("no pod.ssh_host: no agent to ask (wall mode)")
    return None


def _agent_missing_next(d: Doctor) -> str:
    return (f"install the agent on the pod: `pod-console up` provisions a pod with it; on "
            f"a pod made by hand copy pod_agent/ to {d.s.pod.agent_dir}/pkg/ (pod.agent_dir)")


PY_STATUS = ('import sys, pod_agent; print("pod-agent", pod_agent.__version__, flush=True); '
             'from pod_agent.cli import main; sys.exit(main(["status", "--json"]))')
"""``pod-agent --version`` and ``pod-agent status --json`` in one interpreter."""


class AgentAnswer(Struct, frozen=True):
    version: str | None
    """What the agent says its version is (None: no agent answered)."""
    said: str
    """The last line it printed when it did not answer (an ImportError…)."""
    status: AgentResult
    """``status --json``: its final event is the supervisor's answer or error."""
    pod_time: float | None
    """What the pod's clock read (``date``), between ``asked`` and ``answered``."""
    asked: float
    answered: float


def agent_probe_command(agent_cmd: str) -> str:
    """The pod's clock, the agent's version and its status, in one command: one login
    shell and one Python start where three commands would each pay for theirs (a login
    shell that sets up pyenv costs most of a second, a Python start another; under load
    that is the three seconds). The agent is run as the console runs it (its command
    line, its environment); one that does not end in ``-m pod_agent`` is run twice."""
    head, sep, _ = agent_cmd.rpartition(" -m pod_agent")
    agent = (f"{head} -c {shlex.quote(PY_STATUS)}" if sep and agent_cmd.endswith(sep)
             else f"{agent_cmd} --version; {agent_cmd} status --json")
    return f"date -u +%s.%N; {agent}"


async def _agent(d: Doctor, timeout_s: float) -> AgentAnswer:
    """What :func:`agent_probe_command` says, asked once for every check that needs it."""
    from console.sources.remote import AgentResult

    t = d.transport
    assert t is not None

    async def ask() -> tuple[Any, float, float]:
        t0 = time.time()
        res = await t.run_raw(agent_probe_command(t.ep.agent_cmd), timeout_s=timeout_s)
        return res, t0, time.time()
    res, t0, t1 = await d.shared("agent", ask)
    text = [str(ev.get("line") or ev.get("message") or "") for ev in res.events]
    pod_time = None
    if text:
        with contextlib.suppress(ValueError):
            pod_time = float(text[0].strip())
    m = next((re.match(r"pod-agent (\S+)$", ln.strip()) for ln in text
              if re.match(r"pod-agent \S+$", ln.strip())), None)
    rest = text[1:] if pod_time is not None else text
    said = next((ln for ln in rest if ln.strip() and not ln.startswith("{")),
                f"exit {res.exit_status}")
    if "Error" in "\n".join(rest):  # a traceback's last line says what was missing
        said = next(ln for ln in reversed(rest) if "Error" in ln)
    status = AgentResult(res.exit_status, res.final, res.events)
    return AgentAnswer(m.group(1) if m else None, said, status, pod_time, t0, t1)


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
            return skip(f"not checked: no SSH login ({outside(exc, 120)})")
        return fail(f"the agent could not be run: {outside(exc, 160)}", _agent_missing_next(d))
    if version is None:
        return fail(f"no agent answers on the pod: {outside(said, 160)}", _agent_missing_next(d))
    if version != ours:
        return warn(f"the pod runs pod-agent {outside(version, 40)}, this console ships {ours}",
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
        return skip(f"not checked: the agent could not be run ({outside(exc, 120)})")
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
                  f"{outside(final.get('profile'), 60)}, {len(slots or {})} slot(s))")
    prof = d.deployment.remote_profile if d.deployment is not None else "PROFILE"
    if final.get("supervisor") == "not running":
        return fail(f"the agent is installed but its supervisor is not running "
                    f"({outside(r.message, 120)})",
                    f"start it on the pod: `{t.ep.agent_cmd} serve --profile {prof}` "
                    "(`pod-console up` starts it)")
    return fail(f"the supervisor answered with an error: {outside(r.message, 160)}",
                "see the supervisor's log on the pod (serve.log in the agent's home)")


async def clock_skew(d: Doctor, timeout_s: float) -> Verdict:
    from console.sources.remote import AgentError

    if (why := _no_agent(d)) is not None:
        return why
    try:
        answer = await _agent(d, timeout_s)
    except AgentError as exc:
        return skip(f"not checked: the pod could not be asked ({outside(exc, 120)})")
    pod, t0, t1 = answer.pod_time, answer.asked, answer.answered
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
