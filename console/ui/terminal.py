"""Whether the console's terminal is still there."""

from __future__ import annotations

import errno
import sys


def terminal_closed() -> bool:
    """The terminal closed without a SIGHUP reaching us (a pty whose other end was closed
    by a process that never made it our controlling terminal): reads then return
    end-of-file at once, and Textual's input thread would spin on them."""
    import termios

    try:
        out = sys.__stdout__
        if out is None:  # no stdout at all (pythonw): no terminal to lose
            return False
        termios.tcgetattr(out.fileno())
    except termios.error as exc:
        return bool(exc.args) and exc.args[0] == errno.EIO
    except (OSError, ValueError, AttributeError):
        return False
    return False
