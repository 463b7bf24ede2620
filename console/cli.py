"""Entry point of ``pod-console``: one parser, subcommands in ``console.commands``."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from console import __version__
from console.commands import (
    catalog_cmd,
    doctor_cmd,
    fleet_cmd,
    metrics_cmd,
    pod_cmd,
    profile_cmd,
    rebalance_cmd,
    record_cmd,
    replay_cmd,
    status_cmd,
    tui_cmd,
    verify_cmd,
)
from console.config.config_file import CONTEXT_ENV

CONSOLE_COMMANDS = ("watch", "wall", "demo")
"""Commands that open the console (garbage collection is off while it starts)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pod-console",
        description="Terminal operations console for vLLM on rented GPU pods.")
    parser.add_argument("--version", action="version", version=f"pod-console {__version__}")
    sub = parser.add_subparsers(dest="command")
    profile_cmd.register(sub)
    metrics_cmd.register(sub)
    catalog_cmd.register(sub)
    status_cmd.register(sub)
    fleet_cmd.register(sub)
    tui_cmd.register(sub)
    pod_cmd.register(sub)
    rebalance_cmd.register(sub)
    verify_cmd.register(sub)
    record_cmd.register(sub)
    replay_cmd.register(sub)
    doctor_cmd.register(sub)
    _context_everywhere(parser)
    _config_before_or_after(parser)
    return parser


CONTEXT_HELP = "the deployment to act on, among the config's contexts (k9s-style)"


def _context_everywhere(parser: argparse.ArgumentParser, top: bool = True) -> None:
    """``--context NAME`` before the subcommand or after it, at every level."""
    parser.add_argument("--context", metavar="NAME", help=CONTEXT_HELP,
                        default=None if top else argparse.SUPPRESS)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sp in action.choices.values():
                _context_everywhere(sp, top=False)


CONFIG_HELP = "the config file (default: $POD_CONSOLE_CONFIG, else " \
    "$XDG_CONFIG_HOME/pod-console/config.yaml)"


def _config_before_or_after(parser: argparse.ArgumentParser) -> None:
    """``--config PATH`` before the subcommand (or with none: ``pod-console --config
    ctx.yaml`` opens the console) as well as after it. The subcommands' own ``--config``
    leaves the value alone when it is not given there (argparse would otherwise write
    its default, None, over the one given before the subcommand)."""
    parser.add_argument("--config", type=Path, metavar="PATH", default=None, help=CONFIG_HELP)

    def walk(p: argparse.ArgumentParser) -> None:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sp in action.choices.values():
                    for a in sp._actions:
                        if a.dest == "config":
                            a.default = argparse.SUPPRESS
                    walk(sp)
    walk(parser)


def _takes_config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> bool:
    """Whether the command chosen (down to its subcommand: ``profile render``) has a
    ``--config`` of its own."""
    for action in parser._actions:
        chosen = getattr(args, action.dest, None)
        if isinstance(action, argparse._SubParsersAction) and chosen in action.choices:
            sub = action.choices[chosen]
            return any(a.dest == "config" for a in sub._actions) or _takes_config(sub, args)
    return False


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if args.command is None:  # plain `pod-console` (any of its options) opens the console
        args = parser.parse_args(["watch", *argv])
    if args.config is not None and not _takes_config(parser, args):
        parser.error(f"--config: `{args.command}` reads no config file")
    if getattr(args, "context", None):
        # every settings load of this run, and every process it starts (a web wall's
        # sessions, a tmux demo), reads the same context
        os.environ[CONTEXT_ENV] = args.context
    if args.command in CONSOLE_COMMANDS and gc.isenabled():
        # The console's start-up builds a great many objects that live for the whole run
        # (Textual's DOM and styles, the modules it imports); collecting cycles while they
        # are being built is pure cost, ~30 ms before the first frame. The console turns
        # collection back on once it has loaded, after ``gc.freeze`` so later collections
        # do not re-scan them either; the ``finally`` covers an early exit.
        gc.disable()
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    finally:
        gc.enable()


def run() -> None:
    """The ``pod-console`` command: ``main``, then an exit bounded in time."""
    from console.ui.exit_guard import bound_exit

    code = main()
    bound_exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
