"""Today's spend survives a stop and a resume, and a restart of the console."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from msgspec.structs import replace

from console.model.snapshot import PodSnapshot
from console.session.spend import SpendBook

UTC = dt.UTC
DAY = dt.datetime(2026, 11, 30, tzinfo=UTC).timestamp()  # local midnight (UTC here)
H = 3600.0


def pod(started: float, status: str = "RUNNING") -> PodSnapshot:
    return PodSnapshot(pod_id="p1", status=status, cost_per_hr=4.0, started_at=started)


def test_a_resume_keeps_the_mornings_run(tmp_path: Path) -> None:
    book = SpendBook(tmp_path / "spend.json")
    morning = pod(DAY + 8 * H)
    for t in (DAY + 8 * H, DAY + 9 * H, DAY + 10 * H):  # polls while it ran, 08:00–10:00
        book.observe(morning, t)
    stopped = replace(morning, status="EXITED", cost_per_hr=0.0)
    book.observe(stopped, DAY + 11 * H)
    assert book.earlier_today(stopped, DAY + 11 * H, UTC) == 8.0
    assert replace(stopped, spent_earlier_today=8.0).spend_today(DAY + 11 * H, UTC) == 8.0

    resumed = pod(DAY + 12 * H)  # same pod, a new start
    now = DAY + 13 * H
    book.observe(resumed, now)
    earlier = book.earlier_today(resumed, now, UTC)
    assert earlier == 8.0  # the current run is the pod's own figure, not counted twice
    assert resumed.spend_today(now, UTC) == 4.0  # what the header showed before: reset
    assert replace(resumed, spent_earlier_today=earlier).spend_today(now, UTC) == 12.0


def test_yesterdays_part_of_a_run_is_not_today(tmp_path: Path) -> None:
    book = SpendBook(None)
    night = pod(DAY - 2 * H)  # 22:00 yesterday
    book.observe(night, DAY - 2 * H)
    book.observe(night, DAY + 1 * H)
    book.observe(replace(night, status="EXITED"), DAY + 2 * H)
    assert book.earlier_today(replace(night, status="EXITED"), DAY + 2 * H, UTC) == 4.0


def test_the_book_outlives_the_console_and_a_broken_one_starts_afresh(tmp_path: Path) -> None:
    path = tmp_path / "spend.json"
    book = SpendBook(path)
    p = pod(DAY + 8 * H)
    book.observe(p, DAY + 8 * H)
    assert book.due(DAY + 8 * H)  # a new run is saved at once
    book.save(DAY + 8 * H)
    book.observe(p, DAY + 9 * H)
    assert not book.due(DAY + 8 * H + 30)  # then once a minute
    book.save(DAY + 9 * H)
    again = SpendBook(path)
    assert again.earlier_today(None, DAY + 10 * H, UTC) == 4.0
    assert json.loads(path.read_text())[0]["pod_id"] == "p1"

    path.write_text("{not json")
    assert SpendBook(path).runs == {}
    path.write_text('[{"pod_id": "p1"}]')
    assert SpendBook(path).runs == {}


def test_a_failed_save_is_retried_once_a_minute_not_every_poll(tmp_path: Path) -> None:
    book = SpendBook(tmp_path / "spend.json")
    book.observe(pod(DAY + 8 * H), DAY + 8 * H)
    assert book.due(DAY + 8 * H)
    book.postpone(DAY + 8 * H)  # the save raised (full disk)
    assert not book.due(DAY + 8 * H + 5)
    assert book.due(DAY + 8 * H + 61)  # the new run is still unsaved: tried again
