"""The replay cursor (``console/session/record/cursor.py``) on a tape of states built
here, on an injected clock: play at 1×/10×/60×, pause, step, jump by a duration or to a
clock time, markers, bad input, and a tape that grows under it (the live pause)."""

from __future__ import annotations

import datetime as dt

import pytest

from console.model.history import History
from console.session.record.cursor import ReplayCursor, WhenError, parse_duration, parse_when
from console.session.record.tape import Marker, MemoryTape
from console.session.view import ConsoleState, ConsoleView

T0 = 1_795_000_000.0  # 2026-11-18 11:06:40 UTC
UTC = dt.UTC
VIEW = ConsoleView(profile_name="p", targets=(), read_only=False, demo=False, refresh_s=2.0,
                   plot_refresh_s=2.0)


def state(t: float) -> ConsoleState:
    return ConsoleState(view=VIEW, ready=True, now=t, snapshot=None, pod=None, alerts=(),
                        stale=None, history=History(), allowed=frozenset(), polled_at=t)


def tape(n: int = 100, every: float = 2.0, markers: tuple[Marker, ...] = ()) -> MemoryTape:
    return MemoryTape([state(T0 + i * every) for i in range(n)], markers)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_play_follows_the_clock_at_each_speed_and_pauses_at_the_end() -> None:
    clock = Clock()
    c = ReplayCursor(tape(), clock=clock)
    assert (c.index, c.playing, c.t) == (0, False, T0)
    clock.t += 10
    assert not c.advance() and c.index == 0  # paused: the clock moves nothing
    assert c.toggle() is True
    clock.t += 5  # 5 s at 1×: the poll at +4 s
    assert c.advance() and c.index == 2
    c.set_speed(10)
    clock.t += 3  # +30 s of the recording, from +5 s: +35 s → the poll at +34 s
    c.advance()
    assert c.index == 17 and c.position == pytest.approx(T0 + 35)
    c.set_speed(60)
    clock.t += 1
    c.advance()
    assert c.index == 47  # +95 s
    assert c.toggle() is False
    clock.t += 100
    assert not c.advance() and c.index == 47
    c.play()
    clock.t += 1000
    assert c.advance() and c.at_end and not c.playing and c.index == 99


def test_play_at_the_end_starts_again() -> None:
    c = ReplayCursor(tape(5), clock=Clock(), at=T0 + 100)
    assert c.at_end
    c.play()
    assert c.index == 0 and c.playing


def test_step_forward_and_back_clamped() -> None:
    c = ReplayCursor(tape(5), clock=Clock())
    assert not c.step(-1) and c.index == 0
    assert c.step(1) and c.index == 1 and c.position == T0 + 2
    c.step(10)
    assert c.index == 4
    c.step(-1)
    assert c.index == 3


def test_jump_by_durations_both_ways_and_signed() -> None:
    c = ReplayCursor(tape(), clock=Clock())
    c.jump("1m")
    assert c.t == T0 + 60
    c.jump("30s", forward=False)
    assert c.t == T0 + 30
    c.jump("-10s")  # the sign wins over the key
    assert c.t == T0 + 20
    c.jump("+1m", forward=False)
    assert c.t == T0 + 80
    c.jump("1h")  # past the end: the last poll
    assert c.at_end
    c.jump("start")
    assert c.index == 0


def test_jump_to_clock_iso_and_ago() -> None:
    c = ReplayCursor(tape(), clock=Clock())
    c.jump("11:07:30", tz=UTC)  # T0 is 11:06:40 UTC
    assert c.t == T0 + 50
    c.jump("11:08", forward=False, tz=UTC)  # a clock time: the key's direction is moot
    assert c.t == T0 + 80
    c.jump("2026-11-18T11:06:45+00:00")
    assert c.t == T0 + 4  # the last poll at or before 11:06:45
    c.jump("2026-11-18 11:07:00", tz=UTC)
    assert c.t == T0 + 20
    c.jump("1m ago", now=T0 + 200)
    assert c.t == T0 + 140
    c.jump("3 min ago", now=T0 + 200)
    assert c.t == T0 + 20


@pytest.mark.parametrize("bad", ["", "   ", "yesterday-ish", "5 parsecs", "25:00",
                                 "11:61", "xago", "+", "2026-13-01T00:00", "1h30"])
def test_bad_input_is_a_clear_error_and_the_cursor_stays(bad: str) -> None:
    c = ReplayCursor(tape(), clock=Clock(), at=T0 + 40)
    with pytest.raises(WhenError) as err:
        c.jump(bad, tz=UTC)
    assert c.t == T0 + 40
    msg = str(err.value)
    assert "Traceback" not in msg and len(msg) > 10


def test_parse_duration_and_when() -> None:
    assert parse_duration("1h30m") == 5400
    assert parse_duration("90") == 90
    assert parse_duration("2 min") == 120
    assert parse_duration("1.5h") == 5400
    assert parse_duration("abc") is None
    assert parse_when("now", position=T0, now=T0 + 5).at == T0 + 5
    w = parse_when("-5m", position=T0, now=T0)
    assert (w.at, w.by, w.signed) == (None, -300, True)


def test_markers_next_and_previous_reach_each_one_even_between_two_polls() -> None:
    marks = (Marker(T0 + 9, "alert", "slot Q27 down", "down:Q27"),
             Marker(T0 + 9.5, "xid", "XID 79 on GPU1", "1"),
             Marker(T0 + 60, "operation", "restart Q27", "audit-1"))
    c = ReplayCursor(tape(markers=marks), clock=Clock())
    m = c.marker(1)
    assert m is marks[0] and c.t == T0 + 10  # the first poll that shows it
    assert c.marker(1) is marks[1] and c.t == T0 + 10
    assert c.marker(1) is marks[2] and c.t == T0 + 60
    assert c.marker(1) is None and c.t == T0 + 60
    assert c.marker(-1) is marks[1]
    assert c.marker(-1) is marks[0]
    assert c.marker(-1) is None and c.t == T0 + 10


def test_a_growing_tape_is_followed() -> None:
    states = [state(T0 + i) for i in range(3)]
    t = MemoryTape(states)
    c = ReplayCursor(t, clock=Clock(), at=T0 + 2)
    assert c.at_end
    assert t.append(state(T0 + 3)) == 0
    assert t.append(state(T0 + 3)) == 0 and len(t.times()) == 4  # the same poll: once
    assert not c.at_end
    assert c.step(1) and c.t == T0 + 3


def test_a_bounded_tape_drops_the_oldest_and_the_cursor_keeps_its_poll() -> None:
    t = MemoryTape([state(T0 + i) for i in range(3)], [Marker(T0, "alert", "x")], maxlen=3)
    c = ReplayCursor(t, clock=Clock(), at=T0 + 1)
    c.dropped(t.append(state(T0 + 3)))
    assert list(t.times()) == [T0 + 1, T0 + 2, T0 + 3] and not t.markers()
    assert c.t == T0 + 1
    c.dropped(t.append(state(T0 + 4)))
    assert c.t == T0 + 2 and c.index == 0  # its poll went: the oldest left


def test_an_empty_tape_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        ReplayCursor(MemoryTape([]))
