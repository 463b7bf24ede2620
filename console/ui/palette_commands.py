"""What the command palette (ctrl+p) offers: Textual's own commands, the operations the
registry allows (none on a wall), refresh, fleet and contexts, help, and the demo's
faults. Each runs through the error boundary: a palette command runs in the app's own
message loop, where an exception would end the console. A mixin of
:class:`~console.ui.app.PodConsoleApp`."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from textual.app import SystemCommand
from textual.screen import Screen

from console.config.defaults import THEMES

if TYPE_CHECKING:
    from console.ui.app import PodConsoleApp


THEME_HELP = {"default": "the console's usual colours",
              "high-contrast": "black ground, full-white text, no faint text",
              "colour-blind": "no red/green: ok blue, warnings yellow, critical orange",
              "mono": "no colour: state by glyph, word, bold and reverse video"}
"""What the palette says of each theme (``console/ui/themes.py``)."""


class PaletteCommands:
    """Methods of the app (``self`` is a :class:`PodConsoleApp`)."""

    theme_picked = False
    """A theme was picked in the palette: the config's no longer replaces it."""

    def pick_theme(self: PodConsoleApp, name: str) -> None:
        """The palette's "Theme: NAME": every screen in it from now on (this session;
        ``theme:`` in the config keeps one)."""
        self.theme_picked = True
        self.use_theme(name)
        self.note(f"theme {name} (for this session; `theme: {name}` in the config keeps it)",
                  "dim")

    def action_command_palette(self: PodConsoleApp) -> None:
        """The palette that closes once and never fails for being closed
        (``console/ui/palette.py``)."""
        from textual.command import CommandPalette

        from console.ui.palette import ConsolePalette

        if self.use_command_palette and not CommandPalette.is_open(self):
            self.push_screen(ConsolePalette(id="--command-palette"))

    def get_system_commands(self: PodConsoleApp, screen: Screen) -> Iterable[SystemCommand]:
        """Every command through the error boundary: it runs in the app's own message
        loop, where an exception would end the console."""
        for cmd in self._system_commands(screen):
            yield SystemCommand(cmd.title, cmd.help, self._guarded(cmd.title, cmd.callback),
                                cmd.discover)

    def _guarded(self: PodConsoleApp, title: str, fn: Callable[[], Any]) -> Callable[[], Any]:
        async def run() -> None:
            if self._exit:
                return
            try:
                result = fn()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                self.failed(f"palette command {title!r}", exc)
        return run

    def _system_commands(self: PodConsoleApp, screen: Screen) -> Iterable[SystemCommand]:
        for cmd in super().get_system_commands(screen):
            # Textual's "Screenshot" saves where the app runs: in a browser (the web
            # wall, demo --web) that is the server's disk, and the driver holds each
            # SVG in the session process until a download the page never asks for
            # (memory grew with every one). Offered where it saves for the viewer only.
            if cmd.title == "Screenshot" and (self.wall or self.is_web):
                continue
            # Textual's theme picker offers its own themes, which know none of the
            # console's state colours: the console's themes are offered below instead
            if cmd.title == "Theme":
                continue
            yield cmd
        for name in THEMES:
            if name != self.console_theme.name:
                yield SystemCommand(f"Theme: {name}", THEME_HELP[name],
                                    lambda n=name: self.pick_theme(n))
        if self.ctx is None:
            return  # operations appear once the console has loaded
        reg = self.ctx.registry
        for spec in reg.specs.values() if not self.wall else ():  # a wall offers none
            if reg.allowed(spec.id) and spec.id != "refresh":
                yield SystemCommand(spec.title, spec.description,
                                    lambda i=spec.id: self.start_operation(i))
        # a poll, not an operation (on a wall: at most one a second, see the session)
        yield SystemCommand("Refresh now", "poll every source now", self.action_refresh_now)
        if self.view.contexts:
            yield SystemCommand("Fleet: every pod", "one line per context's pod (F)",
                                self.action_fleet)
        for name in self.view.contexts:
            if name != self.view.context:
                yield SystemCommand(f"Context: {name}", f"reopen the console on {name}'s pod",
                                    lambda n=name: self.switch_context(n))
        yield SystemCommand("Help: keys", "show every key", self.action_help)
        if not self.wall:  # a wall's viewers are told the deployment, not its set-up
            yield SystemCommand("Doctor", "check the whole set-up (SSH, agent, slots, "
                                "Prometheus, gateway, clock, disk): results in the action "
                                "log", self.run_doctor)
        if self.ctx.demo is not None and not self.wall:
            # faults change the deployment: never from a read-only screen
            pod = self.ctx.deployment.machine_id if self.ctx.deployment is not None else None
            for title, help_, fn in self.ctx.demo.faults(pod):
                yield SystemCommand(f"Demo fault: {title}", help_,
                                    lambda f=fn, t=title: self._demo_fault(f, t))

    def _demo_fault(self: PodConsoleApp, fn: Callable[[], Any], title: str) -> None:
        assert self.ctx is not None
        if self._exit:
            return  # quitting: nothing new starts
        if self.wall or self.ctx.registry.read_only:
            self.note(f"DEMO fault {title} refused: read-only mode", "warn")
            return
        audit = self.ctx.registry.audit

        async def run() -> None:
            from console.operations.audit import AuditError

            try:
                await asyncio.to_thread(audit.append, "demo_fault", {"fault": title}, "started")
            except AuditError as exc:
                self.note(f"DEMO fault {title} not injected: {exc}", "crit.text")
                return
            r = fn()
            if asyncio.iscoroutine(r):
                await r
            self.note(f"DEMO fault injected: {title}", "busy")
            self.session.refresh_now()
        self.run_worker(run(), group="demo", exit_on_error=False)

    def run_doctor(self: PodConsoleApp) -> None:
        """``pod-console doctor``'s checks on this console's deployment, in a worker; each
        warning and failure, with its next step, then the count, in the action log."""
        assert self.ctx is not None
        if self._exit:
            return
        ctx = self.ctx
        self.note("doctor: checking…", "dim")

        async def run() -> None:
            from console.session.doctor import run_doctor

            try:
                report = await run_doctor(ctx.settings, deployment=ctx.deployment,
                                          transport=ctx.transport)
            except Exception as exc:  # the doctor's own failure is said, never fatal
                self.failed("doctor", exc)
                return
            for f in report.findings:
                if f.status in ("warn", "fail"):
                    self.note(f"doctor {f.status.upper()} {f.id}: {f.sentence} → "
                              f"{f.next_step}", "crit.text" if f.status == "fail" else "warn")
            n = {s: sum(f.status == s for f in report.findings) for s in ("ok", "warn",
                                                                          "fail")}
            style = "crit.text" if n["fail"] else "warn" if n["warn"] else "ok"
            self.note(f"doctor: {n['ok']} ok, {n['warn']} warning(s), {n['fail']} "
                      f"failure(s) (`pod-console doctor` for every check)", style)
        self.run_worker(run(), group="doctor", exclusive=True, exit_on_error=False)
