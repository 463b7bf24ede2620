"""What the app drives: the live :class:`~console.session.session.Session` and the
replay's :class:`~console.session.record.replay.ReplaySession` both are one (issue 46).

A protocol, not a base class: a replay has no sources, no judging and no delivery, and
says so by having none, rather than by overriding a live session's members. mypy checks
that both implement it (each module asserts it of its class).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from console.model.alerts import AlertBook
    from console.model.fleet import FleetSnapshot
    from console.model.history import History
    from console.model.snapshot import DeploymentSnapshot, PodSnapshot
    from console.session.record.store import Recorder
    from console.session.view import ConsoleContext, ConsoleState, ConsoleView, StagedStart


class SessionLike(Protocol):
    """The members the app, the wall and the commands read of a session."""

    ctx: ConsoleContext | None
    staged: StagedStart | None
    wall: bool
    alerts: AlertBook

    @property
    def polls(self) -> int: ...

    @property
    def poll_failure(self) -> tuple[float, str] | None: ...

    @property
    def ready(self) -> bool: ...

    @property
    def view(self) -> ConsoleView: ...

    @property
    def history(self) -> History: ...

    @property
    def refresh_s(self) -> float: ...

    @property
    def snapshot(self) -> DeploymentSnapshot | None: ...

    @property
    def pod(self) -> PodSnapshot | None: ...

    @property
    def fleet(self) -> FleetSnapshot | None: ...

    @property
    def recorder(self) -> Recorder | None: ...

    def now(self) -> float: ...

    def state(self) -> ConsoleState: ...

    def stale_text(self) -> str | None: ...

    def tick(self) -> None: ...

    def refresh_now(self) -> None: ...

    def refresh_asked(self) -> None: ...

    def step_refresh(self, direction: int) -> float | None: ...

    async def poll(self) -> bool: ...

    def started(self) -> None: ...

    async def adopt(self, ctx: ConsoleContext) -> bool: ...

    def acknowledge(self, who: str, key: str | None = None) -> list[str]: ...

    async def slot_logs(self, slot: str, lines: int = 200) -> list[str]: ...

    def want_fleet(self) -> None: ...

    async def aclose(self) -> None: ...
