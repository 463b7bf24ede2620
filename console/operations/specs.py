"""Every operation's spec by id, in footer order: what the bindings (``screens/main.py``),
the help and the palette are generated from. Each spec is written once, in its operation's
module (``console/operations/ops/``); this is a view of them. Nothing heavy: the first
frame imports it."""

from __future__ import annotations

from console.operations.ops import OPERATIONS
from console.operations.registry import OperationSpec

SPECS: dict[str, OperationSpec] = {op_id: op.spec for op_id, op in OPERATIONS.items()}
