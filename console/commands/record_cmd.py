"""``pod-console record``: the console's recording without a screen (a machine with no
terminal, a cron'd recorder), and ``record export`` of a time range for a ticket."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from console.commands import examples
from console.commands.argtypes import seconds

if TYPE_CHECKING:
    from console.session.view import ConsoleContext


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("record", help="record every poll without a screen (headless)",
        **examples(
            'pod-console record                      # until ctrl+c; STATE_DIR/recordings/',
            'pod-console record --for 3600           # one hour',
            'pod-console record export --from "30m ago" --to now incident.podrec',
        ))
    r.add_argument("--config", type=Path)
    r.add_argument("--refresh", type=seconds(1, 3600), help="seconds between polls")
    r.add_argument("--for", dest="duration", type=seconds(0, 366 * 86400, above=True),
                   metavar="S", help="stop after this many seconds")
    r.set_defaults(func=cmd_record)
    rs = r.add_subparsers(dest="record_command")
    e = rs.add_parser("export", help="a time range as one self-contained file (no secrets)")
    e.add_argument("--config", type=Path)
    e.add_argument("--from", dest="t_from", required=True, metavar="TIME",
                   help="HH:MM, '30m ago', an ISO date and time, or epoch seconds")
    e.add_argument("--to", dest="t_to", default="now", metavar="TIME")
    e.add_argument("--recording", type=Path, metavar="FILE",
                   help="the recording to read (default: the one of the state directory "
                        "with the most polls in the range)")
    e.add_argument("file", type=Path, metavar="FILE")
    e.set_defaults(func=cmd_export)


def cmd_record(args: argparse.Namespace) -> int:
    from console.commands.tui_cmd import load_validated
    from console.config.settings import ConfigError
    from console.session.context import make_context
    from console.session.deployment import DeploymentError

    try:
        settings = load_validated(args.config, args.refresh)
        if not settings.record:
            print("pod-console record: recording is off in the settings (record: false)",
                  file=sys.stderr)
            return 2
        ctx = make_context(settings)
    except (ConfigError, DeploymentError) as exc:
        print(f"pod-console record: {exc}", file=sys.stderr)
        return 1
    return asyncio.run(_record(ctx, args.duration))


async def _record(ctx: ConsoleContext, duration: float | None) -> int:
    from console.session.session import Session

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)

    def note(text: str, style: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)

    session = Session(ctx, note=note)
    end = None if duration is None else time.monotonic() + duration
    said = False
    try:
        while not stop.is_set() and (end is None or time.monotonic() < end):
            began = time.monotonic()
            await session.poll()
            if not said and session.recorder is not None:
                await asyncio.to_thread(session.recorder.flush, 10.0)
                print(f"recording to {session.recorder.path}", flush=True)
                said = True
            wait = session.refresh_s - (time.monotonic() - began)
            if end is not None:
                wait = min(wait, end - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, wait))
    finally:
        await session.aclose()
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from console.config.settings import ConfigError, load_settings
    from console.session.record.export import export, secrets_of
    from console.session.record.files import NotARecording
    from console.session.record.reader import list_recordings
    from console.session.record.store import RecordingError, recordings_dir
    from console.session.record.when import parse_when

    now = time.time()
    try:
        t_from = now if args.t_from == "now" else parse_when(args.t_from, now)
        t_to = now if args.t_to == "now" else parse_when(args.t_to, now)
    except ValueError as exc:
        print(f"pod-console record export: {exc}", file=sys.stderr)
        return 2
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"pod-console record export: {exc}", file=sys.stderr)
        return 1
    src = args.recording
    if src is None:
        best = None
        try:
            found = list_recordings(recordings_dir(settings.state_dir))
        except NotARecording as exc:  # the folder itself cannot be read
            print(f"pod-console record export: {exc}", file=sys.stderr)
            return 1
        for info in found:
            if info.error or info.started is None or info.ended is None:
                continue
            overlap = min(info.ended, t_to) - max(info.started, t_from)
            if overlap >= 0 and (best is None or overlap > best[0]):
                best = (overlap, info.path)
        if best is None:
            print("pod-console record export: no recording holds a poll between those "
                  "times", file=sys.stderr)
            return 1
        src = best[1]
    try:
        n = export(src, args.file, t_from, t_to, secrets_of(settings))
    except RecordingError as exc:
        print(f"pod-console record export: {exc}", file=sys.stderr)
        return 1
    print(f"{n} polls of {src.name} written to {args.file}")
    return 0
