"""The one flow every operation goes through in the console: preflight, ask, confirm,
progress.

What differs between operations lives in their modules (``console/operations/ops/``):
their spec and their hooks. What the flow needs of the console is :class:`FlowHost`; the
app's is :class:`AppFlowHost`, a test's can be a plain object, so the flow runs without
Textual. The registry still guards every call: the flow's own checks only say things
earlier (before a question is asked), they never replace the sender's refusal.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from console.model import fmt
from console.model.alerts import AlertEvent
from console.operations.operation import Dialogs, Operation, OperationFacts
from console.operations.registry import OperationRegistry, Outcome
from console.ui.host import Host

if TYPE_CHECKING:
    from textual.screen import Screen


class ProgressView(Protocol):
    """Where a running operation's steps are drawn (``screens/modals.ProgressScreen``)."""

    def step(self, step: str, fraction: float | None, message: str) -> None: ...

    def finish(self, ok: bool, message: str) -> None: ...


class FlowHost(Protocol):
    """What the flow needs of the console that runs it."""

    @property
    def dialogs(self) -> Dialogs: ...

    def registry_now(self) -> OperationRegistry | None:
        """The registry, or None while the console is still loading."""

    async def registry_ready(self) -> OperationRegistry:
        """The registry, once the console has loaded."""

    def facts(self) -> OperationFacts: ...

    def now(self) -> float: ...

    def note(self, text: str, style: str = "", replace: bool = False) -> None:
        """A line in the action log (``replace``: in place of the last one)."""

    async def confirm(self, title: str, question: str) -> bool: ...

    def open_progress(self, title: str, on_cancel: Callable[[], None] | None,
                      compact: bool = False) -> ProgressView:
        """``compact``: the operation's steps are one line, updated in place (its result
        lines are added below it)."""
        ...

    def show_state(self) -> None:
        """Redraw the screens soon (the header says what runs)."""

    def refresh_now(self) -> None:
        """Poll every source now."""

    def record_event(self, event: AlertEvent) -> None:
        """An event in the alert history (it happened once; nothing stays firing)."""


async def run_operation(host: FlowHost, operation_id: str, args: dict[str, Any],
                        operations: Mapping[str, Operation] | None = None
                        ) -> Outcome | None:
    """Run one operation as a person asked for it; its outcome, or None when it did not
    start (not now, nothing to do, or the person said no)."""
    if operations is None:
        from console.operations.ops import OPERATIONS

        operations = OPERATIONS
    reg = host.registry_now()
    if reg is None:
        host.note("console still loading: the operation starts once it has", "dim")
        reg = await host.registry_ready()
    spec = reg.specs.get(operation_id)
    if spec is None:
        return None
    if not reg.allowed(operation_id):
        out = await reg.invoke(operation_id, args)  # recorded as refused, nothing runs
        host.note(out.message, "warn")
        return out
    if spec.dangerous and reg.in_flight is not None and not spec.beside:
        # before asking anything: one dangerous operation at a time (but ``w``, which
        # only changes the stop plan, works from a running operation's dialog)
        host.note(f"{spec.title}: not now — {reg.specs[reg.in_flight].title} is still "
                  "running", "warn")
        return None
    op = operations.get(operation_id)
    # said before anything is asked: no "begin billing?" for a pod that already bills
    why = op.preflight(host.facts(), args) if op is not None and op.preflight else None
    if why is not None:
        host.note(f"{spec.title}: not started — {why}", "warn")
        return None
    if op is not None and op.ask is not None:
        asked = await op.ask(host.facts(), args, host.dialogs)
        if asked is None:
            host.note(f"{spec.title}: cancelled")
            return None
        args = asked
    if not spec.dangerous and not spec.shows_progress:  # quick, harmless: no dialog
        out = await reg.invoke(operation_id, args)
        host.note(f"{spec.title}: {out.message}", "ok" if out.ok else "warn")
        host.show_state()
        return out
    if spec.dangerous:
        # the facts as they are now: the person may have spent a while in a dialog
        question = op.confirmation(host.facts(), args) if op is not None else spec.confirm
        if not await host.confirm(spec.title, question):
            host.note(f"{spec.title}: cancelled")
            return None
    return await _with_progress(host, reg, operation_id, args)


async def _with_progress(host: FlowHost, reg: OperationRegistry, operation_id: str,
                         args: dict[str, Any]) -> Outcome:
    spec = reg.specs[operation_id]
    what = args_text(args)
    host.note(f"{spec.title}: started{f' ({what})' if what else ''}", "bold")
    host.show_state()
    running: list[asyncio.Future[Outcome]] = []
    asked_to_cancel = False

    def cancel() -> None:
        nonlocal asked_to_cancel
        asked_to_cancel = True
        for fut in running:
            fut.cancel()

    progress = host.open_progress(spec.title, cancel if spec.cancellable else None,
                                  compact=spec.compact_log)

    last: list[tuple[str, str]] = []

    def on_progress(step: str, fraction: float | None, message: str) -> None:
        # Escape hides the dialog and the operation goes on: a dialog that is gone
        # (or half gone) must never turn a progress line into an exception
        with contextlib.suppress(Exception):
            progress.step(step, fraction, message)
        if step:
            # a countdown (the same line with other numbers) or a compact operation's
            # next step updates its one line in place, not a line a second
            key = ("", "") if spec.compact_log else fmt.progress_shape(step, message)
            host.note(f"  {spec.title} · {step} {message}".rstrip(), "dim",
                      replace=last == [key])
            last[:] = [key]

    run = asyncio.ensure_future(reg.invoke(operation_id, args, on_progress))
    running.append(run)
    try:
        out = await run
    except asyncio.CancelledError:
        if not asked_to_cancel:
            raise  # the console is quitting: the registry has recorded it
        out = Outcome(False, f"{spec.title} cancelled; nothing kept", state="cancelled")
    style = "ok" if out.ok else ("warn" if out.state in ("rolled_back", "cancelled")
                                    else "crit")
    host.note(f"{spec.title}: {out.state or ('ok' if out.ok else 'failed')} — "
              f"{out.message}", style)
    # recorded even when the dialog is not drawn yet: it draws the end when it is
    # (a hidden dialog is gone; the action log says how it ended)
    with contextlib.suppress(Exception):
        progress.finish(out.ok, out.message)
    if not out.ok and out.state not in ("refused", "cancelled"):
        # an event, not a standing alert: it happened once, the log and the alert
        # history keep it, and nothing on screen claims it is still going on
        regressed = out.state == "regressed"
        host.record_event(AlertEvent(host.now(), "failed", "warn" if regressed else "crit",
                                     f"{spec.title}: regression" if regressed else
                                     f"{spec.title} failed", out.message))
    host.refresh_now()
    return out


def args_text(args: dict[str, Any]) -> str:
    """An operation's arguments as a person says them ("FLASH → 0.70, Q27 → 0.25"),
    never a Python dict."""
    parts = []
    for k, v in args.items():
        if v is None or v == "" or v is False:
            continue  # nothing given: not "reason " with nothing after it
        if v is True:
            parts.append(str(k))
        elif k == "set" and isinstance(v, dict):
            parts.append(", ".join(f"{slot} → {float(u):.2f}" for slot, u in v.items()))
        elif k == "cmd":
            parts.append(str(v))
        else:
            parts.append(f"{k} {v}")
    return "; ".join(parts)


# -- the app's side ---------------------------------------------------------------------
class FlowApp(Host, Protocol):
    """What :class:`AppFlowHost` needs of the app besides :class:`~console.ui.host.Host`."""

    def now(self) -> float: ...

    async def push_screen_wait(self, screen: Screen[Any]) -> Any: ...

    def call_later(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> bool: ...


class ScreenDialogs:
    """The ``ask`` hooks' questions as the app's modal screens."""

    def __init__(self, app: FlowApp) -> None:
        self.app = app

    async def choose_split(self, rows: list[dict[str, Any]], plan_lines: list[str],
                           predict: Callable[[str, float | None], str]
                           ) -> dict[str, float] | None:
        from console.ui.screens.modals import RebalanceScreen

        chosen: dict[str, float] | None = await self.app.push_screen_wait(
            RebalanceScreen(rows, plan_lines, predict))
        return chosen

    async def choose_watchdog(self, armed: bool | None, next_stop: str | None, now: float,
                              extension: str | None) -> dict[str, Any] | None:
        from console.model.gateway import who_text
        from console.ui.screens.modals import WatchdogScreen

        state = self.app.console_state()
        who = who_text(state.gateway, state.now, state.active_window_s)
        chosen: dict[str, Any] | None = await self.app.push_screen_wait(
            WatchdogScreen(armed, next_stop, now, extension, who))
        return chosen


class AppFlowHost:
    """The flow's host in the Textual app (the flow runs in one of its workers)."""

    def __init__(self, app: FlowApp, ready: asyncio.Event) -> None:
        self.app = app
        self._ready = ready
        self.dialogs: Dialogs = ScreenDialogs(app)

    def registry_now(self) -> OperationRegistry | None:
        ctx = self.app.session.ctx
        return ctx.registry if ctx is not None else None

    async def registry_ready(self) -> OperationRegistry:
        await self._ready.wait()
        ctx = self.app.session.ctx
        assert ctx is not None
        return ctx.registry

    def facts(self) -> OperationFacts:
        from console.model.gateway import who_text

        session = self.app.session
        ctx = session.ctx
        assert ctx is not None
        state = self.app.console_state()
        return OperationFacts(now=self.app.now(), pod=session.pod,
                              snapshot=session.snapshot, settings=ctx.settings,
                              profile_name=ctx.profile_name, profile=ctx.profile,
                              targets=ctx.poller.targets,
                              agent_configured=ctx.agent is not None and ctx.agent.configured,
                              planner=ctx.planner,
                              who=who_text(state.gateway, state.now, state.active_window_s))

    def now(self) -> float:
        return self.app.now()

    def note(self, text: str, style: str = "", replace: bool = False) -> None:
        self.app.note(text, style, replace)

    async def confirm(self, title: str, question: str) -> bool:
        from console.ui.screens.modals import ConfirmScreen

        answer: bool | None = await self.app.push_screen_wait(ConfirmScreen(title, question))
        return bool(answer)

    def open_progress(self, title: str, on_cancel: Callable[[], None] | None,
                      compact: bool = False) -> ProgressView:
        from console.operations.specs import SPECS
        from console.ui.screens.modals import ProgressScreen

        # a stop warning can be acted on from a running operation's dialog too
        screen = ProgressScreen(title, on_cancel=on_cancel,
                                urgent_keys=frozenset({SPECS["watchdog"].key}),
                                compact=compact)
        self.app.push_screen(screen)
        return screen

    def show_state(self) -> None:
        self.app.call_later(self.app.refresh_screens)

    def refresh_now(self) -> None:
        self.app.session.refresh_now()

    def record_event(self, event: AlertEvent) -> None:
        self.app.session.alerts.event(event)
