"""The pod agent as the console calls it: every agent command is built here, once.

It runs over a :class:`Transport` — SSH (``remote.AgentTransport``) or a local
process (``remote.LocalAgentTransport``, the demo). Operations, the pod collector,
provisioning and the headless commands receive an :class:`AgentClient` as an
argument; none of them spells an agent command line itself.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from console.sources.remote import AgentEndpoint, AgentResult

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

    async def status(self, timeout_s: float = 30.0) -> AgentResult:
        return await self._t().run(["status", "--json"], timeout_s=timeout_s)

    async def logs(self, slot: str, lines: int = 200, timeout_s: float = 10.0) -> AgentResult:
        return await self._t().run(["logs", slot, "-n", str(lines)], timeout_s=timeout_s)

    async def rebalance(self, split: dict[str, float], action_id: str,
                        on_event: EventSink | None = None,
                        timeout_s: float = 3600.0) -> AgentResult:
        args = ["rebalance"]
        for k, v in sorted(split.items()):
            args += ["--set", f"{k}={v:g}"]
        return await self._t().run([*args, "--action-id", action_id], on_event=on_event,
                                   timeout_s=timeout_s)

    async def restart(self, slot: str, action_id: str, on_event: EventSink | None = None,
                      timeout_s: float = 3600.0) -> AgentResult:
        """Stop one slot and start it again (the agent's ``restart``); its events are the
        progress, the final event its end (``startup_s`` when it came back up)."""
        return await self._t().run(["restart", slot, "--action-id", action_id],
                                   on_event=on_event, timeout_s=timeout_s)

    async def watchdog(self, cmd: str, action_id: str | None = None,
                       on_event: EventSink | None = None,
                       timeout_s: float = 300.0, extra: list[str] | None = None
                       ) -> AgentResult:
        args = ["watchdog", cmd, *(extra or [])]
        if action_id:
            args += ["--action-id", action_id]
        return await self._t().run(args, on_event=on_event, timeout_s=timeout_s)

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

    async def attach(self, action_id: str, on_event: EventSink | None = None,
                     timeout_s: float = 3600.0) -> AgentResult:
        return await self._t().run(["attach", action_id], on_event=on_event,
                                   timeout_s=timeout_s)

    async def shutdown(self, timeout_s: float = 60.0) -> AgentResult:
        return await self._t().run(["shutdown"], timeout_s=timeout_s)
