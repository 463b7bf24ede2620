"""Text from a server or a file, made safe to draw: no control character reaches a
terminal or a browser.

A model id from ``/v1/models``, a log line from the agent, a label, a profile name or an
error text is someone else's string. One carrying ``ESC ] 0 ; … BEL`` retitles the
operator's terminal (tmux's title changed), OSC 52 writes their clipboard, OSC 8 makes a
``javascript:`` link, ``ESC [ 2 J`` blanks the screen (the web wall went blank), and a
bare C1 byte (``\\x9b`` is CSI) does the same on terminals that read 8-bit controls
(issue 31, finding 8). Rich strips only BEL, BS, VT, FF and CR.

:func:`printable` removes every escape sequence whole (CSI, OSC, DCS, SOS, PM, APC, in
their 7-bit and 8-bit forms, however they end), then every C0 and C1 control, DEL, and
the invisible characters that reorder text (bidirectional overrides and isolates). Tabs
and line breaks become one space: every field is drawn on one line. Everything else is
kept as written: Korean, emoji (joiners included), accents. Pure and cheap on clean text
(one regex search), so it is applied where strings enter the console's state and again
where widgets draw them.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from msgspec import Struct
from msgspec.structs import replace

T = TypeVar("T")

_SEQUENCE = re.compile(
    r"""
      (?:\x1b\[|\x9b) [\x20-\x3f]* [\x40-\x7e]?                 # CSI … final byte
    | (?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])                   # OSC DCS SOS PM APC …
      [^\x07\x1b\x9c]* (?:\x07|\x1b\\|\x9c)?                    # … up to BEL or ST
    | \x1b [\x20-\x2f]* [\x30-\x7e]?                             # any other ESC sequence
    """,
    re.VERBOSE,
)
_SPACE = re.compile(r"[\t\n\r\x0b\x0c\x85\u2028\u2029]")
_CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_ANY = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""Whether a string needs cleaning at all (the common case: it does not)."""


def has_controls(text: str) -> bool:
    return _ANY.search(text) is not None


def printable(text: object, limit: int | None = None) -> str:
    """``text`` (any value: ``str()`` of it) without control characters or escape
    sequences, tabs and line breaks as spaces; cut to ``limit`` characters when given."""
    s = text if isinstance(text, str) else str(text)
    if _ANY.search(s) is not None:
        s = _CONTROL.sub("", _SPACE.sub(" ", _SEQUENCE.sub("", s)))
    return s if limit is None else s[:limit]


def clean(value: T) -> T:
    """``value`` with :func:`printable` applied to every string in it: through dicts,
    lists, tuples and the console's records (a frozen one is replaced, not changed). What has
    nothing to clean is returned as it is (the same object)."""
    return _clean(value, 0)


def _clean(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return printable(value) if _ANY.search(value) is not None else value
    if depth > 32 or value is None or isinstance(value, int | float | bytes):
        return value
    if isinstance(value, dict):
        items = [(_clean(k, depth + 1), _clean(v, depth + 1)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(),
                                                                strict=True)):
            return value
        return type(value)(items) if type(value) is not dict else dict(items)
    if isinstance(value, list | tuple):
        out = [_clean(v, depth + 1) for v in value]
        if all(a is b for a, b in zip(out, value, strict=True)):
            return value
        if type(value) in (list, tuple):
            return type(value)(out)
        return type(value)(*out) if hasattr(value, "_fields") else list(out)
    if isinstance(value, Struct):
        changes = {}
        for name in value.__struct_fields__:
            old = getattr(value, name)
            new = _clean(old, depth + 1)
            if new is not old:
                changes[name] = new
        return replace(value, **changes) if changes else value
    return value


def printable_lines(text: str) -> str:
    """``text`` for a terminal, line by line: each line :func:`printable`, the line breaks
    kept (what a command prints: a table of words from outside)."""
    return "\n".join(printable(line) for line in text.split("\n"))
