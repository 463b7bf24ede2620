"""Start-up phases lag (issue 42): 61 s of torch.compile warm-up showed as ``LOAD 62s``,
the phase cell ran ~10 s behind the agent (the pod is read every 10 s, the cell showed
the reading's seconds), and a 4 s KV-cache phase never appeared. Now the pod is read
every few seconds while a slot starts, the cell counts on from the reading, and every
phase the agent lists is said in the action log as it ends, however short.

The session on an injected clock; the agent's ``status`` → ``slots`` as it words it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msgspec.structs import replace

from console.session.session import POD_POLL_S, STARTING_POD_POLL_S
from tests.session.world import World, world

T0 = 1_800_000_000.0


def agent(w: World, **q27: Any) -> None:
    w.pod.pod = replace(w.pod.pod, agent_slots={
        "FLASH": {"state": "ready", "started_at": T0 - 900, "phases": [["starting", 1.0]],
                  "last_phases": [["starting", 1.0], ["loading weights", 30.0]]},
        "Q27": {"started_at": T0, **q27}})


async def poll(w: World, after: float) -> None:
    w.clock.advance(after)
    assert await w.session.poll()


def log(w: World) -> list[str]:
    return [t for t, _ in w.notes if "start-up" in t]


async def test_the_phase_cell_follows_the_agent_and_every_phase_is_logged(
        tmp_path: Path) -> None:
    assert STARTING_POD_POLL_S < POD_POLL_S
    w = world(tmp_path, T0)
    agent(w, state="starting", phases=[["starting", 1.0], ["loading weights", 5.0]])
    await poll(w, 0.0)
    assert w.session.state().phases == {"Q27": "LOAD 5s"}
    reads = w.pod.calls
    await poll(w, 2.0)  # not read again yet: the cell counts on from the reading
    assert w.pod.calls == reads and w.session.state().phases == {"Q27": "LOAD 7s"}
    # between two readings: loading ends, a 4 s KV-cache phase comes and goes
    agent(w, state="starting", phases=[["starting", 1.0], ["loading weights", 9.0],
                                       ["KV-cache init", 4.0], ["compiling", 0.5]])
    await poll(w, STARTING_POD_POLL_S - 2.0)  # read again sooner than every 10 s
    assert w.pod.calls == reads + 1
    assert w.session.state().phases == {"Q27": "COMP 0s"}
    # (what had ended before the first reading is in the line that ends the start)
    assert log(w) == ["Q27 start-up: loading weights 9s",
                      "Q27 start-up: KV-cache init 4s"], w.notes
    agent(w, state="ready", phases=[["starting", 1.0], ["loading weights", 9.0],
                                    ["KV-cache init", 4.0], ["compiling", 61.0]],
          last_phases=[["starting", 1.0], ["loading weights", 9.0],
                       ["KV-cache init", 4.0], ["compiling", 61.0]])
    await poll(w, STARTING_POD_POLL_S)
    assert w.session.state().phases == {}
    assert log(w)[2:] == ["Q27 start-up: compiling 61s",
                          "Q27 start-up done in 75s: starting 1s · loading weights 9s · "
                          "KV-cache init 4s · compiling 61s"], w.notes
    # nobody starting: the pod at its own cadence again, nothing more said
    reads = w.pod.calls
    await poll(w, STARTING_POD_POLL_S)
    assert w.pod.calls == reads and len(log(w)) == 4
