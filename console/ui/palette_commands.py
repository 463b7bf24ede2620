"""What the command palette (ctrl+p) offers: Textual's own commands, the operations the
registry allows (none on a wall), refresh, fleet and contexts, help, and the demo's
faults. Each runs through the error boundary: a palette command runs in the app's own
message loop, where an exception would end the console. Held by the app
(``app.palette_commands``), whose ``get_system_commands`` asks it."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from textual.app import SystemCommand
from textual.command import CommandPalette

from console.config.defaults import THEMES
from console.ui.host import Host
from console.ui.private_reach import holds

if TYPE_CHECKING:
    from console.ui.error_boundary import ErrorBoundary
    from console.ui.navigation import Navigation
    from console.ui.themes import ConsoleTheme


THEME_HELP = {"default": "the console's usual colours",
              "high-contrast": "black ground, full-white text, no faint text",
              "colour-blind": "no red/green: ok blue, warnings yellow, critical orange",
              "mono": "no colour: state by glyph, word, bold and reverse video"}
"""What the palette says of each theme (``console/ui/themes.py``)."""


class PaletteHost(Host, Protocol):
    """What the palette needs of the app besides :class:`~console.ui.host.Host`."""

    @property
    def is_web(self) -> bool: ...

    @property
    def console_theme(self) -> ConsoleTheme: ...

    @property
    def navigation(self) -> Navigation: ...

    @property
    def error_boundary(self) -> ErrorBoundary: ...

    def use_theme(self, name: str) -> ConsoleTheme: ...

    def start_operation(self, operation_id: str,
                        args: dict[str, Any] | None = None) -> None: ...

    # the app's key actions (read when the palette opens: what a key does, it does)
    def action_refresh_now(self) -> None: ...

    def action_fleet(self) -> None: ...

    def action_help(self) -> None: ...


class PaletteCommands:
    def __init__(self, app: PaletteHost) -> None:
        self.app = app
        self.theme_picked = False
        """A theme was picked in the palette: the config's no longer replaces it."""

    @staticmethod
    def palette() -> CommandPalette:
        """The palette that closes once and never fails for being closed
        (``console/ui/palette.py``); Textual's own where the code that one was written
        against has changed (``console/ui/private_reach.py``)."""
        if not holds("palette that closes once"):
            return CommandPalette(id="--command-palette")
        from console.ui.palette import ConsolePalette

        return ConsolePalette(id="--command-palette")

    def pick_theme(self, name: str) -> None:
        """The palette's "Theme: NAME": every screen in it from now on (this session;
        ``theme:`` in the config keeps one)."""
        self.theme_picked = True
        self.app.use_theme(name)
        self.app.note(f"theme {name} (for this session; `theme: {name}` in the config "
                      "keeps it)", "dim")

    def commands(self, textuals: Iterable[SystemCommand]) -> Iterable[SystemCommand]:
        """Every command (``textuals``: Textual's own for this screen) through the error
        boundary: it runs in the app's own message loop, where an exception would end
        the console."""
        for cmd in self._commands(textuals):
            yield SystemCommand(cmd.title, cmd.help, self._guarded(cmd.title, cmd.callback),
                                cmd.discover)

    def _guarded(self, title: str, fn: Callable[[], Any]) -> Callable[[], Any]:
        async def run() -> None:
            if self.app.exiting:
                return
            try:
                result = fn()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                self.app.error_boundary.failed(f"palette command {title!r}", exc)
        return run

    def _commands(self, textuals: Iterable[SystemCommand]) -> Iterable[SystemCommand]:
        app = self.app
        for cmd in textuals:
            # Textual's "Screenshot" saves where the app runs: in a browser (the web
            # wall, demo --web) that is the server's disk, and the driver holds each
            # SVG in the session process until a download the page never asks for
            # (memory grew with every one). Offered where it saves for the viewer only.
            if cmd.title == "Screenshot" and (app.wall or app.is_web):
                continue
            # Textual's theme picker offers its own themes, which know none of the
            # console's state colours: the console's themes are offered below instead
            if cmd.title == "Theme":
                continue
            yield cmd
        for name in THEMES:
            if name != app.console_theme.name:
                yield SystemCommand(f"Theme: {name}", THEME_HELP[name],
                                    lambda n=name: self.pick_theme(n))
        ctx, view = app.session.ctx, app.session.view
        if ctx is None:
            return  # operations appear once the console has loaded
        reg = ctx.registry
        for spec in reg.specs.values() if not app.wall else ():  # a wall offers none
            if reg.allowed(spec.id) and spec.id != "refresh":
                yield SystemCommand(spec.title, spec.description,
                                    lambda i=spec.id: app.start_operation(i))
        # a poll, not an operation (on a wall: at most one a second, see the session)
        yield SystemCommand("Refresh now", "poll every source now", app.action_refresh_now)
        if view.contexts:
            yield SystemCommand("Fleet: every pod", "one line per context's pod (F)",
                                app.action_fleet)
        for name in view.contexts:
            if name != view.context:
                yield SystemCommand(f"Context: {name}", f"reopen the console on {name}'s pod",
                                    lambda n=name: app.navigation.switch_context(n))
        yield SystemCommand("Help: keys", "show every key", app.action_help)
        if not app.wall:  # a wall's viewers are told the deployment, not its set-up
            yield SystemCommand("Doctor", "check the whole set-up (SSH, agent, slots, "
                                "Prometheus, gateway, clock, disk): results in the action "
                                "log", self.run_doctor)
        if ctx.demo is not None and not app.wall:
            # faults change the deployment: never from a read-only screen
            pod = ctx.deployment.machine_id if ctx.deployment is not None else None
            for title, help_, fn in ctx.demo.faults(pod):
                yield SystemCommand(f"Demo fault: {title}", help_,
                                    lambda f=fn, t=title: self.demo_fault(f, t))

    def demo_fault(self, fn: Callable[[], Any], title: str) -> None:
        """The palette's "Demo fault: TITLE": audited, then injected (in a worker)."""
        app, ctx = self.app, self.app.session.ctx
        assert ctx is not None
        if app.exiting:
            return  # quitting: nothing new starts
        if app.wall or ctx.registry.read_only:
            app.note(f"DEMO fault {title} refused: read-only mode", "warn")
            return
        audit = ctx.registry.audit

        async def run() -> None:
            from console.operations.audit import AuditError

            try:
                await asyncio.to_thread(audit.append, "demo_fault", {"fault": title}, "started")
            except AuditError as exc:
                app.note(f"DEMO fault {title} not injected: {exc}", "crit.text")
                return
            r = fn()
            if asyncio.iscoroutine(r):
                await r
            app.note(f"DEMO fault injected: {title}", "busy")
            app.session.refresh_now()
        app.run_worker(run(), group="demo", exit_on_error=False)

    def run_doctor(self) -> None:
        """``pod-console doctor``'s checks on this console's deployment, in a worker; each
        warning and failure, with its next step, then the count, in the action log."""
        app, ctx = self.app, self.app.session.ctx
        assert ctx is not None
        if app.exiting:
            return
        app.note("doctor: checking…", "dim")

        async def run() -> None:
            from console.session.doctor import run_doctor

            try:
                report = await run_doctor(ctx.settings, deployment=ctx.deployment,
                                          transport=ctx.transport)
            except Exception as exc:  # the doctor's own failure is said, never fatal
                app.error_boundary.failed("doctor", exc)
                return
            for f in report.findings:
                if f.status in ("warn", "fail"):
                    app.note(f"doctor {f.status.upper()} {f.id}: {f.sentence} → "
                             f"{f.next_step}", "crit.text" if f.status == "fail" else "warn")
            n = {s: sum(f.status == s for f in report.findings) for s in ("ok", "warn",
                                                                          "fail")}
            style = "crit.text" if n["fail"] else "warn" if n["warn"] else "ok"
            app.note(f"doctor: {n['ok']} ok, {n['warn']} warning(s), {n['fail']} "
                     f"failure(s) (`pod-console doctor` for every check)", style)
        app.run_worker(run(), group="doctor", exclusive=True, exit_on_error=False)
