"""One registry of operations; its sender refuses what the console's mode forbids.

The Textual layer only binds keys to operation ids. Whatever calls
:meth:`OperationRegistry.invoke` — a key, the palette, a test, a script — goes
through the same guard, so a wall display cannot run an operation even if
something invokes it directly: read-only mode refuses the dangerous ones, a wall
refuses every one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from msgspec import Struct, field

from console.operations.audit import AuditError, AuditLog

Progress = Callable[[str, float | None, str], None]
"""progress(step, fraction 0..1 or None, message)"""


class Outcome(Struct, frozen=True):
    ok: bool
    message: str
    data: dict[str, Any] = field(default_factory=dict)
    state: str = ""
    """ok | failed | rolled_back | refused | cancelled | regressed (it ran; what it
    measured is worse than before)"""


Handler = Callable[[dict[str, Any], Progress], Awaitable[Outcome]]
Watcher = Callable[[str, dict[str, Any], "Outcome | None"], None]
"""Told of each operation whose handler runs: (id, args, None) as it starts, (id, args,
its outcome) as it ends."""
Refresh = Callable[[], None]
"""Poll every source now (through the one poll guard of whoever shows the console)."""
Acknowledge = Callable[..., list[str]]
"""Mark every firing alert as seen by the user (given an alert's key: that one, with the
alerts it explains); the titles it marked."""


class OperationSpec(Struct, frozen=True):
    id: str
    key: str
    title: str
    description: str
    dangerous: bool
    confirm: str = ""
    """Question asked before a dangerous operation runs (``{pod}``, ``{cost}``… filled from
    what the console knows; an operation's ``question`` hook may say more)."""
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
    compact_log: bool = False
    """The action log keeps one progress line for it, updated in place (a benchmark's
    thirty steps); its dialog keeps every step."""
    beside: bool = False
    """Dangerous, yet it may run while another dangerous operation does (it changes only
    the pod's stop plan: ``w`` extends a pod whose resume is still bringing it up, from
    the running operation's dialog); never two of it at once."""
    takes_down: str = ""
    """What its own work takes down on purpose, whose alerts wait until it is back up
    (``model/inhibit.py``): "slot" (``args["slot"]``), "split" (the slots of
    ``args["set"]``), "pod" (every slot and the agent); "" nothing."""

    @property
    def recorded(self) -> bool:
        return self.dangerous or self.audited


class OperationRegistry:
    """The operations and their guard.

    ``refresh`` and ``acknowledge`` are the two effects that act on the console showing
    the registry rather than on the pod; None means there is nothing to act on yet (a
    headless command). The console that takes over (``attach_console``) replaces both.
    ``read_only`` refuses dangerous operations; ``wall`` refuses every operation (and is
    read-only)."""

    def __init__(self, audit: AuditLog, *, refresh: Refresh | None = None,
                 acknowledge: Acknowledge | None = None, read_only: bool = False,
                 wall: bool = False) -> None:
        self.audit = audit
        self.wall = wall
        self.read_only = read_only or wall
        self._refresh = refresh
        self._acknowledge = acknowledge
        self.specs: dict[str, OperationSpec] = {}
        self.handlers: dict[str, Handler] = {}
        self.executed: list[str] = []
        """Ids of operations whose handler actually ran (tests read this)."""
        self.history: list[tuple[float, str, Outcome]] = []
        self.in_flight: str | None = None
        """The dangerous operation running now (one at a time), or None."""
        self.beside: set[str] = set()
        """The ``beside`` operations running now."""
        self.watchers: list[Watcher] = []
        """Who is told as handlers start and end (a session holds its alerts)."""

    def attach_console(self, *, refresh: Refresh, acknowledge: Acknowledge) -> None:
        """The console that now shows this registry polls and holds the alerts: refresh and
        acknowledge act on it from here on (the context built the registry before it)."""
        self._refresh = refresh
        self._acknowledge = acknowledge

    def request_refresh(self) -> bool:
        """Ask for a poll now; False when nothing polls."""
        if self._refresh is None:
            return False
        self._refresh()
        return True

    def acknowledge_alerts(self, key: str | None = None) -> list[str] | None:
        """The firing alerts' titles (``key``: that alert's and its group's), now marked
        as seen; None while no alert book exists."""
        if self._acknowledge is None:
            return None
        return self._acknowledge() if key is None else self._acknowledge(key)

    def register(self, spec: OperationSpec, handler: Handler) -> None:
        if spec.id in self.specs:
            raise ValueError(f"operation {spec.id!r} registered twice")
        self.specs[spec.id] = spec
        self.handlers[spec.id] = handler

    def refusal(self, operation_id: str) -> str | None:
        """Why this registry's mode refuses the operation, or None."""
        spec = self.specs.get(operation_id)
        if spec is None:
            return None
        if self.read_only and spec.dangerous:
            return "read-only mode"
        if self.wall:  # a display nobody touches: nothing it runs is anyone's request
            return "wall mode"
        return None

    def allowed(self, operation_id: str) -> bool:
        return operation_id in self.specs and self.refusal(operation_id) is None

    async def invoke(self, operation_id: str, args: dict[str, Any] | None = None,
                     progress: Progress | None = None) -> Outcome:
        args = dict(args or {})
        spec = self.specs.get(operation_id)
        if spec is None:
            raise KeyError(operation_id)
        if (why := self.refusal(operation_id)) is not None:
            lost = ""
            if spec.recorded:
                try:
                    await asyncio.to_thread(self.audit.append, operation_id, args, "refused",
                                            reason=why)
                except AuditError as exc:  # still refused; a full disk must not crash a wall
                    lost = f" (AUDIT RECORD LOST: {exc})"
            out = Outcome(False, f"{spec.title} refused: {why}{lost}", state="refused")
            self.history.append((time.time(), operation_id, out))
            return out
        busy_id = operation_id if operation_id in self.beside else (
            self.in_flight if not spec.beside else None)
        if spec.dangerous and busy_id is not None:
            # one dangerous operation at a time: two provisioning runs, or a rebalance
            # during a fallback, would act on each other's pods
            busy = self.specs[busy_id].title
            out = Outcome(False, f"{spec.title} not started: {busy} is still running",
                          state="refused")
            self.history.append((time.time(), operation_id, out))
            return out
        if spec.recorded:
            # fsync can take tens of ms on a busy disk: never on the event loop. The write
            # is shielded: a cancel that lands while it runs (the record may already be on
            # disk) waits for it, so a started record always gets its end record
            start = asyncio.ensure_future(
                asyncio.to_thread(self.audit.append, operation_id, args, "started"))
            try:
                await asyncio.shield(start)
            except asyncio.CancelledError:
                if await _settled(start):
                    await self._end(spec, operation_id, args, Outcome(
                        False, f"{spec.title} cancelled", state="cancelled"))
                raise
            except AuditError as exc:
                # nothing that acts on the pod runs without its record
                out = Outcome(False, f"{spec.title} not started: the audit log cannot be "
                                     f"written ({exc})", state="failed")
                self.history.append((time.time(), operation_id, out))
                return out
        self.executed.append(operation_id)
        running = self.beside if spec.beside else None
        if running is not None:
            running.add(operation_id)
        elif spec.dangerous:
            self.in_flight = operation_id
        self._tell(operation_id, args, None)
        try:
            out = await self.handlers[operation_id](args, progress or (lambda *a: None))
        except asyncio.CancelledError:
            out = Outcome(False, f"{spec.title} cancelled", state="cancelled")
            self._tell(operation_id, args, out)
            await self._end(spec, operation_id, args, out)
            raise
        except Exception as exc:  # an operation must always end with a record
            out = Outcome(False, f"{type(exc).__name__}: {exc}", state="failed")
        finally:
            if running is not None:
                running.discard(operation_id)
            elif spec.dangerous:
                self.in_flight = None
        self._tell(operation_id, args, out)
        return await self._end(spec, operation_id, args, out)

    def _tell(self, operation_id: str, args: dict[str, Any], out: Outcome | None) -> None:
        for watch in self.watchers:
            watch(operation_id, args, out)

    async def _end(self, spec: OperationSpec, operation_id: str, args: dict[str, Any],
                   out: Outcome) -> Outcome:
        state = out.state or ("ok" if out.ok else "failed")
        if spec.recorded:
            try:
                await asyncio.shield(asyncio.to_thread(
                    self.audit.append, operation_id, args, state, message=out.message))
            except AuditError as exc:
                out = Outcome(out.ok, f"{out.message} (AUDIT RECORD LOST: {exc})", out.data,
                              out.state)
        self.history.append((time.time(), operation_id, out))
        return out


async def _settled(write: asyncio.Future[Any]) -> bool:
    """Whether ``write`` (already under way) ended with its record written."""
    try:
        await write
    except AuditError:  # nothing was recorded
        return False
    return True
