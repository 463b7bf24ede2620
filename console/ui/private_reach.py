"""Every place the console reaches into a library's private parts, each pinned to the
code it was written against.

Textual and textual-serve leave a few things the console needs without
a public way to do them (a palette that closes once, a failure that must not end the
console, a guard on the web wall's requests). Each such reach is listed here with the
SHA-256 of the source of every private thing it touches (a method, or a module), as read
in the version named beside it. :func:`holds` says whether the library installed now
still has exactly that code; where it does not, the console uses the library's own
behaviour (or, for the web wall's guard, refuses to serve) and says why once in its log.
Whoever upgrades a library reads the changed code against its user and adds the digest.

``tests/unit/test_private_reaches.py`` fails when an installed library differs from
every digest here, and when the console reaches a private name not listed here.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import logging
from collections.abc import Mapping
from functools import cache
from types import ModuleType

from msgspec import Struct

log = logging.getLogger(__name__)


class Reach(Struct, frozen=True):
    name: str
    used_by: str
    """The console module that reaches (and what it does with it)."""
    parts: tuple[str, ...]
    """``module:Qualified.name`` of each private thing touched (``module`` alone: the
    whole module's source)."""
    read: Mapping[str, str]
    """SHA-256 over the parts' sources → the library version it was read in."""


REACHES: tuple[Reach, ...] = (
    Reach("partial terminal writes",
          "console.ui.widgets.partial_writes (replaces the method)",
          ("textual._compositor:ChopsUpdate.render_segments",),
          {"4c1cdb567e0b8354bd70cb129da78a42314c39eb8aacd5bf21951cbd5aaba0ef":
           "textual 8.2.8"}),
    Reach("palette that closes once",
          "console.ui.palette (overrides gathering and selection, cancels gathering)",
          ("textual.command:CommandPalette._gather_commands",
           "textual.command:CommandPalette._select_or_command",
           "textual.command:CommandPalette._cancel_gather_commands",
           "textual.command:CommandPalette._GATHER_COMMANDS_GROUP"),
          {"b5b994087c44cbb488f72bfec79e204f6dd20856f3ba6b05eec3a97d76a2c1b6":
           "textual 8.2.8"}),
    Reach("exception hook",
          "console.ui.app (overrides it: the error boundary)",
          ("textual.app:App._handle_exception",),
          {"baea2e7f88e7ac52e1f66886fe613f74b201a8857a670fc06306dded15d37bee":
           "textual 8.2.8"}),
    Reach("where a failure came from",
          "console.ui.error_boundary (the caller's frame name, the active message pump)",
          ("textual.timer:Timer._tick",
           "textual.message_pump:MessagePump._flush_next_callbacks",
           "textual._context"),
          {"1765d016f4ea96441eb5340e0857258224ee408a20ffa3f24570eb6f455d3173":
           "textual 8.2.8"}),
    Reach("web wall guard",
          "console.ui.web_wall (its middleware on the aiohttp app, checked envelopes)",
          ("textual_serve.server:Server._make_app",
           "textual_serve.server:Server._process_messages"),
          {"cf81efbb5cbd638ecdbef8b7ac1927c1d15ed99bd354613c6421608f16a767cb":
           "textual-serve 1.1.3"}),
    Reach("keys in the order typed",
          "console.ui.widgets.ordered_input (runs before Input's key handler)",
          ("textual.widgets:Input._on_key", "textual.widgets:Input._restart_blink"),
          {"7339cbd41dbb93ea4732d1aaa44468e99f59dffa77caa4afad9e8f87923e9bf4":
           "textual 8.2.8"}),
)
BY_NAME = {r.name: r for r in REACHES}


def resolve(part: str) -> object:
    """The thing a part names (raises if the library no longer has it)."""
    module, _, qualname = part.partition(":")
    obj: object = importlib.import_module(module)
    for attr in qualname.split(".") if qualname else ():
        obj = getattr(obj, attr)
    return obj


def source_of(obj: object) -> str | None:
    """A function's, class's or module's source (a decorated function's own, unwrapped);
    a constant's repr; None where the source cannot be read (an install without .py)."""
    if not (isinstance(obj, ModuleType) or callable(obj)):
        return repr(obj)
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return None


def digest(*objs: object) -> str | None:
    """SHA-256 over the sources of ``objs`` (None where one cannot be read)."""
    h = hashlib.sha256()
    for obj in objs:
        src = source_of(obj)
        if src is None:
            return None
        h.update(src.encode())
    return h.hexdigest()


def current(reach: Reach) -> str | None:
    """The digest of the installed library's parts (None: a part is gone or unreadable)."""
    try:
        return digest(*(resolve(p) for p in reach.parts))
    except (ImportError, AttributeError):
        return None


@cache
def holds(name: str) -> bool:
    """The installed library still has the code the reach ``name`` was written against
    (said once in the log when it has not)."""
    reach = BY_NAME[name]
    found = current(reach)
    if found in reach.read:
        return True
    log.warning("%s off: %s reaches %s, which %s (sha256 %s; written for %s); the "
                "library's own behaviour is used", reach.name, reach.used_by,
                ", ".join(reach.parts),
                "is gone or unreadable" if found is None else "differs from what it read",
                found, ", ".join(f"{d[:12]}… ({v})" for d, v in reach.read.items()))
    return False
