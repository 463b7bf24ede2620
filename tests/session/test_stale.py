"""The header's STALE is the pod's data (issue 30, finding 6): one dead slot is its own
row's STALE, not the whole header's; every slot gone stale is."""

from __future__ import annotations

from pathlib import Path

from msgspec.structs import replace

from tests.session.world import world

T0 = 1_800_000_000.0


async def test_one_dead_slot_does_not_stale_the_header(tmp_path: Path) -> None:
    w = world(tmp_path, T0)
    assert await w.session.poll()
    w.slots.down = {"Q27"}
    w.clock.advance(2.0)
    assert await w.session.poll()
    st = w.session.state()
    assert st.snapshot is not None and st.snapshot.slot("Q27").health == "down"
    # as the poller marks a slot that failed after good data: its last figures, stale
    one = tuple(replace(s, stale_since=T0) if s.slot == "Q27" else s
                for s in st.snapshot.slots)
    w.session.cycle.reading = replace(w.session.cycle.reading,
                                      snapshot=replace(st.snapshot, slots=one))
    assert w.session.stale_text() is None and w.session.state().stale is None
    # every slot stale: the deployment's numbers are old, said in the header
    stale = tuple(replace(s, stale_since=T0) for s in st.snapshot.slots)
    w.session.cycle.reading = replace(w.session.cycle.reading,
                                      snapshot=replace(st.snapshot, slots=stale))
    text = w.session.stale_text()
    assert text is not None and text.startswith("STALE since")
