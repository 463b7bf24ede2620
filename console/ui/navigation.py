"""The app's screens opened by a key: detail, log, GPUs, gateway, fleet (and a switch
to another context's pod), alert history, help; a slot's log lines fetched for the
detail. A mixin of :class:`~console.ui.app.PodConsoleApp`: each screen is built from the
state of the poll shown (``console_state``), never from a copy."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console.ui.app import PodConsoleApp


class Navigation:
    """Methods of the app (``self`` is a :class:`PodConsoleApp`)."""

    def open_detail(self: PodConsoleApp, slot: str) -> None:
        from console.ui.screens.detail import SlotDetailScreen

        self.push_screen(SlotDetailScreen(self.console_state(), slot))

    def action_full_log(self: PodConsoleApp) -> None:
        from console.ui.screens.log import LogScreen

        if not isinstance(self.screen, LogScreen):
            self.push_screen(LogScreen(self.console_state(), tuple(self.log_lines)))

    def action_gpus(self: PodConsoleApp) -> None:
        from console.ui.screens.gpus import GpuScreen

        if not isinstance(self.screen, GpuScreen):
            self.push_screen(GpuScreen(self.console_state()))

    def action_gateway(self: PodConsoleApp) -> None:
        from console.ui.screens.gateway import GatewayScreen

        if not isinstance(self.screen, GatewayScreen):
            self.push_screen(GatewayScreen(self.console_state()))

    def action_fleet(self: PodConsoleApp) -> None:
        from console.ui.screens.fleet import FleetScreen

        if len(self.view.contexts) < 1:
            self.note("the config names no contexts: this console's pod is the whole fleet "
                      "(docs/configuration.md, \"Several pods\")", "warn")
            return
        if not isinstance(self.screen, FleetScreen):
            self.push_screen(FleetScreen(self.console_state()))
        self.session.want_fleet()  # now, then at every tick while its screen is open

    def _fleet_shown(self: PodConsoleApp) -> bool:
        """Whether anyone looks at the fleet (else other pods are not polled)."""
        from console.ui.screens.fleet import FleetScreen

        return any(isinstance(s, FleetScreen) for s in self.screen_stack)

    def on_fleet_screen_switch_context(self: PodConsoleApp, message: Any) -> None:
        self.switch_context(message.context)

    def switch_context(self: PodConsoleApp, name: str) -> None:
        """Reopen the console on another context's pod (a new process on the same
        terminal: nothing of this pod's state carries over to that one)."""
        from console.session.view import SwitchRequest

        if name == self.view.context:
            self.pop_screen()
            return
        self.note(f"switching to context {name}", "bold")
        self.exit(SwitchRequest(name))

    def _next_pod(self: PodConsoleApp) -> None:
        """The wall's rotation through the config's pods."""
        names = list(self.view.contexts)
        if len(names) < 2:
            return
        at = names.index(self.view.context) if self.view.context in names else -1
        self.switch_context(names[(at + 1) % len(names)])

    def action_alert_history(self: PodConsoleApp) -> None:
        from console.ui.screens.alerts import AlertHistoryScreen

        if not isinstance(self.screen, AlertHistoryScreen):
            self.push_screen(AlertHistoryScreen(self.console_state()))

    def action_help(self: PodConsoleApp) -> None:
        from console.ui.screen_help import help_for

        specs = self.ctx.registry.specs if self.ctx is not None else {}
        # the help of the screen shown: its keys, its state words and columns
        self.push_screen(help_for(self.screen, specs, self.allowed, wall=self.wall,
                                  replay=self.replay is not None, live=not self.replaying))

    def load_slot_logs(self: PodConsoleApp, slot: str, done: Callable[[list[str]], None]) -> None:
        async def fetch() -> None:
            await self._context_ready.wait()
            done(await self.session.slot_logs(slot))
        self.run_worker(fetch(), group="logs", exclusive=True, exit_on_error=False)
