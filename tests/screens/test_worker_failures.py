"""A poll that raises is shown — time and reason — on the main screen and on the wall,
and polling goes on (before, the worker's exception vanished and a wall display froze
while looking alive)."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.ui.widgets.header import PodHeader
from tests.support.static_app import build
from tests.support.waits import wait_for


class Flaky:
    """Wraps the static poller: raises while ``broken`` is set."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.targets = inner.targets
        self.prometheus_url = None
        self.broken = True

    async def poll(self):
        if self.broken:
            raise RuntimeError("exposition parser exploded")
        return await self.inner.poll()

    async def aclose(self) -> None:
        return None


def _header_text(app) -> str:
    return str(app.screen.query_one(PodHeader).render())


@pytest.mark.parametrize("wall", [False, True])
async def test_a_failing_poll_is_on_screen_and_polling_goes_on(tmp_path: Path,
                                                               wall: bool) -> None:
    app = build(tmp_path, wall=wall)
    flaky = Flaky(app.ctx.poller)
    app.ctx.poller = flaky
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.poll_failure is not None, 20)
        assert await wait_for(pilot, lambda: "POLL FAILED" in _header_text(app), 20)
        assert "exposition parser exploded" in _header_text(app)
        assert any("poll failed: RuntimeError" in t for _, t, _ in app.log_lines)
        flaky.broken = False  # the source recovers: the next tick polls again
        assert await wait_for(pilot, lambda: app.poll_failure is None, 30)
        assert await wait_for(pilot, lambda: "POLL FAILED" not in _header_text(app), 20)


async def test_a_slow_webhook_does_not_hold_the_polls(tmp_path: Path) -> None:
    # a webhook called inside the poll loop held every poll for as long as it dripped:
    # slots showed DOWN for 90 s while /health answered
    from pydantic import SecretStr

    from tests.unit.test_hostile_inputs import Hostile

    srv = Hostile("drip")
    try:
        app = build(tmp_path, down_slot=True)  # a slot down: an alert, so a webhook call
        app.ctx.settings.webhook_url = SecretStr(f"http://127.0.0.1:{srv.port}/hook")
        app.ctx.settings.refresh_s = 1.0
        async with app.run_test(size=(160, 48)) as pilot:
            def webhooks() -> list:
                return [w for w in app.workers if w.group == "webhook" and w.is_running]

            assert await wait_for(pilot, lambda: bool(webhooks()), 20)
            # the relation, at any speed: a poll completes while one webhook call is held
            # (the same call running before and after it). Each call ends at its timeout
            # (4 s at this refresh), and a loaded machine may fit no poll in one; the next
            # poll retries the undelivered alert, another held call, another chance. A
            # poll held by the webhook would complete only once its call had ended.
            held: dict[object, int] = {}  # a call seen running → the polls when first seen

            def a_poll_passed_a_held_call() -> bool:
                running = webhooks()
                for w in list(held):
                    if w not in running:
                        del held[w]
                for w in running:
                    held.setdefault(w, app.polls)
                return any(app.polls > held[w] for w in running)

            assert await wait_for(pilot, a_poll_passed_a_held_call, 60), app.polls
            seen = app.polls
            assert await wait_for(pilot, lambda: app.polls >= seen + 1, 20)  # and after it
    finally:
        srv.close()
