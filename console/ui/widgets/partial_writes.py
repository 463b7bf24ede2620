"""Terminal writes that start where a line changed, not at the widget's left edge.

Textual (8.x) sends a repainted region to a real terminal with
``ChopsUpdate.render_segments``: it cuts each piece of a line at the region's right end
but always starts it at the widget's left edge. A table row whose TTFT moved from 2.30s
to 2.31s is then rewritten from its first column: ~400 bytes a row per poll, most of
the console's terminal output over SSH. (Its Rich path, ``__rich_console__``, does skip
to the region's start; only the path used for real terminals does not.)

``install()`` replaces that one method with one that crops both ends, and writes each
piece's style as a change from the piece before it (``sgr_runs``). The output is the
same cells at the same places, minus the unchanged ones to the left. The app installs
it once its first frame is out (the check below reads Textual's source, ~8 ms not spent
before the first number), and only over the implementation it was written against: the
SHA-256 of that method's source is pinned (``console/ui/private_reach.py``). A Textual
whose method reads otherwise (an upgrade, a patch) keeps its own writes, and the log
says why; whoever upgrades compares the new method with ``render_segments`` below and
adds its digest.
"""

from __future__ import annotations

import logging

import textual
from rich.console import Console
from rich.control import Control
from textual import _compositor

from console.ui.private_reach import BY_NAME, digest
from console.ui.widgets.sgr_runs import StyleRuns

log = logging.getLogger(__name__)

WRITTEN_FOR = BY_NAME["partial terminal writes"].read
"""SHA-256 of the source of each ``ChopsUpdate.render_segments`` that this replaces
(read and checked against that version), and the version it was read from: its entry
among the console's private reaches (``console/ui/private_reach.py``)."""
__all__ = ["WRITTEN_FOR", "digest", "install", "render_segments"]


def render_segments(self: _compositor.ChopsUpdate, console: Console) -> str:
    runs = StyleRuns(console.color_system)  # one running style across the update's pieces
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
            runs.raw(move_to(start, y).segment.text)
            runs.add(strip)
        if y != last_y:
            runs.raw("\n")
    return runs.end()


def install() -> bool:
    """Use the cropping writer; False (and nothing changed) if Textual's differs from the
    one this was written against, so a Textual upgrade can never be silently broken."""
    current = _compositor.ChopsUpdate.render_segments
    if current is render_segments:
        return True
    found = digest(current)
    if found not in WRITTEN_FOR:
        log.warning(
            "partial terminal writes off: textual %s's ChopsUpdate.render_segments is not "
            "the one they were written for (%s: sha256 %s, expected one of %s); Textual's "
            "own writes are used", textual.__version__,
            "its source is unreadable" if found is None else "its source differs",
            found, ", ".join(f"{d[:12]}… ({v})" for d, v in WRITTEN_FOR.items()))
        return False
    _compositor.ChopsUpdate.render_segments = render_segments  # type: ignore[method-assign]
    return True
