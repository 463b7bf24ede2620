"""Start-up phases: the agent reads them from its engine's own log lines (vLLM's, SGLang's)
with the time spent in each, keeps the last start's beside the current one, and the
console shows the phase in the slot's row and both starts in its detail."""

from __future__ import annotations

import asyncio
import os
import re
import sys

from rich.console import Console

from console.model import startup
from console.model.snapshot import SlotSnapshot
from console.ui.screens.detail import figures_table
from console.ui.widgets.slots import health_cell
from pod_agent.engines import SGLANG, VLLM
from pod_agent.engines.base import PhaseClock
from pod_agent.launch import SlotCommand
from pod_agent.slots import SlotProcess
from tests.conftest import REPO
from tests.support import procs

# vLLM 0.32's own lines, as its loggers print them (the format strings are in
# vllm/v1/worker/gpu_model_runner.py, model_executor/model_loader, compilation/backends.py,
# v1/core/kv_cache_utils.py, entrypoints' uvicorn start-up)
VLLM_LINES = [
    (0.0, "INFO 12-02 02:00:00 [api_server.py:1900] vLLM API server version 0.32.0"),
    (2.0, "INFO 12-02 02:00:02 [gpu_model_runner.py:2400] Starting to load model Qwen/x..."),
    (30.0, "INFO 12-02 02:00:30 [default_loader.py:268] Loading weights took 27.31 seconds"),
    (31.0, "INFO 12-02 02:00:31 [backends.py:550] Dynamo bytecode transform time: 6.10 s"),
    (45.0, "INFO 12-02 02:00:45 [backends.py:399] Compiling a graph for compile range "
           "(1, 8192) takes 12.02 s"),
    (50.0, "INFO 12-02 02:00:50 [kv_cache_utils.py:1100] GPU KV cache size: 239,424 tokens, "
           "Maximum concurrency for 131,072 tokens per request: 1.83x"),
    (51.0, "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|##########| 67/67"),
    (60.0, "INFO 12-02 02:01:00 [gpu_model_runner.py:3000] Graph capturing finished in 9 secs, "
           "took 0.52 GiB"),
    (63.0, "INFO:     Application startup complete."),
]


def test_vllm_lines_give_each_phase_and_its_time() -> None:
    clock = PhaseClock(VLLM)
    clock.start(0.0)
    for t, line in VLLM_LINES:
        clock.line(line, t)
    assert clock.current == "ready"
    assert clock.times(99.0) == [("starting", 2.0), ("loading weights", 29.0),
                                 ("compiling", 19.0), ("KV-cache init", 1.0),
                                 ("capturing CUDA graphs", 12.0)]
    assert clock.last == clock.times(99.0)
    # a second start: its own phases under way, the last start's kept beside them
    clock.start(100.0)
    clock.line(VLLM_LINES[1][1], 101.0)
    assert clock.current == "loading weights"
    assert clock.times(110.0) == [("starting", 1.0), ("loading weights", 9.0)]
    assert clock.last[1] == ("loading weights", 29.0)


def test_an_eager_vllm_start_compiles_nothing() -> None:
    """``--enforce-eager``: vLLM 0.32 warns that it disables torch.compile, before the
    weights load and again after the KV cache is sized (the real server's lines). That is
    no compiling phase: the phases read on, and the KV-cache init is not undone."""
    warn = ("(APIServer pid=1) WARNING 12-02 08:38:30 [vllm.py:1703] Enforce eager set, "
            "disabling torch.compile, CUDAGraphs, and JIT kernel warmup. This is equivalent "
            "to setting -cc.mode=none -cc.cudagraph_mode=none")
    clock = PhaseClock(VLLM)
    clock.start(0.0)
    for t, line in [(1.0, warn), (2.0, VLLM_LINES[1][1]), (5.0, VLLM_LINES[5][1]),
                    (6.0, warn.replace("APIServer", "EngineCore")), (9.0, VLLM_LINES[-1][1])]:
        clock.line(line, t)
    assert clock.last == [("starting", 2.0), ("loading weights", 3.0), ("KV-cache init", 4.0)]


def test_sglang_lines_give_its_phases() -> None:
    clock = PhaseClock(SGLANG)
    clock.start(0.0)
    for t, line in [(1, "[2026-12-02 02:00:01] Load weight begin. avail mem=79.10 GB"),
                    (20, "[2026-12-02 02:00:20] Load weight end. type=Qwen3ForCausalLM"),
                    (21, "[2026-12-02 02:00:21] KV Cache is allocated. #tokens: 500000"),
                    (22, "[2026-12-02 02:00:22] Memory pool end. avail mem=10.20 GB"),
                    (23, "[2026-12-02 02:00:23] Capture cuda graph begin. This can take up"),
                    (40, "[2026-12-02 02:00:40] The server is fired up and ready to roll!")]:
        clock.line(line, float(t))
    assert clock.last == [("starting", 1.0), ("loading weights", 20.0),
                          ("KV-cache init", 2.0), ("capturing CUDA graphs", 17.0)]


def test_the_agents_slot_reports_phases_while_starting_and_keeps_the_last() -> None:
    """The agent's own slot process over the demo's simulated vLLM (its start-up prints
    vLLM's milestones): phases while it starts, then the whole start kept."""
    port = procs.free_port()
    cmd = SlotCommand(slot="S", argv=(
        sys.executable, "-m", "console.demo.fake_vllm", "serve", "m",
        "--served-model-name", "m", "--host", "127.0.0.1", "--port", str(port),
        "--gpu-memory-utilization", "0.5", "--max-model-len", "4096"),
        env={"DEMO_STARTUP_S": "2", "PYTHONPATH": str(REPO)})

    async def go() -> tuple[list, dict]:
        p = SlotProcess("S", port, os.devnull, grace_s=5.0, engine=VLLM)
        await p.start(cmd, {})
        seen: list = []
        try:
            ok = await p.wait_healthy(60.0, poll_s=0.1) if await _phase_seen(p, seen) else False
            assert ok
            return seen, p.phases_json()
        finally:
            await p.stop()

    seen, done = asyncio.run(go())
    assert "loading weights" in seen
    names = [ph for ph, _ in done["last_phases"]]
    assert names[:2] == ["starting", "loading weights"]
    assert "KV-cache init" in names and "capturing CUDA graphs" in names
    assert done["phase"] == "ready"
    total = sum(s for _, s in done["last_phases"])
    assert 1.0 < total < 30.0


async def _phase_seen(p: SlotProcess, seen: list) -> bool:
    """Wait (generously) until the slot reports a phase past "starting" while starting."""
    for _ in range(600):
        st = p.phases_json()
        if st["phase"] not in (None, "starting") and p.state.state == "starting":
            seen.append(st["phase"])
            return True
        await asyncio.sleep(0.05)
    return False


def test_the_row_and_the_detail_show_the_phase_and_both_starts() -> None:
    agent = {"state": "starting", "phases": [["starting", 2.0], ["loading weights", 42.4]],
             "last_phases": [["starting", 1.0], ["loading weights", 29.0],
                             ["compiling", 19.0], ["ready", 0.0]]}
    assert startup.phase_cell(agent) == "LOAD 42s"
    assert startup.phase_cells({"S": agent, "T": {"state": "ready"}}) == {"S": "LOAD 42s"}
    snap = SlotSnapshot(slot="S", served_model_name="m", port=1, url="u", health="down")
    assert health_cell(snap, "starting", phase="LOAD 42s").plain == "LOAD 42s"
    # every phase and time fits the health cell's nine columns whole
    for ph in startup.SHORT:
        for secs in (0.0, 9.4, 99.4, 99.6, 3599.0, 86400.0):
            cell = startup.phase_cell({"state": "starting", "phases": [[ph, secs]]})
            assert cell is not None and len(cell) <= 9, cell
    assert health_cell(snap, "starting").plain == "◐ START"  # no phase told: as before
    con = Console(width=200, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    con.print(figures_table(snap, 0.0, agent=agent))
    text = con.export_text()
    assert re.search(r"start-up now\s+starting 2s · loading weights 42s", text), text
    assert re.search(r"last start-up\s+starting 1s · loading weights 29s · compiling 19s",
                     text), text
    # garbage from the agent is no row and no crash
    assert startup.detail_rows({"state": "starting", "phases": "lots"}) == [
        ("start-up now", "starting")]
    # issue 47: a dead engine waiting for its restart is not starting
    dead = {"state": "backoff", "phases": [["capturing CUDA graphs", 1.0]]}
    assert startup.detail_rows(dead) == [("attempt that died", "capturing CUDA graphs 1s")]
    assert startup.phase_cell(dead) is None
    assert startup.phase_cell({"state": "starting", "phases": [["x", float("nan")]]}) is None
