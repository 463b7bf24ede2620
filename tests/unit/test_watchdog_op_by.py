"""``w s y`` tells the agent who asked (``user@host``, as the audit names them): the
agent's own record of the stop then names the person, not the pod's user ("root", the
agent CLI's default), and the run's "by alice@laptop" holds from either record."""

from __future__ import annotations

import asyncio
import getpass
import socket
from types import SimpleNamespace
from typing import Any

from console.operations.ops import watchdog


class Agent:
    configured = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    async def request(self, req: Any, on_event: Any = None) -> Any:
        # what the pod's `pod-agent` is run with: the subcommand words, then the rest
        words = req.argv()
        self.calls.append((words[1], [w for w in words[2:] if w.startswith("--by")]))
        return SimpleNamespace(ok=True, final={"message": "stopping"})


def test_stop_now_names_who_asked() -> None:
    agent = Agent()
    deps = SimpleNamespace(agent=agent)
    out = asyncio.run(watchdog.handler(deps, {"cmd": "stop-now"},  # type: ignore[arg-type]
                                       lambda *a: None))
    assert out.ok
    (cmd, extra), = agent.calls
    assert cmd == "stop-now" and extra == [f"--by={getpass.getuser()}@{socket.gethostname()}"]
    asyncio.run(watchdog.handler(deps, {"cmd": "stop-now", "by": "alice@laptop"},  # type: ignore[arg-type]
                                 lambda *a: None))
    assert agent.calls[-1][1] == ["--by=alice@laptop"]
    # arm/disarm carry nothing extra
    asyncio.run(watchdog.handler(deps, {"cmd": "arm"}, lambda *a: None))  # type: ignore[arg-type]
    assert agent.calls[-1] == ("arm", [])
