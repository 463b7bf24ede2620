"""Load a YAML document while remembering the line of every key and value.

Profiles are hand-edited, so every problem must point at a line.  PyYAML's
composer gives us nodes with marks; we turn the node graph into plain Python
values ourselves and record, for every path (a tuple of keys and list
indices), the 1-based line of the key and of the value.

Guards, all checked before any expansion happens:

* files over ``MAX_BYTES`` are refused without being parsed;
* the *expanded* size of the node graph is computed with memoisation, so an
  alias bomb ("billion laughs") is refused after visiting each distinct node
  once, in microseconds and without allocating the expansion;
* only plain scalars, sequences and mappings with string-able keys are
  accepted (no Python tags: ``yaml.compose`` resolves tags but never
  constructs objects);
* a recursive alias (``&s {A: *s}``), nesting too deep for the composer and a
  number too long to convert are problems with a line, never a traceback;
* only regular files are read (a FIFO or a device would block or never end).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any

import yaml

MAX_BYTES = 256 * 1024
"""A real profile is a few KiB; anything this large is a mistake or an attack."""

MAX_NODES = 20_000
"""Upper bound on the expanded node count (after following aliases)."""

Path = tuple[str | int, ...]

_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SourceError(Exception):
    """The file could not be read as a YAML mapping at all."""

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass(frozen=True)
class SourceDoc:
    """A YAML mapping plus the line of each key (``key_lines``) and value (``value_lines``)."""

    data: dict[str, Any]
    key_lines: dict[Path, int] = field(default_factory=dict)
    value_lines: dict[Path, int] = field(default_factory=dict)

    def line_of(self, path: Path, prefer_value: bool = False) -> int:
        """Return the line of the deepest known prefix of ``path`` (1 if nothing matches)."""
        p = tuple(path)
        if p in self.key_lines or p in self.value_lines:
            first, second = (self.value_lines, self.key_lines) if prefer_value else (
                self.key_lines, self.value_lines)
            return first.get(p) or second[p]
        # Not in the file (a missing field): point at the nearest enclosing key.
        while p:
            p = p[:-1]
            if p in self.key_lines:
                return self.key_lines[p]
        return 1


MAX_DEPTH = 200
"""Nesting deeper than this is refused; a real profile nests four or five levels."""

_OPEN = (yaml.FlowSequenceStartToken, yaml.FlowMappingStartToken,
         yaml.BlockSequenceStartToken, yaml.BlockMappingStartToken)
_CLOSE = (yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken, yaml.BlockEndToken)


def _check_depth(text: str) -> None:
    """Refuse nesting past ``MAX_DEPTH`` *before* any composer sees it, with its line.

    Composers recurse once per level: the pure-Python one runs out of Python stack
    (RecursionError, no line), libyaml's C composer out of the C stack (a segfault at
    about 100k levels; this file may hold 128k). The scanner is a loop, not a recursion,
    so counting its tokens is safe at any depth. Skipped, as cheaply as a count, for a
    file with too few brackets to nest that deep in flow style (block nesting needs an
    indent per level, and 256 KiB cannot indent 200 levels deep many times)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH and text.count("\n") <= MAX_DEPTH:
        return
    depth = 0
    try:
        for token in yaml.scan(text, Loader=_FAST_LOADER):
            if isinstance(token, _OPEN):
                depth += 1
                if depth > MAX_DEPTH:
                    raise SourceError(f"YAML nesting deeper than {MAX_DEPTH} levels",
                                      token.start_mark.line + 1)
            elif isinstance(token, _CLOSE):
                depth -= 1
    except yaml.YAMLError:
        return  # a syntax error: the composer reports it, with its own line


def _expanded_size(node: yaml.Node, memo: dict[int, int], depth: int = 0) -> int:
    """Count nodes as if every alias were copied, visiting each real node once."""
    if depth > MAX_DEPTH:
        raise SourceError(f"YAML nesting deeper than {MAX_DEPTH} levels",
                          node.start_mark.line + 1)
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # provisional, protects against recursive anchors
    total = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            total += _expanded_size(child, memo, depth + 1)
            if total > MAX_NODES:
                break
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            total += _expanded_size(k, memo, depth + 1) + _expanded_size(v, memo, depth + 1)
            if total > MAX_NODES:
                break
    memo[key] = total
    return total


_SCALAR_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
}


class _Builder:
    def __init__(self) -> None:
        self.key_lines: dict[Path, int] = {}
        self.value_lines: dict[Path, int] = {}
        self._ctor = yaml.SafeLoader("")  # only used for scalar conversion
        self._open: set[int] = set()  # collections being built: a repeat is a cycle

    def build(self, node: yaml.Node, path: Path) -> Any:
        self.value_lines.setdefault(path, node.start_mark.line + 1)
        if not isinstance(node, yaml.ScalarNode):
            if id(node) in self._open:
                raise SourceError("recursive alias (a value that contains itself)",
                                  node.start_mark.line + 1)
            self._open.add(id(node))
            try:
                return self._collection(node, path)
            finally:
                self._open.discard(id(node))
        return self._scalar(node)

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        if node.tag not in _SCALAR_TAGS:
            raise SourceError(
                f"unsupported YAML tag {node.tag!r}", node.start_mark.line + 1)
        if ":" in node.value and node.tag in (
            "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
            # YAML 1.1 reads 18:00 as the base-60 integer 1080; nobody means that.
            return node.value
        try:
            return self._ctor.construct_object(node, deep=True)
        except ValueError as exc:  # e.g. an integer of 5,000 digits
            raise SourceError(f"unreadable value {node.value[:20]!r}…: {exc}"[:160],
                              node.start_mark.line + 1) from None

    def _collection(self, node: yaml.Node, path: Path) -> Any:
        if node.tag not in ("tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"):
            raise SourceError(f"unsupported YAML tag {node.tag!r}", node.start_mark.line + 1)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(child, (*path, i)) for i, child in enumerate(node.value)]
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for knode, vnode in node.value:
                if not isinstance(knode, yaml.ScalarNode) or knode.tag == "tag:yaml.org,2002:merge":
                    raise SourceError(
                        "mapping keys must be plain scalars (no merge keys)",
                        knode.start_mark.line + 1)
                key = self.build(knode, (*path, "<key>"))
                if not isinstance(key, (str, int, float, bool)) and key is not None:
                    raise SourceError("mapping key is not a scalar", knode.start_mark.line + 1)
                skey = key if isinstance(key, str) else str(key)
                if skey in out:
                    raise SourceError(
                        f"duplicate key {skey!r}", knode.start_mark.line + 1)
                child = (*path, skey)
                self.key_lines[child] = knode.start_mark.line + 1
                out[skey] = self.build(vnode, child)
            return out
        raise SourceError(f"unsupported YAML node {type(node).__name__}")


_OPENERS = {"while scanning a quoted scalar": "a quote",
            "while parsing a flow sequence": "a '['",
            "while parsing a flow mapping": "a '{'"}
"""Errors PyYAML finds where it gives up, after the line at fault: what was opened there."""


def _syntax_error(exc: yaml.MarkedYAMLError, text: str) -> tuple[str, int]:
    """The message and the line a person would fix. PyYAML marks where it gave up,
    which for two common slips is a line or more after the mistake: an unclosed quote
    or bracket (marked where the next key starts, or at the file's end) is the line of
    its opening (the context mark); a key without its colon (``gpu_util 0.4``) is read
    as text going on into the next line, so the ``:`` there is the one "not allowed"
    (or, before a last key, the next line's end is where ``:`` was expected): the line
    at fault is the one before, when it has no colon of its own."""
    mark = exc.problem_mark or exc.context_mark
    line = mark.line + 1 if mark else 0
    problem = exc.problem or exc.context or "syntax error"
    opened = _OPENERS.get(exc.context or "")
    if opened and exc.context_mark is not None and exc.problem_mark is not None \
            and exc.context_mark.line < exc.problem_mark.line:
        return (f"YAML syntax error: {opened} opened on this line is not closed "
                f"({problem} at line {line})", exc.context_mark.line + 1)
    lines = text.splitlines()
    if exc.context == "while scanning a simple key" and exc.context_mark is not None \
            and exc.context_mark.line < len(lines):
        at = exc.context_mark.line  # a key's text ran on to the next line: no colon
        return (f"YAML syntax error: {lines[at].strip()[:40]!r} is not followed by ':' "
                "(a key needs one)", at + 1)
    if problem == "mapping values are not allowed here" and exc.problem_mark is not None:
        at = exc.problem_mark.line
        before = at - 1
        while before >= 0 and (not lines[before].strip()
                               or lines[before].lstrip().startswith("#")):
            before -= 1
        if before >= 0 and ":" not in lines[before] and not \
                lines[before].lstrip().startswith(("-", "[", "{")):
            return (f"YAML syntax error: {lines[before].strip()[:40]!r} is not followed by "
                    "':' (a key needs one; without it the next line was read as its text)",
                    before + 1)
    return f"YAML syntax error: {problem}", line


def load_text(text: str) -> SourceDoc:
    """Parse ``text`` into a :class:`SourceDoc`; raise :class:`SourceError` on any problem."""
    if len(text.encode("utf-8", "replace")) > MAX_BYTES:
        raise SourceError(f"file larger than {MAX_BYTES // 1024} KiB")
    if not text.strip():
        raise SourceError("file is empty")
    _check_depth(text)
    try:
        try:
            # libyaml when present: ~10x faster, and the console reads every profile
            # before its first frame. Its error texts differ, so a file it rejects is
            # parsed again by the pure-Python loader for the message users see.
            nodes = list(yaml.compose_all(text, Loader=_FAST_LOADER))
        except yaml.YAMLError:
            nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        message, line = _syntax_error(exc, text)
        raise SourceError(message, line) from None
    except yaml.YAMLError as exc:
        raise SourceError(f"YAML error: {exc}") from None
    except RecursionError:
        raise SourceError("YAML nesting too deep") from None
    nodes = [n for n in nodes if n is not None]
    if not nodes:
        raise SourceError("file holds no YAML document")
    if len(nodes) > 1:
        raise SourceError("file holds more than one YAML document", nodes[1].start_mark.line + 1)
    root = nodes[0]
    if _expanded_size(root, {}) > MAX_NODES:
        raise SourceError(
            f"document expands to more than {MAX_NODES} nodes (alias bomb?)",
            root.start_mark.line + 1)
    if not isinstance(root, yaml.MappingNode):
        kind = "a list" if isinstance(root, yaml.SequenceNode) else "a scalar"
        raise SourceError(f"top level must be a mapping, found {kind}", root.start_mark.line + 1)
    builder = _Builder()
    data = builder.build(root, ())
    return SourceDoc(data=data, key_lines=builder.key_lines, value_lines=builder.value_lines)


def load_file(path: str | os.PathLike[str]) -> SourceDoc:
    """Read and parse a YAML file with the size guard applied before reading it whole."""
    p = os.fspath(path)
    if os.path.isdir(p):
        raise SourceError("is a directory")
    try:
        st = os.stat(p)
    except OSError as exc:
        raise SourceError(exc.strerror or "cannot stat file") from None
    if not stat.S_ISREG(st.st_mode):
        raise SourceError("not a regular file (a FIFO, device or socket is never read)")
    size = st.st_size
    if size > MAX_BYTES:
        raise SourceError(f"file larger than {MAX_BYTES // 1024} KiB ({size} bytes)")
    try:
        # O_NONBLOCK: swapped for a FIFO after the stat, the open must not hang either
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise SourceError("not a regular file")
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise SourceError(exc.strerror or "cannot read file") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"not UTF-8 text (byte {exc.start})") from None
    return load_text(text)
