"""``pod-console replay [FILE] [--at TIME]`` and ``replay --list``: a recording opened on
the console's own screens, read-only (``console/session/record/replay.py``).

Without FILE, the newest recording under ``STATE_DIR/recordings/``. A file that is
missing, unreadable or not a recording, and a ``--at`` that is not a time, end with one
sentence naming what is wrong and status 1 or 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from console.commands import examples

if TYPE_CHECKING:
    from console.config.settings import Settings
    from console.session.record.cursor import ReplayCursor
    from console.session.record.tape import Tape


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay a recording on the console's screens (read-only)",
        **examples(
            'pod-console replay                      # the newest recording, from its start',
            'pod-console replay --at "10m ago"       # ... from ten minutes ago',
            'pod-console replay incident.podrec --at 03:10',
            'pod-console replay --list               # the recordings and their incidents',
            'keys: space play/pause · t/T one sample · j/J jump · [/] markers · 1/2/3 speed',
        ))
    p.add_argument("file", nargs="?", type=Path, metavar="FILE",
                   help="a recording (default: the newest under STATE_DIR/recordings/)")
    p.add_argument("--at", metavar="TIME",
                   help="where to start: 03:10, 03:10:05, 2026-11-18T03:10, \"10m ago\", a "
                        "duration from the start (5m), --at=-5m from the end, start, end")
    p.add_argument("--list", action="store_true",
                   help="list the recordings (newest first) and the alerts that fired in them")
    p.add_argument("--wall", action="store_true", help="on the wall's screen")
    p.add_argument("--config", type=Path, help="the config whose STATE_DIR holds recordings")
    p.set_defaults(func=cmd_replay)


def settings_of(config: Path | None) -> Settings:
    from console.config.settings import load_settings

    return load_settings(config)


def cmd_replay(args: argparse.Namespace) -> int:
    from console.config.settings import ConfigError
    from console.session.record import files

    try:
        settings = settings_of(getattr(args, "config", None))
        state_dir = settings.state_dir
    except ConfigError as exc:
        print(f"pod-console replay: {exc}", file=sys.stderr)
        return 2
    if args.list:
        return list_recordings(state_dir, args.file)
    try:
        path = args.file if args.file is not None else files.newest_recording(state_dir)
        tape = files.open_tape(path)
    except files.NotARecording as exc:
        print(f"pod-console replay: {exc}", file=sys.stderr)
        return 1
    from console.session.record.cursor import WhenError
    from console.session.record.replay import Replay

    try:
        if not tape.times():
            raise files.NotARecording(f"{path}: a recording with no polls in it")
        check_readable(tape, path)
        replay = Replay(tape, state_dir=state_dir)
        if args.at:
            start_at(replay.cursor, args.at)
    except (WhenError, files.NotARecording, ValueError) as exc:
        tape.close()
        print(f"pod-console replay: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, WhenError) else 1
    from console.commands.tui_cmd import run_console
    from console.ui.app import make_app

    # the viewer's theme, not the recorder's
    return run_console(make_app(replay, wall=args.wall, theme=settings.theme))


def check_readable(tape: Tape, path: Path) -> None:
    """Read the first and the last poll and the markers before any screen opens: a file
    that is corrupt or crafted (its state of the wrong shape, a self-reference, a bomb)
    ends here with one sentence (:class:`NotARecording`), not on a screen or in a
    traceback."""
    from console.session.record import files

    n = len(tape.times())
    try:
        tape.markers()
        for i in sorted({0, n - 1}):
            tape.state_at(i)
    except files.NotARecording:
        raise
    except Exception as exc:  # the reader's own sentence, or what a crafted file raised
        from console.session.record.store import RecordingError

        if isinstance(exc, RecordingError):
            raise files.NotARecording(str(exc)) from None
        raise files.NotARecording(f"{path}: corrupt, or not written by a pod-console "
                                  f"({type(exc).__name__})") from None


def start_at(cursor: ReplayCursor, text: str) -> None:
    """``--at``: a moment, a duration from the start (``-5m``: from the end), a clock
    time on the recording's first day (the next day's, when that is before the start)."""
    import time

    from console.session.record.cursor import parse_when

    times = cursor.times()
    when = parse_when(text, position=times[0], now=time.time())
    if when.at is not None:
        at = when.at
        if at < times[0] and ":" in text and "T" not in text and "-" not in text:
            at += 86400.0  # 01:00 in a recording that began at 23:00: the next day's
        cursor.seek(at)
    elif when.by < 0:
        cursor.seek(times[-1] + when.by)
    else:
        cursor.seek(times[0] + when.by)


def list_recordings(state_dir: Path, file: Path | None) -> int:
    import time

    from console.model.printable import printable
    from console.session.record import files

    try:
        paths = [file] if file is not None else files.list_recordings(state_dir)
    except files.NotARecording as exc:
        print(f"pod-console replay: {exc}", file=sys.stderr)
        return 1
    if not paths:
        print(f"no recordings in {files.recordings_dir(state_dir)}")
        return 0

    def when(t: float | None) -> str:
        return "—" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))

    bad = 0
    for p in paths:
        s = files.summarize(p)
        size = f"{s.size / 1e6:.1f} MB" if s.size >= 1e5 else f"{s.size / 1e3:.0f} KB"
        if s.problem is not None:
            bad += 1
            print(printable(f"{p}  {size}  cannot be read: {s.problem}"))
            continue
        span = f"{when(s.first)} → {when(s.last)[11:]}"
        print(f"{p}  {size}  {span}  {s.polls} polls  "
              f"{len(s.incidents)} incident{'s' if len(s.incidents) != 1 else ''}")
        for line in s.incidents:
            print(f"    {printable(line)}")  # an alert's title: outside text
    return 1 if file is not None and bad else 0
