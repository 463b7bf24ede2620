"""Entry point of ``pod-console``: one parser, subcommands in ``console.commands``."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from console import __version__
from console.config.config_file import CONTEXT_ENV

CONSOLE_COMMANDS = ("watch", "wall", "demo")
"""Commands that open the console (garbage collection is off while it starts)."""


COMMANDS = {
    "profile": "profile_cmd", "metrics": "metrics_cmd", "catalog": "catalog_cmd",
    "status": "status_cmd", "fleet": "fleet_cmd",
    "watch": "tui_cmd", "wall": "tui_cmd", "demo": "tui_cmd",
    "up": "pod_cmd", "down": "pod_cmd", "rebalance": "rebalance_cmd",
    "smoke": "verify_cmd", "bench": "verify_cmd", "record": "record_cmd",
    "replay": "replay_cmd", "doctor": "doctor_cmd",
}
"""Each subcommand and the module of ``console.commands`` that registers it (in the order
``--help`` lists them). A run imports and builds only the module of the command it was
given: the other eleven, their parsers and what they import cost a console's start
~5–8 ms (measured)."""

TOP_VALUED = ("--context", "--config")
"""The top-level options that take a value (``--context NAME``), skipped when looking for
the command."""


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names, ``watch`` when it names none (plain ``pod-console``
    opens the console), or None when every command's parser is wanted: ``--help`` or
    ``--version`` before any command, or a word that is no command (argparse's error then
    lists them all)."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in TOP_VALUED:
            skip = True
        elif word.startswith("-"):
            if word.split("=", 1)[0] not in TOP_VALUED:
                return None  # -h, --version, or a mistake: the whole parser answers
        else:
            return word if word in COMMANDS else None
    return "watch"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``pod-console`` parser: every subcommand's, or with ``command`` only the
    subcommands its module registers (it parses that command's arguments the same)."""
    parser = argparse.ArgumentParser(
        prog="pod-console",
        description="Terminal operations console for vLLM on rented GPU pods.")
    parser.add_argument("--version", action="version", version=f"pod-console {__version__}")
    sub = parser.add_subparsers(dest="command")
    wanted = dict.fromkeys(COMMANDS.values()) if command is None else [COMMANDS[command]]
    for module in wanted:
        importlib.import_module(f"console.commands.{module}").register(sub)
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
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(chosen_command(argv))
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
