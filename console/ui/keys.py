"""Every key a console answers to, as its help screen (``?``) lists them: the operation
keys with their titles from the registry (dimmed where this console refuses them), then
the keys every screen shares, then the table's, and the columns' legend."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from console.ui.screens.main import COMMON_BINDINGS, OPERATION_BINDINGS

HelpRow = tuple[str, str, bool, bool]
"""(key, what it does, dangerous, allowed here)."""


def help_rows(wall: bool, specs: Mapping[str, Any], allowed: Callable[[str], bool]
              ) -> list[HelpRow]:
    rows: list[HelpRow] = []
    for b in [] if wall else OPERATION_BINDINGS:
        op = b.id or ""
        spec = specs.get(op)
        rows.append((b.key, spec.title if spec else b.description,
                     bool(spec.dangerous) if spec else True, allowed(op)))
    if not wall:
        rows.append(("enter", "slot detail (figures, plots, log lines)", False, True))
    rows.extend((b.key, b.description, False, True) for b in COMMON_BINDINGS)
    if wall:
        rows.append(("space", "next view", False, True))
        return rows
    from console.ui.widgets.slots import SlotsTable

    rows.append(("up,down", "choose a slot (then enter)", False, True))
    rows.extend((b.key, b.description, False, True) for b in SlotsTable.BINDINGS
                if b.action.startswith(("sort", "invert")))
    rows.append(("slash", "filter slots by name or model (escape clears)", False, True))
    return rows


def column_legend() -> list[tuple[str, str]]:
    """(column header, what its figure is) for every column of the slots table."""
    from console.model import catalog

    return [(c.header, catalog.describe(f)) for f, c in catalog.columns()]
