"""The pod agent as the console calls it: a request is its model (``pod_agent.requests``,
shared with the agent), sent as the model's own command line.

It runs over a :class:`Transport` — SSH (``remote.AgentTransport``) or a local
process (``remote.LocalAgentTransport``, the demo). Operations, the pod collector,
provisioning and the headless commands receive an :class:`AgentClient` as an
argument; none of them spells an agent command line itself.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from console.sources.remote import AgentEndpoint, AgentResult

if TYPE_CHECKING:  # pydantic: not on the path to the first frame (tests/unit/test_boot.py)
    from pod_agent.requests import AgentRequest

EventSink = Callable[[dict[str, Any]], None]


class Transport(Protocol):
    """How agent commands reach the pod."""

    ep: AgentEndpoint
    """Where the agent is, and the command line that runs it there."""

    async def run(self, args: list[str], on_event: EventSink | None = None,
                  timeout_s: float = 60.0) -> AgentResult: ...

    async def run_raw(self, command: str, on_event: EventSink | None = None,
                      timeout_s: float = 60.0) -> AgentResult: ...

    async def put_file(self, local: Path, remote: str) -> None: ...

    def close(self) -> None: ...


class AgentClient:
    """Typed calls to ``pod-agent``. ``transport`` is None when no agent is configured;
    fallback provisioning points the client at the new pod with :meth:`retarget`."""

    def __init__(self, transport: Transport | None, remote_profile: str | None = None) -> None:
        self.transport = transport
        self.remote_profile = remote_profile
        """The profile's path on the pod (for ``check-host --profile``)."""

    def retarget(self, transport: Transport | None, remote_profile: str | None) -> None:
        self.transport = transport
        self.remote_profile = remote_profile

    @property
    def configured(self) -> bool:
        return self.transport is not None

    def _t(self) -> Transport:
        if self.transport is None:
            raise RuntimeError("no pod agent configured (pod.ssh_host)")
        return self.transport

    async def request(self, req: AgentRequest, on_event: EventSink | None = None,
                      timeout_s: float | None = None) -> AgentResult:
        """Send one request (its model, ``pod_agent.requests``: the pod's ``pod-agent``
        parses its argv back into the same model); ``timeout_s`` defaults to the
        request's own (an hour for the long actions)."""
        return await self._t().run(req.argv(), on_event=on_event,
                                   timeout_s=req.timeout_s if timeout_s is None else timeout_s)

    async def check_host(self, on_event: EventSink | None = None,
                         timeout_s: float = 180.0, agent_cmd: str | None = None
                         ) -> AgentResult:
        """``check-host --json`` with the profile. Raw, not through ``run``: its report is
        one JSON object and its exit status (3: P2P hung) is part of the answer."""
        t = self._t()
        prefix = agent_cmd or t.ep.agent_cmd
        cmd = f"{prefix} check-host --json"
        if self.remote_profile:
            cmd += f" --profile {shlex.quote(self.remote_profile)}"
        return await t.run_raw(cmd, on_event=on_event, timeout_s=timeout_s)

    async def serve_detached(self, agent_cmd: str, log_path: str,
                             timeout_s: float = 60.0) -> AgentResult:
        """Start the supervisor in its own session unless one already answers."""
        profile = shlex.quote(self.remote_profile or "")
        log = shlex.quote(log_path)
        return await self._t().run_raw(
            f"{agent_cmd} status --json >/dev/null 2>&1 || (setsid nohup {agent_cmd} serve "
            f"--profile {profile} > {log} 2>&1 < /dev/null &)", timeout_s=timeout_s)
