"""Issue 30 #13: the demo's spend is its own. Each ``pod-console demo`` starts a new
simulated pod that has been "running" for 2h17m; booked into the user's spend book, every
start added that run to "today" ($249.9 after 25 starts). A demo's settings say
``demo: true`` and its book is kept in memory only."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.model.snapshot import PodSnapshot
from console.session.spend import SAVE_EVERY_S
from tests.session.world import world

T0 = 1_796_000_000.0
UPTIME = 2 * 3600 + 17 * 60
RATE = 4.0


async def _one_demo_start(tmp_path: Path, t0: float, pod_id: str) -> float:
    """A console on a demo pod that started ``UPTIME`` ago, polled for a few minutes;
    today's spend as its header shows it."""
    w = world(tmp_path, t0, demo=True)
    w.pod.pod = PodSnapshot(pod_id=pod_id, status="RUNNING", cost_per_hr=RATE,
                            started_at=t0 - UPTIME, gpu_name="NVIDIA RTX PRO 6000",
                            gpu_count=2)
    for _ in range(4):  # past the book's save interval
        assert await w.session.poll()
        w.clock.advance(SAVE_EVERY_S)
    state = w.session.state()
    assert state.pod is not None
    return state.pod.spend_today(state.now)


async def test_each_demo_start_books_only_its_own_pod(tmp_path: Path) -> None:
    own = (UPTIME + 4 * SAVE_EVERY_S) / 3600 * RATE  # up to the last clock reading
    first = await _one_demo_start(tmp_path, T0, "emu0001x1111")
    assert first == pytest.approx(own, rel=1e-3)
    # the next start, ten minutes later, on its own new simulated pod
    second = await _one_demo_start(tmp_path, T0 + 600, "emu0001x2222")
    assert second == pytest.approx(own, rel=1e-3), "the earlier demo's pod was counted"
    assert not (tmp_path / "state" / "spend.json").exists()


async def test_a_real_deployment_still_keeps_its_book(tmp_path: Path) -> None:
    """The same two starts on a real deployment: the morning's run is remembered."""
    w = world(tmp_path, T0)
    assert w.settings.spend_path == tmp_path / "state" / "spend.json"
    w.pod.pod = PodSnapshot(pod_id="p1", status="RUNNING", cost_per_hr=RATE,
                            started_at=T0 - 3600)
    assert await w.session.poll()
    assert (tmp_path / "state" / "spend.json").exists()
