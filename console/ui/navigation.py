"""The screens a key opens: detail, log, GPUs, gateway, fleet (and a switch to another
context's pod), alert history, help; a slot's log lines fetched for the detail. Held by
the app (``app.navigation``), whose key actions call it: each screen is built from the
state of the poll shown (``console_state``), never from a copy."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from console.ui.host import Host

if TYPE_CHECKING:
    import asyncio


class NavigationHost(Host, Protocol):
    """What navigation needs of the app besides :class:`~console.ui.host.Host`."""

    @property
    def log_lines(self) -> Sequence[tuple[float, str, str]]: ...

    @property
    def replaying(self) -> bool: ...

    @property
    def context_ready(self) -> asyncio.Event:
        """Set once the full context is built (a staged start builds it in a thread)."""

    def allowed(self, operation_id: str) -> bool: ...

    def pop_screen(self) -> object: ...

    def exit(self, result: Any = None, return_code: int = 0, message: Any = None) -> None: ...


class Navigation:
    def __init__(self, app: NavigationHost) -> None:
        self.app = app

    def open_detail(self, slot: str) -> None:
        from console.ui.screens.detail import SlotDetailScreen

        self.app.push_screen(SlotDetailScreen(self.app.console_state(), slot))

    def full_log(self) -> None:
        from console.ui.screens.log import LogScreen

        if not isinstance(self.app.screen, LogScreen):
            self.app.push_screen(LogScreen(self.app.console_state(),
                                           tuple(self.app.log_lines)))

    def gpus(self) -> None:
        from console.ui.screens.gpus import GpuScreen

        if not isinstance(self.app.screen, GpuScreen):
            self.app.push_screen(GpuScreen(self.app.console_state()))

    def gateway(self) -> None:
        from console.ui.screens.gateway import GatewayScreen

        if not isinstance(self.app.screen, GatewayScreen):
            self.app.push_screen(GatewayScreen(self.app.console_state()))

    def fleet(self) -> None:
        from console.ui.screens.fleet import FleetScreen

        if len(self.app.session.view.contexts) < 1:
            self.app.note("the config names no contexts: this console's pod is the whole "
                          "fleet (docs/configuration.md, \"Several pods\")", "warn")
            return
        if not isinstance(self.app.screen, FleetScreen):
            self.app.push_screen(FleetScreen(self.app.console_state()))
        self.app.session.want_fleet()  # now, then at every tick while its screen is open

    def fleet_shown(self) -> bool:
        """Whether anyone looks at the fleet (else other pods are not polled). Asked at
        every tick from the first: while the fleet screen's module was never loaded, no
        fleet screen can be open, and the first poll does not wait for that import."""
        fleet = sys.modules.get("console.ui.screens.fleet")
        if fleet is None:
            return False
        return any(isinstance(s, fleet.FleetScreen) for s in self.app.screen_stack)

    def switch_context(self, name: str) -> None:
        """Reopen the console on another context's pod (a new process on the same
        terminal: nothing of this pod's state carries over to that one)."""
        from console.session.view import SwitchRequest

        if name == self.app.session.view.context:
            self.app.pop_screen()
            return
        self.app.note(f"switching to context {name}", "bold")
        self.app.exit(SwitchRequest(name))

    def next_pod(self) -> None:
        """The wall's rotation through the config's pods."""
        view = self.app.session.view
        names = list(view.contexts)
        if len(names) < 2:
            return
        at = names.index(view.context) if view.context in names else -1
        self.switch_context(names[(at + 1) % len(names)])

    def alert_history(self) -> None:
        from console.ui.screens.alerts import AlertHistoryScreen

        if not isinstance(self.app.screen, AlertHistoryScreen):
            self.app.push_screen(AlertHistoryScreen(self.app.console_state()))

    def help(self) -> None:
        from console.ui.screen_help import help_for

        ctx = self.app.session.ctx
        specs = ctx.registry.specs if ctx is not None else {}
        # the help of the screen shown: its keys, its state words and columns
        self.app.push_screen(help_for(self.app.screen, specs, self.app.allowed,
                                      wall=self.app.wall, replay=self.app.replay is not None,
                                      live=not self.app.replaying))

    def load_slot_logs(self, slot: str, done: Callable[[list[str]], None]) -> None:
        async def fetch() -> None:
            await self.app.context_ready.wait()
            done(await self.app.session.slot_logs(slot))
        self.app.run_worker(fetch(), group="logs", exclusive=True, exit_on_error=False)
