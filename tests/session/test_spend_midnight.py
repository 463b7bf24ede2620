"""Local midnight in the profile's zone (Asia/Seoul for the test profile) on a machine
whose own zone is another (UTC here): today's spend starts again at once, and the month
still counts yesterday's runs. Before, the day started at the machine's midnight, and
today's earlier runs were added up at the pod poll and then copied for up to 10 s."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from console.session.judging import judge_once
from console.session.session import POD_POLL_S
from console.session.spend import SpendBook
from tests.session.world import world

SEOUL = ZoneInfo("Asia/Seoul")
MIDNIGHT = dt.datetime(2026, 11, 30, tzinfo=SEOUL).timestamp()  # Monday 00:00 in Seoul
H = 3600.0
RATE = 4.0  # $/h


@pytest.fixture
def machine_in_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


async def poll_at(w, t: float) -> None:
    w.clock.t = t
    assert await w.session.poll()


async def test_midnight_in_the_profiles_zone_starts_today_again(tmp_path: Path,
                                                                machine_in_utc) -> None:
    w = world(tmp_path, MIDNIGHT - 4 * H)
    # run A: 20:00-22:00 Sunday (Seoul), then the pod stopped
    w.pod.run(MIDNIGHT - 4 * H)
    await poll_at(w, MIDNIGHT - 4 * H)
    await poll_at(w, MIDNIGHT - 2 * H)
    w.pod.run(MIDNIGHT - 4 * H, status="EXITED")
    await poll_at(w, MIDNIGHT - 2 * H + POD_POLL_S)
    # run B: resumed at 23:30, still running past midnight
    w.pod.run(MIDNIGHT - 0.5 * H)
    await poll_at(w, MIDNIGHT - 0.5 * H)
    await poll_at(w, MIDNIGHT - 5)  # the last pod poll before midnight (23:59:55)
    before = w.session.state()
    assert before.pod is not None
    assert before.pod.spend_today(before.now) == pytest.approx(2 * RATE + (0.5 * H - 5)
                                                               / H * RATE)
    # 00:00:01: a poll of the slots only (the pod's next turn is at 00:00:05)
    pod_reads = w.pod.calls
    await poll_at(w, MIDNIGHT + 1)
    assert w.pod.calls == pod_reads
    st = w.session.state()
    assert st.pod is not None
    assert st.pod.spend_today(st.now) == pytest.approx(1 / H * RATE)  # one second of B
    assert st.spend_month == pytest.approx(2 * RATE + (0.5 * H + 1) / H * RATE)
    # no stop known (no agent says one): nothing to project to (issue 30, finding 6)
    assert st.pod.projected_today(st.now) == st.pod.spend_today(st.now)
    # the pod's next reading changes none of it
    await poll_at(w, MIDNIGHT + POD_POLL_S)
    assert w.pod.calls == pod_reads + 1
    st = w.session.state()
    assert st.pod is not None
    assert st.pod.spend_today(st.now) == pytest.approx(POD_POLL_S / H * RATE)
    assert st.spend_month == pytest.approx(2 * RATE + (0.5 * H + POD_POLL_S) / H * RATE)


async def test_status_and_the_fleet_judge_the_same_way(tmp_path: Path,
                                                       machine_in_utc) -> None:
    """``status`` and a fleet row read the console's spend book through ``judge_once``:
    the same day, the same month, the same alert rules."""
    w = world(tmp_path, MIDNIGHT - 3 * H)
    w.pod.run(MIDNIGHT - 3 * H)
    await poll_at(w, MIDNIGHT - 3 * H)
    await poll_at(w, MIDNIGHT - 2 * H)  # an hour on Sunday night, saved in the book
    w.pod.run(MIDNIGHT + H)  # resumed at 01:00
    await poll_at(w, MIDNIGHT + 2 * H)
    st = w.session.state()
    assert SpendBook(w.settings.state_dir / "spend.json").runs  # saved as it went
    judged = await judge_once(st.snapshot, w.pod.pod, w.ctx.profile, w.settings,
                              MIDNIGHT + 2 * H)
    assert judged.pod is not None and st.pod is not None
    assert judged.pod.spend_today(MIDNIGHT + 2 * H) == pytest.approx(RATE) \
        == st.pod.spend_today(st.now)
    assert judged.spend_month == pytest.approx(2 * RATE) == st.spend_month
    assert {c.key for c in judged.conditions} == {a.key for a in st.alerts}
