"""The real vLLM CPU server's start-up log, read by the agent's phase clock: the phases
its own lines name, in order, up to ready."""

from __future__ import annotations

import pytest

from pod_agent.engines import VLLM
from pod_agent.engines.base import PhaseClock

pytestmark = pytest.mark.vllm


def test_the_real_vllm_log_gives_its_start_up_phases(real_vllm) -> None:
    lines = real_vllm.log.read_text(errors="replace").splitlines()
    clock = PhaseClock(VLLM)
    clock.start(0.0)
    entered: list[str] = []
    for i, line in enumerate(lines):
        clock.line(line, float(i + 1))
        cur = clock.current
        if cur is not None and (not entered or entered[-1] != cur):
            entered.append(cur)
    # what vLLM 0.32 on CPU prints: the model loaded, the KV cache sized, the API up
    assert "loading weights" in entered and "KV-cache init" in entered, entered
    assert entered.index("loading weights") < entered.index("KV-cache init")
    assert entered[-1] == "ready", entered
    assert [ph for ph, _ in clock.last][:2] == ["starting", "loading weights"]
