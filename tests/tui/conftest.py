"""One demo deployment (real agent processes, simulated GPUs) shared by the TUI tests."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from console.demo.deployment import DemoDeployment


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoDeployment]:
    d = DemoDeployment(workdir=tmp_path_factory.mktemp("demo"), seed=7, startup_s=1.0,
                       rate=2.0)
    d.start()
    try:
        yield d
    finally:
        d._stop_all()


PATIENCE = 3.0
"""Every wait is a condition polled with a generous limit: the limits written in the
tests are what a quiet machine needs, times this (CI has 2 cores, sometimes shared)."""


async def wait_for(pilot, cond, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout * PATIENCE
    while time.monotonic() < deadline:
        if cond():
            return True
        await pilot.pause(0.1)
    return False


def live(app) -> bool:
    """Every slot up with figures, and pod state known."""
    return (app.snapshot is not None and app.pod is not None
            and all(s.health == "up" and s.figures for s in app.snapshot.slots))
