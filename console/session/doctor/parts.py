"""What the doctor's checks read: the settings, the deployment, the agent's transport and
one HTTP client, and the answers two checks both need, asked once and shared."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from msgspec import Struct, field

if TYPE_CHECKING:
    from console.config.settings import Settings
    from console.session.deployment import Deployment
    from console.sources.agent_client import Transport
    from console.sources.collect.http import HttpClient
    from console.sources.collect.slot import SlotProbe

from console.session.doctor.report import Verdict


class Doctor(Struct):
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


class Check(Struct, frozen=True):
    id: str
    timeout_s: float
    run: CheckFn
    hang: str
    """The next step when it runs out of time."""
    needs: Literal["config", "profiles"] = "config"
    """What must have loaded for it to mean anything."""


