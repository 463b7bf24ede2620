"""The CLI builds only the parser of the command it is given (issue 47: a console's start
does not pay for the other eleven command modules), and that parser is the full one's."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys

import pytest

from console import cli


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


FULL = _subparsers(cli.build_parser())


def test_the_table_names_every_command_the_modules_register() -> None:
    assert list(FULL) == list(cli.COMMANDS)


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_a_command_alone_parses_as_in_the_full_parser(command: str) -> None:
    alone = _subparsers(cli.build_parser(command))
    assert command in alone
    assert alone[command].format_help() == FULL[command].format_help()
    # only the commands of its own module are built
    assert {cli.COMMANDS[c] for c in alone} == {cli.COMMANDS[command]}


@pytest.mark.parametrize(("argv", "chosen"), [
    ([], "watch"),
    (["--config", "pod.yaml"], "watch"),
    (["--context", "b", "--config=pod.yaml"], "watch"),
    (["--context", "metrics", "status", "--json"], "status"),
    (["down", "--yes"], "down"),
    (["--help"], None),
    (["--version"], None),
    (["-h", "watch"], None),
    (["bogus"], None),
])
def test_the_command_is_found_past_the_top_options(argv: list[str], chosen: str | None) -> None:
    assert cli.chosen_command(argv) == chosen


def test_the_top_help_and_a_wrong_command_still_list_every_command() -> None:
    for argv in (["--help"], ["bogus"]):
        r = subprocess.run([sys.executable, "-m", "console.cli", *argv], capture_output=True,
                           text=True, timeout=60)
        out = r.stdout + r.stderr
        assert all(c in out for c in cli.COMMANDS), out


def test_a_console_start_imports_no_other_command_module() -> None:
    code = ("import sys\nfrom console import cli\n"
            "try:\n    cli.main(['watch', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('console.commands.')))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, check=True)
    loaded = ast.literal_eval(r.stdout.strip().splitlines()[-1])
    assert "console.commands.tui_cmd" in loaded
    others = {f"console.commands.{m}" for m in cli.COMMANDS.values()} - {
        "console.commands.tui_cmd"}
    assert not others & set(loaded), loaded
