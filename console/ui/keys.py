"""Every key a console answers to, as its help screen (``?``) lists them: the operation
keys with their titles from the registry (dimmed where this console refuses them), then
the keys every screen shares, then the table's, and the columns' legend."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from textual.binding import Binding

from console.ui.screens.main import COMMON_BINDINGS, OPERATION_BINDINGS

REPLAY_BINDINGS = [
    Binding("space", "replay_toggle", "play/pause", id="replay_play", priority=True),
    Binding("t", "replay_step(1)", "sample →", id="replay_forward", priority=True,
            tooltip="one sample forward"),
    Binding("T", "replay_step(-1)", "one sample back", id="replay_back", priority=True,
            show=False),
    Binding("j", "replay_jump(1)", "jump forward by a duration, or to a time",
            id="replay_jump", priority=True, show=False),
    Binding("J", "replay_jump(-1)", "jump back by a duration, or to a time",
            id="replay_jump_back", priority=True, show=False),
    Binding("left_square_bracket", "replay_marker(-1)", "previous marker",
            id="replay_marker_back", priority=True, show=False),
    Binding("right_square_bracket", "replay_marker(1)", "marker →", id="replay_marker",
            priority=True, tooltip="next marker (an alert, an operation, an Xid)"),
    Binding("1", "replay_speed(1)", "speed 1×", id="replay_1x", priority=True, show=False),
    Binding("2", "replay_speed(2)", "speed 10×", id="replay_10x", priority=True, show=False),
    Binding("3", "replay_speed(3)", "speed 60×", id="replay_60x", priority=True, show=False),
]
"""The replay's keys (below/atop's): bound on the app before every screen's own
(``priority``), and only while a recording is shown (``check_action``): live, ``t`` is the
smoke test, ``j`` the table's cursor and space the wall's next view, as they were."""
PAUSE_BINDING = Binding("p", "live_pause", "pause / back to live", id="pause", show=False)
"""The live pause (atop's twin mode): the screen holds a poll while polling goes on."""


HelpRow = tuple[str, str, bool, bool]
"""(key, what it does, dangerous, allowed here)."""


def help_rows(wall: bool, specs: Mapping[str, Any], allowed: Callable[[str], bool],
              replay: bool = False, live: bool = True) -> list[HelpRow]:
    """``replay``: a recording is shown (a replay, the live pause): its keys first.
    ``live``: a live console (``p`` pauses it)."""
    rows: list[HelpRow] = []
    if replay:
        rows.extend((b.key, b.tooltip or b.description, False, True)
                    for b in REPLAY_BINDINGS)
    for b in [] if wall else OPERATION_BINDINGS:
        op = b.id or ""
        spec = specs.get(op)
        rows.append((b.key, spec.title if spec else b.description,
                     bool(spec.dangerous) if spec else True, allowed(op)))
    if not wall:
        rows.append(("enter", "slot detail (figures, plots, log lines)", False, True))
    rows.extend((b.key, b.description, False, True) for b in COMMON_BINDINGS)
    if live:
        rows.append((PAUSE_BINDING.key, PAUSE_BINDING.description, False, True))
    if wall:
        if not replay:  # a recording's space plays and pauses
            rows.append(("space", "next view", False, True))
        return rows
    from console.ui.widgets.slots import SlotsTable

    rows.append(("up,down", "choose a slot (then enter)", False, True))
    rows.extend((b.key, b.description, False, True) for b in SlotsTable.BINDINGS
                if isinstance(b, Binding) and b.action.startswith(("sort", "invert")))
    rows.append(("slash", "filter slots by name or model (escape clears)", False, True))
    return rows


def column_legend(per_slot: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """(column header, what its figure is) for every column of the slots table; its
    threshold as the values in force (``per_slot``: slot → its thresholds), not the
    config key that sets it."""
    from console.model import catalog
    from console.ui.help_text import limit_words

    out = []
    for f, c in catalog.columns():
        text = catalog.describe(f).split("; yellow ")[0]
        limit = limit_words(f, per_slot or {})
        out.append((c.header, text + (f"; yellow {limit}" if limit else "")))
    return out
