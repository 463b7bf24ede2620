"""One demo deployment (real agent processes, simulated GPUs) shared by the TUI tests."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator

import pytest

from console.demo.deployment import DemoDeployment
from tests.support.waits import PATIENCE, holds_within


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoDeployment]:
    d = DemoDeployment(workdir=tmp_path_factory.mktemp("demo"), seed=7, startup_s=1.0,
                       rate=2.0)
    d.start()
    try:
        yield d
    finally:
        d._stop_all()


def live(app) -> bool:
    """Every slot up with figures, and pod state known."""
    return (app.snapshot is not None and app.pod is not None
            and all(s.health == "up" and s.figures for s in app.snapshot.slots))


def why_not_live(app) -> str:
    """What ``live`` is still waiting for: the message of a failed wait."""
    snap, pod = app.snapshot, app.pod
    slots = [] if snap is None else [
        (s.slot, s.health, s.health_detail, bool(s.figures), s.error) for s in snap.slots]
    return (f"snapshot={'none' if snap is None else 'yes'} pod="
            f"{None if pod is None else (pod.status, pod.agent_error)} slots={slots}")


def demo_slots(demo) -> dict[str, tuple[int, str]]:
    """The running pod's slots: name → (port on this machine, served model name)."""
    prof = demo.profiles()[0].profile
    return {n: (s.port, s.served_model_name) for n, s in prof.slots.items()}


def wait_slots_up(demo, timeout: float = 60.0) -> None:
    """Until every slot of the demo's pod answers /health (its simulated start-up done)."""
    import httpx

    def up(port: int) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    deadline = time.monotonic() + timeout * PATIENCE
    for port, _ in demo_slots(demo).values():
        assert holds_within(functools.partial(up, port), deadline - time.monotonic()), \
            f"slot on port {port} not up"


class Requests:
    """Chat completions to every slot of the demo's pod, one after another per slot, for
    as long as the block runs: a window of any length holds finished requests of each
    slot (the demo's own simulated traffic is random and may hold none). ``wait_each``
    waits until each slot has finished some."""

    def __init__(self, demo, max_tokens: int = 4, per_slot: int = 1) -> None:
        """``per_slot``: clients per slot at once (a simulated TTFT near a second lets one
        client finish about one request a second: a short window needs several)."""
        import threading

        self.slots = demo_slots(demo)
        self.max_tokens = max_tokens
        self.done = dict.fromkeys(self.slots, 0)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(n,), daemon=True)
                         for n in self.slots for _ in range(per_slot)]

    def _run(self, slot: str) -> None:
        import httpx

        port, model = self.slots[slot]
        with httpx.Client(timeout=30) as c:
            while not self._stop.is_set():
                try:
                    r = c.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                               json={"model": model, "max_tokens": self.max_tokens,
                                     "messages": [{"role": "user", "content": "hi"}]})
                    if r.status_code == 200:
                        self.done[slot] += 1  # one thread's += at a time: the GIL
                    else:
                        self.errors.append(f"{slot}: HTTP {r.status_code}")
                except httpx.HTTPError as exc:
                    self.errors.append(f"{slot}: {exc}")
                    self._stop.wait(0.1)

    def wait_each(self, n: int = 1, timeout: float = 30.0) -> None:
        assert holds_within(lambda: min(self.done.values()) >= n, timeout * PATIENCE), \
            (self.done, self.errors[-3:])

    def __enter__(self) -> Requests:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)
