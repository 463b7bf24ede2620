"""``--from``/``--to``/``--at`` of ``record export`` and ``replay``: what a time means."""

from __future__ import annotations

import datetime as dt

import pytest

from console.session.record.when import parse_when

UTC = dt.UTC
NOW = dt.datetime(2026, 12, 2, 3, 30, tzinfo=UTC).timestamp()


def test_times_a_person_types() -> None:
    assert parse_when("3m ago", NOW) == NOW - 180
    assert parse_when("2h", NOW) == NOW - 7200
    assert parse_when("90s ago", NOW) == NOW - 90
    assert parse_when("03:10", NOW, UTC) == NOW - 20 * 60
    assert parse_when("04:00", NOW, UTC) == NOW - 23.5 * 3600  # still to come: yesterday's
    assert parse_when("2026-12-02T01:00:00+00:00", NOW) == NOW - 2.5 * 3600
    assert parse_when(str(NOW - 5), NOW) == NOW - 5


@pytest.mark.parametrize("text", ["soon", "25:00", "nan", "inf", ""])
def test_what_is_not_a_time_says_so(text: str) -> None:
    with pytest.raises(ValueError, match="not a"):
        parse_when(text, NOW, UTC)
