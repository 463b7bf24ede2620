"""One owner of the refresh rate: ``+``/``-`` change it in the session, and everything
that follows from it is derived from it where it is used (issue 27: the plots kept half
their hour, and the timeouts, backfill step and webhook deadline kept the start value)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from console.config import defaults
from console.session.pacing import next_refresh
from tests.session.world import world

T0 = 1_800_000_000.0
HOUR = 3600.0


def span(w, slot: str = "FLASH") -> float:
    pts = w.ctx.history.series(slot, "kv_cache_usage").points
    return pts[-1][0] - pts[0][0]


async def run_for(w, seconds: float) -> None:
    """Poll every refresh for ``seconds`` of the clock."""
    for _ in range(round(seconds / w.session.refresh_s)):
        w.clock.advance(w.session.refresh_s)
        assert await w.session.poll()


async def test_plus_from_2s_to_1s_keeps_60_minutes_of_plot_history(tmp_path: Path) -> None:
    w = world(tmp_path, T0, refresh_s=2.0, history_s=HOUR)
    await run_for(w, 600)
    assert w.session.step_refresh(+1) == 1.0  # "+"
    await run_for(w, HOUR + 60)
    # an hour at one point a second: the whole window, not the 30 minutes that a buffer
    # sized for 2 s (1801 points) holds
    assert span(w) >= HOUR - 1, span(w) / 60
    assert len(w.ctx.history.series("FLASH", "kv_cache_usage")) >= HOUR
    assert w.session.step_refresh(-1) == 2.0  # "-": the hour is kept, nothing is cut
    assert span(w) >= HOUR - 1
    await run_for(w, 600)
    assert span(w) >= HOUR - 2


async def test_what_follows_from_the_refresh_is_derived_when_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[float] = []

    async def post(url, payload, timeout_s):
        sent.append(timeout_s)
        return None

    monkeypatch.setattr("console.session.outbox.post", post)
    w = world(tmp_path, T0, refresh_s=10.0, webhook_url=SecretStr("http://127.0.0.1:9/h"))
    s = w.session
    assert (s.refresh_s, s.view.refresh_s) == (10.0, 10.0)
    assert s.step_refresh(+1) == 5.0 and s.step_refresh(+1) == 2.0
    assert w.settings.refresh_s == 10.0  # where it started; the session owns it now
    # applied to the sources in use at once, and again before every poll
    assert w.slots.timeout_s == defaults.request_timeout_s(2.0) < 2.0
    assert w.pod.timeout_s == max(2.0, defaults.request_timeout_s(2.0) * 2)
    assert s.state().view.refresh_s == 2.0
    assert s.pacing.backfill_step_s == max(2.0, HOUR / 240)
    assert s.pacing.fleet_timeout_s == 2 * max(5.0, 4.0)
    w.slots.down = {"Q27"}  # an alert: the webhook is called with the deadline of now
    assert await s.poll()
    await s.settle()
    assert sent == [min(5.0, 2.0 * 4)]
    assert s.step_refresh(+1) == 1.0
    w.slots.timeout_s = 99.0  # a fallback's new poller starts from its own copy...
    w.slots.down = set()
    w.clock.advance(1)
    assert await s.poll()  # ...and polls with the session's
    await s.settle()
    assert w.slots.timeout_s == defaults.request_timeout_s(1.0)
    assert sent == [5.0, 4.0]  # at 10 s the start value gave 5 s for ever
    assert s.pacing.backfill_step_s == HOUR / 240


def test_the_refresh_steps() -> None:
    assert next_refresh(2.0, +1) == 1.0 and next_refresh(1.0, +1) == 1.0
    assert next_refresh(2.0, -1) == 5.0 and next_refresh(30.0, -1) == 30.0
    assert next_refresh(3.0, +1) == 2.0 and next_refresh(3.0, -1) == 5.0


async def test_a_staged_start_keeps_the_chosen_refresh_when_its_context_comes(
        tmp_path: Path) -> None:
    from console.session.session import Session
    from console.session.view import ConsoleView, StagedStart

    w = world(tmp_path, T0, refresh_s=2.0)
    view = ConsoleView(profile_name="rtx6000-2x", targets=w.slots.targets, read_only=False,
                       demo=False, refresh_s=2.0, plot_refresh_s=300.0)
    staged = StagedStart(view=view, poller=w.slots,  # type: ignore[arg-type]
                         history=w.ctx.history, finish=lambda p, h: w.ctx)
    s = Session(staged, clock=w.clock)
    assert await s.poll() and s.state().pod is None and not s.state().alerts
    assert s.step_refresh(+1) == 1.0  # pressed while the context loads
    assert await s.adopt(w.ctx) is False  # the same poller carries over
    assert s.refresh_s == 1.0 and s.view.refresh_s == 1.0


async def test_the_pods_gpu_source_follows_the_refresh(tmp_path: Path) -> None:
    """The pod's GPU source (``gpu_metrics_url`` or Prometheus) is made with the refresh
    of the start; its request timeout is the one of the refresh in force, set again with
    the pod collector's before every poll (it kept the start value once)."""
    from console.sources.collect.gpu_metrics import GpuMetrics
    from console.sources.collect.http import HttpClient

    w = world(tmp_path, T0, refresh_s=10.0)
    client = HttpClient()
    gpus = GpuMetrics(client, max(2.0, defaults.request_timeout_s(10.0) * 2),
                      url="http://127.0.0.1:9/metrics")
    w.pod.gpu_metrics = gpus  # type: ignore[assignment]
    try:
        assert w.session.step_refresh(+1) == 5.0 and w.session.step_refresh(+1) == 2.0
        assert gpus.timeout_s == w.pod.timeout_s == max(2.0, defaults.request_timeout_s(2.0) * 2)
    finally:
        await client.aclose()
