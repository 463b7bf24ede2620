"""The session's recording (``record: true``): every poll into a file of its own, written
by the recorder's thread, never the loop. One room of the session (issue 46): whether it
records, which tab of a web wall records for all, and what paused it live here.

The session hands each poll over (:meth:`SessionRecording.poll`) and marks what is not a
poll (a step of the wall clock, an operation from the audit log).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from console.model.conditions import Condition
from console.model.printable import printable

if TYPE_CHECKING:
    from console.model.history import History
    from console.model.snapshot import PodSnapshot
    from console.session.record.store import Recorder, SharedTurn
    from console.session.record.tape import Marker
    from console.session.view import ConsoleContext, ConsoleState
    from console.sources.collect.poller import DeploymentPoller

Note = Callable[[str, str], None]


class RecordingHost(Protocol):
    """What the recording reads of its session."""

    ctx: ConsoleContext | None
    wall: bool
    failures: dict[str, Condition]

    def now(self) -> float: ...

    def mono(self) -> float: ...

    def state(self) -> ConsoleState: ...

    @property
    def poller(self) -> DeploymentPoller: ...

    @property
    def history(self) -> History: ...

    @property
    def refresh_s(self) -> float: ...


class SessionRecording:
    """One session's recorder, started at its first poll (see the module docstring)."""

    def __init__(self, host: RecordingHost, note: Note) -> None:
        self.host = host
        self._note = note
        self.recorder: Recorder | None = None
        """Every poll of this session into a file of its own (``record: true``)."""
        self._off = False
        self._turn: SharedTurn | None = None
        """Web wall tabs: whether this one is the tab that records (``SharedTurn``)."""

    def poll(self, pod_read: PodSnapshot | None) -> None:
        """This poll to the recorder's queue (its thread writes it: never the loop)."""
        host = self.host
        ctx = host.ctx
        if ctx is None or self._off or not ctx.settings.record:
            return
        from console.session.record.store import PollItem, SharedTurn, recordings_dir
        from console.sources.collect.http import relay_from_env

        if self._turn is None and host.wall and relay_from_env() is not None:
            # a web wall's tab: its slots come through the shared scrape relay, and one
            # tab records them for all (another takes over when that tab closes)
            self._turn = SharedTurn(recordings_dir(ctx.settings.state_dir) / "web-wall.lock")
        if self._turn is not None and not self._turn.mine():
            return
        try:
            rec = self.recorder or self._start(ctx)
            rec.poll(PollItem(host.state(), getattr(host.poller, "last_read", None), pod_read))
        except Exception as exc:  # the console goes on without its recording
            self._off = True
            self._note(f"recording off: {type(exc).__name__}: {exc}"[:200], "warn")

    def mark(self, marker: Marker) -> None:
        """What is not a poll (a clock step): into the file, when one is being written."""
        if self.recorder is not None:
            self.recorder.mark(marker)

    def _start(self, ctx: ConsoleContext) -> Recorder:
        from console.session.record.store import Recorder, recordings_dir
        from console.session.record.tape import Marker

        host = self.host
        loop = asyncio.get_running_loop()
        s = ctx.settings

        def paused(why: str | None) -> None:  # the writer thread's news, onto the loop
            loop.call_soon_threadsafe(self._paused, why)

        self.recorder = Recorder(
            recordings_dir(s.state_dir),
            {"profile": ctx.profile_name, "context": s.context, "wall": host.wall,
             "window_s": getattr(host.poller, "window_s", 300.0),
             "history_s": host.history.window_s,
             "refresh_s": host.refresh_s},
            keep_s=s.record_keep_days * 86400.0, max_bytes=int(s.record_max_mb * 1024 * 1024),
            clock=host.now, mono=host.mono, on_pause=paused)
        rec = self.recorder

        def audited(r: dict[str, Any]) -> None:  # the audit's thread: the queue is safe
            args = r.get("arguments")
            said = ", ".join(f"{k}={v}" for k, v in args.items()
                             if isinstance(v, (str, int, float)) and not isinstance(v, bool)
                             ) if isinstance(args, dict) else ""
            rec.mark(Marker(float(r.get("t") or host.now()), "operation",
                            printable(f"{r.get('action')} {r.get('result')}"
                                      + (f" ({said})" if said else ""), 200),
                            f"audit:{r.get('t')}:{r.get('action')}"))

        listeners = getattr(ctx.registry.audit, "listeners", None)
        if listeners is not None:
            listeners.append(audited)
        return rec

    def _paused(self, why: str | None) -> None:
        failures = self.host.failures
        if why is None:
            failures.pop("recording", None)
            self._note("recording resumed", "ok")
        else:
            failures["recording"] = Condition(
                "recording", "warn", "recording paused",
                f"{why}: polls are not recorded until it can write again")
            self._note(f"recording paused: {why}", "warn")

    def close(self) -> None:
        """The file closed and a web wall's turn given up (blocking: off the loop)."""
        if self.recorder is not None:
            self.recorder.close()
        if self._turn is not None:
            self._turn.release()
