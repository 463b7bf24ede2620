"""Reaching the pod agent over SSH (asyncssh): key auth, per-pod host keys, JSON-lines events.

Host keys: RunPod gives every new pod a new host, so keys are recorded per pod
id under ``STATE_DIR/known_hosts/<pod_id>``. The first contact with a pod id
records its key (and says so); a different key for a known pod id is refused
loudly with both fingerprints, never accepted silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec import Struct, field

from pod_agent.events import parse_line

if TYPE_CHECKING:
    import asyncssh

EventSink = Callable[[dict[str, Any]], Awaitable[None] | None]


class AgentError(Exception):
    """The agent could not be reached or answered with an error."""


class HostKeyChanged(AgentError):
    """The pod's host key differs from the one recorded for this pod id."""


def agent_command(agent_dir: str, python: str = "python3") -> str:
    """The one shell prefix that runs the agent from ``agent_dir`` (quoted: a path with a
    space, or a crafted value, is one argument and never shell syntax). ``env`` makes it
    work after nohup/setsid too; the image's own PYTHONPATH is kept."""
    return (f"env PYTHONPATH={shlex.quote(agent_dir + '/pkg')}:\"$PYTHONPATH\" "
            f"{shlex.quote(python)} -m pod_agent")


class AgentEndpoint(Struct, frozen=True):
    host: str
    port: int = 22
    user: str = "root"
    key_path: Path | None = None
    pod_id: str = "pod"
    agent_cmd: str = "python3 -m pod_agent"
    """How to run the agent on the pod (env prefix included), e.g.
    ``PYTHONPATH=/workspace/pod-agent/pkg python3 -m pod_agent``."""


class AgentResult(Struct, frozen=True):
    exit_status: int | None
    final: dict[str, Any] | None
    events: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return self.final is not None and self.final.get("kind") == "result"

    @property
    def message(self) -> str:
        if self.final is None:
            return f"no result (exit {self.exit_status})"
        return str(self.final.get("message") or self.final.get("state") or "")


async def _consume(lines: Any, on_event: EventSink | None, events: list[dict[str, Any]]
                   ) -> dict[str, Any] | None:
    """Parse a stream of agent output lines into events; return the final one."""
    final = None
    async for raw in lines:
        line = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        ev = parse_line(line)
        events.append(ev)
        if ev.get("kind") in ("result", "error"):
            final = ev
        if on_event is not None:
            r = on_event(ev)
            if asyncio.iscoroutine(r):
                await r
    return final


def report_from(result: AgentResult) -> dict[str, Any] | None:
    """The JSON object a command like ``check-host --json`` printed (its last JSON line)."""
    import json

    for ev in reversed(result.events):
        try:
            obj = json.loads(ev.get("line", ""))
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


def _safe_id(pod_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", pod_id) or "pod"


class AgentTransport:
    """One SSH connection to one pod; commands stream events to a callback."""

    def __init__(self, endpoint: AgentEndpoint, state_dir: Path,
                 connect_timeout_s: float = 10.0) -> None:
        self.ep = endpoint
        self.known_hosts = state_dir / "known_hosts" / _safe_id(endpoint.pod_id)
        self.connect_timeout_s = connect_timeout_s
        self._conn: asyncssh.SSHClientConnection | None = None
        self._lock = asyncio.Lock()
        self.notice: str | None = None
        """Set when a host key was recorded on first contact."""

    async def _connect(self) -> asyncssh.SSHClientConnection:
        import asyncssh  # ~80 ms of imports: only when a pod is really reached over SSH

        keys = [str(self.ep.key_path)] if self.ep.key_path else None
        common: dict[str, Any] = dict(
            host=self.ep.host, port=self.ep.port, username=self.ep.user, client_keys=keys,
            agent_path=None, connect_timeout=self.connect_timeout_s, keepalive_interval=15,
            config=None)
        if self.known_hosts.exists():
            try:
                return await asyncssh.connect(known_hosts=str(self.known_hosts), **common)
            except asyncssh.HostKeyNotVerifiable as exc:
                seen = await self._peek_key(common)
                raise HostKeyChanged(
                    f"HOST KEY CHANGED for pod {self.ep.pod_id} at {self.ep.host}:"
                    f"{self.ep.port}: recorded {self._recorded_fingerprint()}, offered "
                    f"{seen}. Refusing to connect. If the pod was really re-created, "
                    f"delete {self.known_hosts}.") from exc
        conn = await asyncssh.connect(known_hosts=None, **common)
        key = conn.get_server_host_key()
        if key is not None:
            self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
            host = self.ep.host if self.ep.port == 22 else f"[{self.ep.host}]:{self.ep.port}"
            self.known_hosts.write_text(f"{host} {key.export_public_key().decode().strip()}\n")
            self.notice = (f"recorded new host key for pod {self.ep.pod_id}: "
                           f"{key.get_fingerprint()}")
        return conn

    async def _peek_key(self, common: dict[str, Any]) -> str:
        import asyncssh

        try:
            conn = await asyncssh.connect(known_hosts=None, **common)
        except (OSError, asyncssh.Error):
            return "unknown"
        try:
            key = conn.get_server_host_key()
            return key.get_fingerprint() if key else "unknown"
        finally:
            conn.close()

    def _recorded_fingerprint(self) -> str:
        import asyncssh

        try:
            line = self.known_hosts.read_text().split()
            return asyncssh.import_public_key(" ".join(line[1:3])).get_fingerprint()
        except (OSError, IndexError, ValueError, asyncssh.KeyImportError):
            return "unreadable"

    async def connection(self) -> asyncssh.SSHClientConnection:
        import asyncssh

        async with self._lock:
            if self._conn is None or self._conn.is_closed():
                try:
                    self._conn = await self._connect()
                except HostKeyChanged:
                    raise
                except (TimeoutError, OSError, asyncssh.Error) as exc:
                    raise AgentError(f"ssh {self.ep.user}@{self.ep.host}:{self.ep.port}: "
                                     f"{type(exc).__name__}: {exc}") from None
            return self._conn

    async def run(self, args: list[str], on_event: EventSink | None = None,
                  timeout_s: float = 60.0) -> AgentResult:
        """Run ``pod-agent ARGS`` on the pod, streaming its events to ``on_event``.

        Raises :class:`AgentError` when the stream ends without a ``result`` or
        ``error`` event (connection lost, agent killed): the action may still be
        running on the pod, and ``attach`` with its id shows how it ends.
        """
        res = await self.run_raw(f"{self.ep.agent_cmd} {shlex.join(args)}", on_event,
                                 timeout_s)
        if res.final is None:
            self.close()
            raise AgentError(f"the agent's answer ended without a result "
                             f"(exit {res.exit_status}); connection lost?")
        return res

    async def run_raw(self, command: str, on_event: EventSink | None = None,
                      timeout_s: float = 60.0) -> AgentResult:
        import asyncssh

        conn = await self.connection()
        events: list[dict[str, Any]] = []
        final: dict[str, Any] | None = None
        try:
            async with asyncio.timeout(timeout_s):
                proc = await conn.create_process(command, stderr=asyncssh.STDOUT)
                final = await _consume(proc.stdout, on_event, events)
                await proc.wait()
        except TimeoutError:
            raise AgentError(f"agent command timed out after {timeout_s:g} s") from None
        except (OSError, asyncssh.Error) as exc:
            with contextlib.suppress(Exception):
                self.close()
            raise AgentError(f"connection lost: {type(exc).__name__}: {exc}") from None
        return AgentResult(proc.exit_status, final, tuple(events))

    async def put_file(self, local: Path, remote: str) -> None:
        conn = await self.connection()
        async with conn.start_sftp_client() as sftp:
            await sftp.put(str(local), remote)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class LocalAgentTransport:
    """The same protocol as :class:`AgentTransport`, with the agent run as a local process.

    Used by the demo, whose simulated pod is this machine: the commands, the
    agent code and the JSON-lines parsing are the production ones; only SSH is
    skipped.
    """

    def __init__(self, argv_prefix: list[str], env: dict[str, str], pod_id: str = "demo"
                 ) -> None:
        self.argv_prefix = argv_prefix
        self.env = env
        self.ep = AgentEndpoint(host="localhost", pod_id=pod_id,
                                agent_cmd=shlex.join(argv_prefix))
        self.notice: str | None = None

    async def run(self, args: list[str], on_event: EventSink | None = None,
                  timeout_s: float = 60.0) -> AgentResult:
        res = await self._exec([*self.argv_prefix, *args], on_event, timeout_s)
        if res.final is None:
            raise AgentError(f"the agent's answer ended without a result "
                             f"(exit {res.exit_status})")
        return res

    async def run_raw(self, command: str, on_event: EventSink | None = None,
                      timeout_s: float = 60.0) -> AgentResult:
        return await self._exec(["/bin/sh", "-c", command], on_event, timeout_s)

    async def _exec(self, argv: list[str], on_event: EventSink | None,
                    timeout_s: float) -> AgentResult:
        events: list[dict[str, Any]] = []
        final: dict[str, Any] | None = None
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL, env=self.env)
        try:
            async with asyncio.timeout(timeout_s):
                assert proc.stdout is not None
                final = await _consume(proc.stdout, on_event, events)
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise AgentError(f"agent command timed out after {timeout_s:g} s") from None
        return AgentResult(proc.returncode, final, tuple(events))

    async def put_file(self, local: Path, remote: str) -> None:
        import shutil

        await asyncio.to_thread(shutil.copyfile, local, remote)

    def close(self) -> None:
        return None
