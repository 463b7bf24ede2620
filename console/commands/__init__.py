"""Headless subcommands of ``pod-console``; each module registers its own parser."""

import argparse
from typing import TypedDict

from console.model.fmt import aligned

__all__ = ["aligned", "examples"]


class Epilog(TypedDict):
    """The ``add_parser`` keywords ``examples`` gives (typed, so that ``**`` of them
    type-checks against ``add_parser``'s own)."""

    epilog: str
    formatter_class: type[argparse.HelpFormatter]


def examples(*lines: str) -> Epilog:
    """``add_parser`` keywords that end a subcommand's --help with worked examples."""
    return {"epilog": "examples:\n" + "\n".join(f"  {ln}" for ln in lines),
            "formatter_class": argparse.RawDescriptionHelpFormatter}
