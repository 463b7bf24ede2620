"""Headless subcommands of ``pod-console``; each module registers its own parser."""


def examples(*lines: str) -> dict[str, object]:
    """``add_parser`` keywords that end a subcommand's --help with worked examples."""
    import argparse

    return {"epilog": "examples:\n" + "\n".join(f"  {ln}" for ln in lines),
            "formatter_class": argparse.RawDescriptionHelpFormatter}


def aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows of cells as text lines, each column as wide as its widest cell."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]
