"""Resume and bring-up wait for the slot supervisor they have just started (issue 30 #14):
until it listens, the agent's ``status`` answers "the supervisor is not running (No such
file or directory)", which a normal resume printed as if something were wrong. It is said
as what it is — the supervisor starting — and only a supervisor that never starts is an
error, which names its log."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from console.operations.provision import ProvisionConfig, Provisioner
from console.sources.remote import AgentResult, LocalAgentTransport
from tests.conftest import REPO

READY = AgentResult(0, {"kind": "result", "slots": {"A": {"state": "ready"}}})


class StartsLate:
    """The real agent (no supervisor yet) for the first ``late`` status calls, then a
    supervisor whose slots are ready."""

    def __init__(self, home: Path, late: int) -> None:
        env = dict(os.environ, POD_AGENT_HOME=str(home), PYTHONPATH=str(REPO))
        self.agent = LocalAgentTransport([sys.executable, "-m", "pod_agent"], env)
        self.ep = self.agent.ep
        self.late = late
        self.calls = 0

    async def run(self, args: list[str], on_event: Any = None,
                  timeout_s: float = 60.0) -> AgentResult:
        self.calls += 1
        if self.calls <= self.late:
            return await self.agent.run(args, on_event, timeout_s)
        return READY


def _provisioner(said: list[str], wait_s: float = 120.0) -> Provisioner:
    async def no_wait(s: float) -> None:
        return None

    cfg = ProvisionConfig(health_wait_s=wait_s, poll_s=0.0, agent_dir="/workspace/pod-agent")
    return Provisioner(None, [], lambda pod, cmd: None, cfg,  # type: ignore[arg-type]
                       sleep=no_wait, log=said.append)


async def test_a_supervisor_still_starting_is_said_as_such(tmp_path: Path) -> None:
    t = StartsLate(tmp_path / "agent", late=2)
    # what the real agent answers before the supervisor listens
    first = await t.agent.run(["status", "--json"], timeout_s=60)
    assert first.final is not None and first.final.get("supervisor") == "not running"
    said: list[str] = []
    await _provisioner(said).wait_slots(t, None)  # type: ignore[arg-type]
    assert t.calls == 3
    assert said == ["slots: waiting for the slot supervisor to start"], said
    assert not any("not running" in s or "No such file" in s for s in said)


async def test_a_supervisor_that_never_starts_names_its_log(tmp_path: Path) -> None:
    t = StartsLate(tmp_path / "agent", late=10**6)
    said: list[str] = []
    with pytest.raises(TimeoutError, match=r"never started .*pod-agent/serve\.log"):
        await _provisioner(said, wait_s=1.0).wait_slots(t, None)  # type: ignore[arg-type]
    assert said == ["slots: waiting for the slot supervisor to start"], said
