"""One registry of actions; its sender refuses dangerous ones in read-only mode.

The Textual layer only binds keys to registry ids. Whatever calls
:meth:`ActionRegistry.invoke` — a key, the palette, a test, a script — goes
through the same guard, so a wall display cannot run a dangerous action even
if something invokes it directly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from console.operations.audit import AuditError, AuditLog

Progress = Callable[[str, float | None, str], None]
"""progress(step, fraction 0..1 or None, message)"""


@dataclass(frozen=True)
class Outcome:
    ok: bool
    message: str
    data: dict[str, Any] = field(default_factory=dict)
    state: str = ""
    """ok | failed | rolled_back | refused | cancelled | regressed (it ran; what it
    measured is worse than before)"""


Handler = Callable[[dict[str, Any], Progress], Awaitable[Outcome]]


@dataclass(frozen=True)
class ActionSpec:
    id: str
    key: str
    title: str
    description: str
    dangerous: bool
    confirm: str = ""
    """Question asked before a dangerous action runs."""
    label: str = ""
    """The footer's word for it (short); the title when empty."""
    audited: bool = False
    """Recorded in the audit log though not dangerous (an acknowledgement: who saw what)."""
    shows_progress: bool = False
    """Asks nothing but takes a while: the progress dialog shows its steps."""
    cancellable: bool = False
    """The progress dialog offers to cancel it (``c``): stopping halfway leaves nothing
    behind to undo (a benchmark keeps nothing of an unfinished run)."""
    per_slot: bool = False
    """Acts on the slot under the cursor (``args["slot"]``)."""

    @property
    def recorded(self) -> bool:
        return self.dangerous or self.audited


class RefusedError(Exception):
    pass


class ActionRegistry:
    def __init__(self, audit: AuditLog, read_only: bool = False) -> None:
        self.audit = audit
        self.read_only = read_only
        self.specs: dict[str, ActionSpec] = {}
        self.handlers: dict[str, Handler] = {}
        self.executed: list[str] = []
        """Ids of actions whose handler actually ran (tests read this)."""
        self.history: list[tuple[float, str, Outcome]] = []
        self.in_flight: str | None = None
        """The dangerous operation running now (one at a time), or None."""

    def register(self, spec: ActionSpec, handler: Handler) -> None:
        if spec.id in self.specs:
            raise ValueError(f"action {spec.id!r} registered twice")
        self.specs[spec.id] = spec
        self.handlers[spec.id] = handler

    def allowed(self, action_id: str) -> bool:
        spec = self.specs.get(action_id)
        return spec is not None and not (self.read_only and spec.dangerous)

    async def invoke(self, action_id: str, args: dict[str, Any] | None = None,
                     progress: Progress | None = None) -> Outcome:
        args = dict(args or {})
        spec = self.specs.get(action_id)
        if spec is None:
            raise KeyError(action_id)
        if self.read_only and spec.dangerous:
            lost = ""
            try:
                await asyncio.to_thread(self.audit.append, action_id, args, "refused",
                                        reason="read-only mode")
            except AuditError as exc:  # still refused; a full disk must not crash a wall
                lost = f" (AUDIT RECORD LOST: {exc})"
            out = Outcome(False, f"{spec.title} refused: read-only mode{lost}",
                          state="refused")
            self.history.append((time.time(), action_id, out))
            return out
        if spec.dangerous and self.in_flight is not None:
            # one dangerous operation at a time: two provisioning runs, or a rebalance
            # during a fallback, would act on each other's pods
            busy = self.specs[self.in_flight].title
            out = Outcome(False, f"{spec.title} not started: {busy} is still running",
                          state="refused")
            self.history.append((time.time(), action_id, out))
            return out
        if spec.recorded:
            # fsync can take tens of ms on a busy disk: never on the event loop
            try:
                await asyncio.to_thread(self.audit.append, action_id, args, "started")
            except AuditError as exc:
                # nothing that acts on the pod runs without its record
                out = Outcome(False, f"{spec.title} not started: the audit log cannot be "
                                     f"written ({exc})", state="failed")
                self.history.append((time.time(), action_id, out))
                return out
        self.executed.append(action_id)
        if spec.dangerous:
            self.in_flight = action_id
        try:
            out = await self.handlers[action_id](args, progress or (lambda *a: None))
        except asyncio.CancelledError:
            out = Outcome(False, f"{spec.title} cancelled", state="cancelled")
            await self._end(spec, action_id, args, out)
            raise
        except Exception as exc:  # an action must always end with a record
            out = Outcome(False, f"{type(exc).__name__}: {exc}", state="failed")
        finally:
            if spec.dangerous:
                self.in_flight = None
        return await self._end(spec, action_id, args, out)

    async def _end(self, spec: ActionSpec, action_id: str, args: dict[str, Any],
                   out: Outcome) -> Outcome:
        state = out.state or ("ok" if out.ok else "failed")
        if spec.recorded:
            try:
                await asyncio.shield(asyncio.to_thread(
                    self.audit.append, action_id, args, state, message=out.message))
            except AuditError as exc:
                out = Outcome(out.ok, f"{out.message} (AUDIT RECORD LOST: {exc})", out.data,
                              out.state)
        self.history.append((time.time(), action_id, out))
        return out
