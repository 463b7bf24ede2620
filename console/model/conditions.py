"""What an alert rule finds true now: a ``Condition`` and its severity.

Its own module, below every rule that makes one: the GPU rules (``gpu_state``) and the
deployment rules (``alerts``) both produce conditions, and ``alerts`` reads the GPU
rules; were the type in ``alerts``, the two would import each other."""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

Severity = Literal["crit", "warn", "info"]
SEVERITY_ORDER: dict[Severity, int] = {"crit": 0, "warn": 1, "info": 2}


class Condition(Struct, frozen=True):
    key: str
    severity: Severity
    title: str
    detail: str = ""
    for_s: float = 0.0
    """How long it must hold before the alert fires (0: at once)."""
    hold_s: float = 0.0
    """How long it must be gone before a firing alert clears."""
    parent: str | None = None
    """The key of the condition that explains this one (a deployment's cooldown explains
    the fallbacks and the 5xx it causes): shown under it, not an alert of its own while
    the parent is active (``AlertBook``)."""
