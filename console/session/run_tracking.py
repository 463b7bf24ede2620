"""The pod's run as the session follows it (issue 42), in a room of its own (issue 46):
the run after each poll (``model/pod_run.advance``), the console's recent operations
read from the audit log to explain it, and what ends with a run when the next begins.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from console.model import fmt
from console.model.pod_run import Operation, PodRun, RunReading, advance
from console.session.audit_tail import AuditTail

if TYPE_CHECKING:
    from console.model.alerts import AlertBook
    from console.model.gpu_faults import FaultBook
    from console.model.snapshot import DeploymentSnapshot, PodSnapshot
    from console.session.view import ConsoleContext

RUN_ALERTS = ("xid:", "ecc:", "remapfail:", "remap:", "throttle:", "heat:", "stray:")
"""Alert keys of what belongs to one run of the pod, its GPUs' state: they end with it.
Its stop event has no hold: it clears at the first reading of the next run."""

RunBlocking = Callable[..., Awaitable[Any]]
Note = Callable[[str, str], None]


class RunTracking:
    """The run, the operations that explain it, and the books a new run clears."""

    def __init__(self, alerts: AlertBook, faults: FaultBook, note: Note) -> None:
        self.alerts = alerts
        self.faults = faults
        self._note = note
        self.run: PodRun | None = None
        """The pod's run (``pod_run``): advanced at every poll; what belongs to a run
        (acknowledgements, pending timers, GPU faults) ends with it."""
        self._audit_tail: AuditTail | None = None
        self._ops: tuple[Operation, ...] = ()
        """The console's recent machine operations (the audit log), for the run."""

    async def read_operations(self, ctx: ConsoleContext, run_blocking: RunBlocking,
                              now: float) -> None:
        """The console's recent machine operations from the audit log (off the loop)."""
        if self._audit_tail is None:
            self._audit_tail = AuditTail(getattr(ctx.registry.audit, "path", None))
        # an unreadable log explains nothing (``AuditTail.read``): the run goes on
        self._ops = await run_blocking(self._audit_tail.read, now)

    def advance(self, snapshot: DeploymentSnapshot, pod: PodSnapshot | None,
                agent_seen: PodSnapshot | None, now: float) -> dict[str, str]:
        """The pod's run after this poll. When a run ended and another began, what
        belonged to the old one ends: its GPU faults (alert key → why, for the alert
        book), its pending timers and its acknowledgements."""
        up = sum(1 for s in snapshot.slots if s.health == "up")
        prev = self.run
        self.run = run = advance(prev, RunReading(now, pod, agent_seen, self._ops, up))
        if prev is None or run is None or run.number == prev.number:
            return {}
        old = run.previous or prev
        why = (f"ended with run {old.number} of pod {old.pod_id}" if old.pod_id == run.pod_id
               else f"ended with pod {old.pod_id}")
        self.alerts.new_run(now, why)
        self._note(f"pod {run.pod_id}: a new run"
                   + (f" (the last {old.stop_text(fmt.clock(old.at)[:5] if old.at else '')})"
                      if old.ended else ""), "dim")
        # the old run's GPUs are over: said so at once, not held; the new run's own
        # readings raise what is true of it
        ended = {k: why for k in self.alerts.active if k.startswith(RUN_ALERTS)}
        if old.pod_id == run.pod_id:
            ended.update(self.faults.end_run(old.pod_id, now, why))
        return ended
