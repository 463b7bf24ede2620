"""Issue 48: a benchmark's record says where it ran as the console shows it, at any speed.

``B`` read the pod again for the record (``deployment_ops.pod_facts``); on a loaded
machine the agent's status did not come back within the read's timeout, and the record
said ``"p2p": "unknown"`` — with no word of why — while the header above it showed
the pod's P2P from the poll before. Now a read without the agent's answer falls back on
the last reading of the same pod in which the agent answered (the session's, the one on
screen), and what is still unknown says why. The slots' and pod's readings are the
session world's; the benchmark's own read goes through the real pod collector, whose
agent connection times out (``AgentError``, as the SSH transport raises it)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from console.config.settings import PodSettings, Settings
from console.model.snapshot import StopPlan
from console.session import deployment_ops
from console.session.deployment import Deployment, open_deployment
from console.sources.remote import AgentEndpoint, AgentError, AgentResult
from tests.conftest import PROFILES
from tests.session.world import world

T0 = 1_796_000_000.0


class TimingOut:
    """The agent's connection on a loaded machine: every command times out."""

    ep = AgentEndpoint(host="127.0.0.1", pod_id="p1")

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    async def run(self, args: list[str], on_event=None, timeout_s: float = 60.0
                  ) -> AgentResult:
        self.asked.append(args)
        raise AgentError(f"agent command timed out after {timeout_s:g} s")

    async def run_raw(self, command: str, on_event=None, timeout_s: float = 60.0
                      ) -> AgentResult:
        raise AgentError(f"agent command timed out after {timeout_s:g} s")

    async def put_file(self, local: Path, remote: str) -> None:
        raise AgentError("not here")

    def close(self) -> None:
        pass


def _deployment(tmp: Path, machine_id: str = "p1") -> tuple[Deployment, TimingOut]:
    settings = Settings(profiles_dir=PROFILES, state_dir=tmp / "state",
                        pod=PodSettings(machine_id=machine_id, host="127.0.0.1"))
    dep = open_deployment(settings, lambda: T0)
    transport = TimingOut()
    dep.wire(transport=transport)  # type: ignore[arg-type]
    return dep, transport


async def test_a_read_the_agent_does_not_answer_keeps_what_the_console_shows(
        tmp_path: Path) -> None:
    dep, transport = _deployment(tmp_path)
    w = world(tmp_path, T0, deployment=dep, pod=PodSettings(machine_id="p1"))
    plan = StopPlan.parse({"now": T0, "stop_in_s": 3600.0}, T0)
    w.pod.pod = msgspec.structs.replace(w.pod.pod, p2p_disabled=False, stop_plan=plan,
                                    watchdog_armed=True)
    assert await w.session.poll()  # the agent answers this one: on screen, P2P ok
    w.clock.advance(30)
    facts = await deployment_ops.pod_facts(dep)
    assert transport.asked and transport.asked[-1][0] == "status"  # it did read again
    assert (facts.pod_id, facts.p2p, facts.p2p_unknown) == ("p1", "ok", None), facts
    assert facts.gpu_type == "NVIDIA RTX PRO 6000" and facts.gpu_count == 2
    assert facts.read_at == T0  # the reading it comes from, whole: the session's


async def test_what_nothing_tells_is_unknown_and_says_why(tmp_path: Path) -> None:
    # no answer of the agent held (a console that has not read it yet)
    dep, _ = _deployment(tmp_path)
    facts = await deployment_ops.pod_facts(dep)
    assert facts.p2p == "unknown"
    assert facts.p2p_unknown is not None and "timed out" in facts.p2p_unknown, facts
    # another pod's answer says nothing of this one: the console moved (a fallback)
    other, _ = _deployment(tmp_path / "o", machine_id="p2")
    w = world(tmp_path / "w", T0, deployment=other, pod=PodSettings(machine_id="p2"))
    w.pod.pod = msgspec.structs.replace(w.pod.pod, p2p_disabled=False,
                                    stop_plan=StopPlan.parse({"now": T0}, T0))
    assert await w.session.poll()
    assert w.session.cycle.pod_reads.agent_seen is not None  # p1's, held
    facts = await deployment_ops.pod_facts(other)
    assert facts.p2p == "unknown" and "timed out" in (facts.p2p_unknown or ""), facts
    from console.operations.benchmark.record import lines

    rec = {"slot": "FLASH", "served_model_name": "m", "via": "direct",
           "vllm_version": None, "duration_s": 1.0, "started_at": "t",
           "pod": {"id": facts.pod_id, "p2p": facts.p2p, "p2p_unknown": facts.p2p_unknown},
           "knobs": {"warmup": 0, "runs": 1, "max_tokens": 8}, "configs": []}
    assert "P2P unknown (the agent did not answer: agent command timed out" in \
        lines(rec)[0]
