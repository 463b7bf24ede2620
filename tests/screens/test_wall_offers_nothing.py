"""A wall session offers no operation at all (issue 31, finding 11: from a browser, the web
wall's palette ran "Acknowledge alerts" and "Smoke test", audited as the server's user).

The real app in wall mode, on static sources (no process): its palette lists no
operation, as a browser opens it too; no key reaches one; ctrl+r is a poll, never an
operation, and a held key does not turn into pod reads; whatever still asks for one is
refused at the sender."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from textual.command import CommandList, CommandPalette

from console.ui.screens.alerts import AlertHistoryScreen
from console.ui.screens.main import OPERATION_BINDINGS
from console.ui.screens.wall import WallScreen
from tests.support.static_app import NOW, build
from tests.support.waits import wait_for


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class Counted:
    """A source that counts its polls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.targets = getattr(inner, "targets", ())
        self.prometheus_url = None

    async def poll(self, *args: Any) -> Any:
        self.calls += 1
        return await self.inner.poll(*args)

    async def aclose(self) -> None:
        return None

    def __getattr__(self, name: str) -> Any:  # the rest (a pod collector's pod_id) as is
        return getattr(self.inner, name)


def palette_prompts(app: Any) -> list[str]:
    options = app.screen.query_one(CommandList)
    """The title of each command the open palette lists (its first line)."""
    return [str(options.get_option_at_index(i).prompt).split("\n")[0]
            for i in range(options.option_count)]


async def test_the_wall_offers_no_operation(tmp_path: Path) -> None:
    app = build(tmp_path, wall=True, down_slot=True)  # Q27 down: an alert to acknowledge
    ctx, reg = app.ctx, app.ctx.registry
    clock = Clock(NOW)
    ctx.clock = clock
    pods = Counted(ctx.pod_collector)
    ctx.pod_collector = pods
    operations = {s.title for s in reg.specs.values()}
    assert {"Acknowledge alerts", "Smoke test"} <= operations
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, WallScreen)
                              and bool(app.alerts.firing()))

        # the palette's commands: a poll, help, navigation; no operation
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert "Refresh now" in titles
        assert not titles & operations, titles & operations
        assert not [t for t in titles if t.startswith("Demo fault")]
        # as a browser opens it: ctrl+p lists every command before anything is typed
        await pilot.press("ctrl+p")
        assert await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
        assert await wait_for(pilot, lambda: "Refresh now" in palette_prompts(app))
        shown = set(palette_prompts(app))
        assert "Help: keys" in shown
        assert not shown & operations, shown & operations
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: isinstance(app.screen, WallScreen))

        # every operation's key, and "a" in the alert history: nothing reaches the sender
        for b in OPERATION_BINDINGS:
            await pilot.press(b.key.split(",")[0])
            await pilot.pause()
        await pilot.press("A")
        assert await wait_for(pilot, lambda: isinstance(app.screen, AlertHistoryScreen))
        await pilot.press("a")
        await pilot.pause()
        assert reg.executed == [] and reg.history == []
        assert all(a.acked_by is None for a in app.alerts.firing())
        await pilot.press("escape")

        # ctrl+r held down: a poll, never an operation, and no pod read per keystroke
        assert await wait_for(pilot, lambda: not app.session.polling)
        pod_reads, polls = pods.calls, app.polls
        pressed_at = time.monotonic()
        for _ in range(20):
            await pilot.press("ctrl+r")
        await pilot.pause()
        assert await wait_for(pilot, lambda: not app.session.polling)
        assert pods.calls == pod_reads  # (before: one RunPod request per keystroke)
        # at most one a second on the console's clock (held still here), and the refresh
        # timer's, which runs on real time: as many as the presses took refreshes (a
        # loaded machine takes longer over twenty keys), not a count fixed in advance
        timer_ticks = (time.monotonic() - pressed_at) // ctx.settings.refresh_s + 1
        assert app.polls - polls <= 1 + timer_ticks, (app.polls - polls, timer_ticks)
        clock.t += 1.5  # a second later a poll is done again when asked
        polls = app.polls
        await pilot.press("ctrl+r")
        assert await wait_for(pilot, lambda: app.polls > polls)
        assert reg.executed == [] and reg.history == []

        # asked for anyway (a message, a script): refused at the sender, nothing runs
        for op in ("ack", "smoke"):
            app.start_operation(op)
        assert await wait_for(pilot, lambda: len(reg.history) == 2)
        assert sorted((op, out.state) for _, op, out in reg.history) == [
            ("ack", "refused"), ("smoke", "refused")]
        assert reg.executed == []
        assert all(a.acked_by is None for a in app.alerts.firing())
