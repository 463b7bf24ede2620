"""Every operation, one module each, and the registry that runs them.

A new operation is a module here (see ``console/operations/operation.py`` for what it
exports) and a line in ``OPERATIONS``; its key, footer word, help line, palette entry and
confirmation come from its ``SPEC``, and the console's one flow calls its hooks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.operations.operation import Operation, OperationDeps, Provisioning
from console.operations.ops import (
    ack,
    bench,
    fallback,
    host_checks,
    rebalance,
    refresh,
    restart,
    resume,
    smoke,
    watchdog,
)
from console.operations.registry import Acknowledge, OperationRegistry, Progress, Refresh

if TYPE_CHECKING:
    from console.operations.audit import AuditLog
    from console.sources.agent_client import AgentClient

OPERATIONS: dict[str, Operation] = {
    op.spec.id: op for op in map(Operation.of, (
        refresh, resume, fallback, host_checks, rebalance, restart, ack, smoke, bench,
        watchdog))}
"""In footer order (the bindings are generated in this order)."""


def build_registry(audit: AuditLog, read_only: bool = False, *, agent: AgentClient | None,
                   wall: bool = False, refresh: Refresh | None = None,
                   acknowledge: Acknowledge | None = None,
                   provisioner: Provisioning | None = None,
                   on_rebalanced: Callable[[dict[str, float]], Awaitable[str]] | None = None,
                   smoke: Callable[[Callable[[Any], None]], Awaitable[Any]] | None = None,
                   bench: Callable[[str, Progress], Awaitable[tuple[dict[str, Any], Path]]]
                   | None = None) -> OperationRegistry:
    """The registry with every operation; ``agent`` is how they reach the pod."""
    reg = OperationRegistry(audit, refresh=refresh, acknowledge=acknowledge,
                            read_only=read_only, wall=wall)
    deps = OperationDeps(agent=agent, refresh=reg.request_refresh,
                         acknowledge=reg.acknowledge_alerts, provisioner=provisioner,
                         on_rebalanced=on_rebalanced, smoke=smoke, bench=bench)
    for op in OPERATIONS.values():
        reg.register(op.spec, op.bound(deps))
    return reg
