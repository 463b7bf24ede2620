"""Headless subcommands of ``pod-console``; each module registers its own parser."""

from console.model.fmt import aligned

__all__ = ["aligned", "examples"]


def examples(*lines: str) -> dict[str, object]:
    """``add_parser`` keywords that end a subcommand's --help with worked examples."""
    import argparse

    return {"epilog": "examples:\n" + "\n".join(f"  {ln}" for ln in lines),
            "formatter_class": argparse.RawDescriptionHelpFormatter}
