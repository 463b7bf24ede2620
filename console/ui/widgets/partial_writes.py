"""Terminal writes that start where a line changed, not at the widget's left edge.

Textual (8.x) sends a repainted region to a real terminal with
``ChopsUpdate.render_segments``: it cuts each piece of a line at the region's right end
but always starts it at the widget's left edge. A table row whose TTFT moved from 2.30s
to 2.31s is then rewritten from its first column: ~400 bytes a row per poll, most of
the console's terminal output over SSH. (Its Rich path, ``__rich_console__``, does skip
to the region's start; only the path used for real terminals does not.)

``install()`` replaces that one method with one that crops both ends. The output is the
same cells at the same places, minus the unchanged ones to the left. It is installed
once, by the app factory, and only over the implementation it was written against.
"""

from __future__ import annotations

import textual
from rich.console import Console
from rich.control import Control
from textual import _compositor

WRITTEN_FOR = "8."
"""The Textual major version whose ``ChopsUpdate.render_segments`` this replaces."""


def render_segments(self: _compositor.ChopsUpdate, console: Console) -> str:
    out: list[str] = []
    append = out.append
    move_to = Control.move_to
    last_y = self.spans[-1][0]
    for y, x1, x2 in self.spans:
        for end, (x, strip) in zip(self.chop_ends[y], self.chops[y].items(), strict=False):
            if strip is None or x > x2 or end <= x1:
                continue
            start = max(x, x1)
            stop = min(end, x2)
            if start > x or stop < end:
                strip = strip.crop(start - x, stop - x)
            append(move_to(start, y).segment.text)
            append(strip.render(console))
        if y != last_y:
            append("\n")
    return "".join(out)


def install() -> bool:
    """Use the cropping writer; False (and nothing changed) if Textual's differs from the
    one this was written against, so a Textual upgrade can never be silently broken."""
    if _compositor.ChopsUpdate.render_segments is render_segments:
        return True
    if not textual.__version__.startswith(WRITTEN_FOR):
        return False
    _compositor.ChopsUpdate.render_segments = render_segments  # type: ignore[method-assign]
    return True
