"""The stall detector as the session owns it: polls on an injected clock, the slot's
running gauge and token counters set per poll; STALLED is a CRIT alert and a row state
of ``state()``, raised after ``alerts.stall_after_s`` and cleared when tokens flow."""

from __future__ import annotations

from pathlib import Path

from console.config.settings import AlertTiming
from tests.session.world import world

T0 = 1_800_000_000.0  # a Friday, 17:00 in Seoul: working hours
AFTER = 10.0


def _stall_alerts(w) -> list:
    return [a for a in w.session.state().alerts if a.key.startswith("stall:")]


async def _poll(w, seconds: float = 0.0, **figures: float) -> None:
    w.clock.advance(seconds)
    if figures:
        w.slots.values["FLASH"] = dict(figures)
    assert await w.session.poll()


async def test_frozen_counters_raise_stalled_then_progress_clears_it(tmp_path: Path) -> None:
    w = world(tmp_path, T0, alerts=AlertTiming(down_for_s=0, for_s=0, hold_s=0,
                                               stall_after_s=AFTER))
    await _poll(w, running=3, generation_total=900, prompt_total=100)
    busy_since = w.clock()
    for _ in range(4):  # 8 s of 10: not yet
        await _poll(w, 2)
    assert w.session.state().stalled == {} and not _stall_alerts(w)
    await _poll(w, 2)
    state = w.session.state()
    assert set(state.stalled) == {"FLASH"} and state.stalled["FLASH"].since == busy_since
    (alert,) = _stall_alerts(w)
    assert alert.key == "stall:FLASH" and alert.severity == "crit"
    assert alert.state == "firing" and "3 request(s) stuck" in alert.title
    assert state.snapshot is not None and state.snapshot.slot("FLASH").health == "up"
    assert any("ALERT FLASH STALLED" in text for text, _ in w.notes)
    assert not state.stalled.get("Q27")  # a slot without figures is never judged
    # tokens flow again: cleared at the next poll, said in the log
    await _poll(w, 2, running=3, generation_total=960, prompt_total=100)
    assert w.session.state().stalled == {} and not _stall_alerts(w)
    assert any(text.startswith("cleared: FLASH STALLED") for text, _ in w.notes)


async def test_prefill_progress_idle_and_a_restart_are_not_stalls(tmp_path: Path) -> None:
    w = world(tmp_path, T0, alerts=AlertTiming(down_for_s=0, for_s=0, hold_s=0,
                                               stall_after_s=AFTER))
    # reading prompts (a long prefill): no new token for a minute, the prompt counter moves
    for i in range(30):
        await _poll(w, 2, running=2, generation_total=900, prompt_total=100 + 400 * i)
    # idle for a minute: nothing running, nothing moves
    for _ in range(30):
        await _poll(w, 2, running=0, generation_total=900, prompt_total=12100)
    # the engine restarted: its counters fell back, and from there they move
    for i in range(30):
        await _poll(w, 2, running=1, generation_total=5 + 3 * i, prompt_total=20)
    assert not [t for t, _ in w.notes if "STALLED" in t]
    # the slot goes down and comes back with the same counters: a new record, not a stall
    w.slots.down = {"FLASH"}
    await _poll(w, 2)
    w.slots.down = set()
    for _ in range(5):  # back (the clock starts), then 8 s
        await _poll(w, 2)
    assert w.session.state().stalled == {}
    await _poll(w, 2)
    assert set(w.session.state().stalled) == {"FLASH"}


async def test_stall_after_comes_from_the_settings(tmp_path: Path) -> None:
    w = world(tmp_path, T0, alerts=AlertTiming(down_for_s=0, for_s=0, hold_s=0,
                                               stall_after_s=60))
    await _poll(w, running=1, generation_total=1, prompt_total=1)
    for _ in range(29):
        await _poll(w, 2)
    assert w.session.state().stalled == {}
    await _poll(w, 2)
    assert set(w.session.state().stalled) == {"FLASH"}
