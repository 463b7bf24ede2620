"""The demo with a profile of one vLLM slot and one SGLang slot: the agent starts each
with its engine's command line (the simulated SGLang speaks SGLang's exposition), and
the console shows both, each with its engine's figures, in the table and the detail."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from console.commands.tui_cmd import demo_context
from console.demo.deployment import DemoDeployment
from console.ui.app import make_app
from tests.conftest import FIXTURES
from tests.support.waits import wait_for
from tests.tui.conftest import live, why_not_live


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoDeployment]:
    d = DemoDeployment(workdir=tmp_path_factory.mktemp("demo-engines"), seed=7,
                       startup_s=1.0, rate=2.0, profiles_src=FIXTURES / "profiles-engines")
    d.start()
    try:
        yield d
    finally:
        d._stop_all()


async def test_the_demo_runs_a_vllm_and_an_sglang_slot_side_by_side(mixed) -> None:
    app = make_app(demo_context(mixed, 1.0, stop_demo_on_exit=False))
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: live(app), 60), why_not_live(app)

        def both_windowed() -> bool:
            snap = app.snapshot
            return snap is not None and all(
                s.figures is not None and s.figures.window_s and s.figures.generation_tps
                for s in snap.slots)
        assert await wait_for(pilot, both_windowed, 60)
        by = {s.slot: s for s in app.snapshot.slots}
        sg, vl = by["SG"], by["VL"]
        assert (sg.engine, vl.engine) == ("sglang", "vllm")
        assert sg.figures.engine == "sglang" and vl.figures.engine == "vllm"
        # SGLang's figures: KV in tokens, acceptance length from its counters, no rate
        assert sg.figures.kv_available_tokens is not None
        assert sg.figures.mean_acceptance_length and sg.figures.mean_acceptance_length > 1
        assert sg.figures.acceptance_rate is None and sg.figures.per_position == ()
        assert vl.figures.acceptance_rate is not None and vl.figures.kv_available_tokens is None
        # the agent ran each with its engine's command line, phases read from its log
        def phases_kept() -> bool:  # the agent marks ready on its own /health poll
            agent = app.pod.agent_slots if app.pod else {}
            return all((agent.get(n) or {}).get("last_phases") for n in ("SG", "VL"))
        assert await wait_for(pilot, phases_kept, 60), app.pod.agent_slots
        agent = app.pod.agent_slots
        assert agent["SG"]["engine"] == "sglang" and agent["VL"]["engine"] == "vllm"
        for name in ("SG", "VL"):
            phases = [p[0] for p in agent[name]["last_phases"]]
            assert phases[:2] == ["starting", "loading weights"], (name, phases)
            assert "KV-cache init" in phases and "capturing CUDA graphs" in phases
