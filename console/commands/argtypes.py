"""Numbers on the command line, checked where they enter: finite and within bounds.

``float("nan")``, ``float("inf")`` and ``-3`` all parse; a deadline of NaN ends at once,
an infinite one never, and a negative count of rounds reads as "no capacity after -3
rounds". Each option says its own range instead, as argparse's usage error (exit 2).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def seconds(low: float, high: float, *, above: bool = False) -> Callable[[str], float]:
    """A number of seconds in ``[low, high]`` (``(low, high]`` when ``above``)."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(v) or v > high or (v <= low if above else v < low):
            lo = f"more than {low:g}" if above else f"at least {low:g}"
            raise argparse.ArgumentTypeError(f"{text!r}: seconds, {lo} and at most {high:g}")
        return v
    parse.__name__ = "seconds"  # argparse names the type in its message
    return parse


def count(low: int, high: int) -> Callable[[str], int]:
    """A whole number in ``[low, high]``."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= v <= high:
            raise argparse.ArgumentTypeError(f"{text!r}: from {low} to {high}")
        return v
    parse.__name__ = "count"
    return parse
