"""A tolerant parser for the Prometheus text exposition format (0.0.4 / vLLM's 1.0.0).

It never raises on bad input: malformed lines are skipped and counted in
``Exposition.errors`` so the UI can say "3 lines unreadable" instead of
crashing. Duplicate series keep the first value (what Prometheus reports as
a scrape error, we report as a warning).
"""

from __future__ import annotations

import functools
import math
import re

from msgspec import Struct, field
from msgspec.structs import force_setattr

from console.model.printable import has_controls, printable

Labels = tuple[tuple[str, str], ...]
Grouping = tuple[tuple[str, ...], tuple[tuple[int, ...], ...], tuple[int, ...] | None]
"""A family's series of one model grouped by a label (``figures._grouping``): the
groups in the order they first appear, the values each one sums, and, when every
group has one value (one engine: the usual case), those values' indices."""
"""Sorted (name, value) pairs: hashable and cheap to compare."""

MAX_ERRORS_KEPT = 20


class Exposition(Struct, frozen=True, eq=False):
    """Samples of one scrape: ``samples[name][labels] = value``.

    A scrape read by a layout (``ParseMemo``) holds its values in the layout's order,
    and builds ``samples`` only when something asks for them all: a slot's figures
    ask its families one at a time (``series``, ``by_label``, ``in``), through the
    layout, and a dict per family of every poll of every slot would cost more than
    the rest of its reading."""

    _samples: dict[str, dict[Labels, float]] | None = None
    types: dict[str, str] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    error_count: int = 0
    _index: dict[tuple[str, str], dict[str | None, list[tuple[Labels, float]]]] = field(
        default_factory=dict)
    _sums: dict[tuple[str, str, str | None], dict[str, float]] = field(default_factory=dict)
    """Per-model sums already computed (``figures._View.by_model``)."""
    _created: dict[tuple[str, str], dict[Labels, float]] = field(default_factory=dict)
    _parts: dict[tuple[str, str, str | None, tuple[str, ...]], dict[str, dict[Labels, float]]] \
        = field(default_factory=dict)
    """Per-model values by group and rank already reduced (``figures._View.parts``)."""
    """Per-model ``*_created`` series already read (``figures._family_reset``)."""
    _layout: Layout | None = None
    """The layout this scrape was read by, if it was (``ParseMemo``)."""
    _values: list[float] | None = None
    """With ``_layout``: the samples' values in its order."""

    @property
    def samples(self) -> dict[str, dict[Labels, float]]:
        if self._samples is None:
            lay, values = self._layout, self._values
            built = {} if lay is None or values is None else {
                name: lay.series(name, values) for name in lay.families}
            force_setattr(self, "_samples", built)  # frozen: filled once, then kept
            return built
        return self._samples

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Exposition):
            return NotImplemented
        return (self.samples, self.types, self.errors, self.error_count) == (
            other.samples, other.types, other.errors, other.error_count)

    # no __hash__: it holds dicts (a class that defines __eq__ alone has __hash__ None)

    def __repr__(self) -> str:  # the caches and the layout are no part of what it says
        return (f"Exposition(types={self.types!r}, errors={self.errors!r}, "
                f"error_count={self.error_count})")

    def series(self, name: str) -> dict[Labels, float]:
        lay, values = self._layout, self._values
        if self._samples is None and lay is not None and values is not None:
            return lay.series(name, values)
        return self.samples.get(name, {})

    def names(self) -> list[str]:
        """The families present."""
        if self._samples is None and self._layout is not None:
            return list(self._layout.families)
        return list(self.samples)

    def by_label(self, name: str, key: str) -> dict[str | None, list[tuple[Labels, float]]]:
        """Series of ``name`` grouped by the value of label ``key``, built once per family.

        Figures ask each family many times for one model: scanning every series each
        time made a poll quadratic in the number of ``model_name`` values (100k foreign
        series froze the console). This keeps it linear."""
        k = (name, key)
        idx = self._index.get(k)
        if idx is None:
            lay, values = self._layout, self._values
            if key == "model_name" and lay is not None and values is not None:
                get = values.__getitem__  # the layout knows which series are whose
                idx = {}
                for mv in lay.models.get(name, ()):
                    label_sets, at = lay.by_model[(name, mv)]
                    idx[mv] = list(zip(label_sets, map(get, at), strict=True))
            else:
                idx = {}
                for labels, v in self.series(name).items():
                    idx.setdefault(label(labels, key), []).append((labels, v))
            self._index[k] = idx
        return idx

    def __contains__(self, name: str) -> bool:
        if self._samples is None and self._layout is not None:
            return name in self._layout.families
        return name in self.samples


def _parse_value(text: str) -> float:
    # float() accepts "NaN", "+Inf", "-Inf", "inf" and also "1_000" (which the format
    # does not allow); underscores are rare enough that accepting them is harmless.
    return float(text)


_PAIR = re.compile(r' *([A-Za-z_][A-Za-z0-9_]*)="([^"\\]*)" *(?:,|$)')


LABEL_CACHE_MAX = 32_768
"""Label sets remembered (~200 per slot): a slot exports the same series every scrape,
only their values move. Emptied when full, so bounded whatever a target sends."""
_label_cache: dict[str, Labels] = {}


def _parse_labels(body: str) -> Labels | None:
    """Parse ``a="x",b="y"`` (no braces). Returns None when malformed.

    A label set seen before is not parsed again. The common shape (no escapes, single
    commas) is read by a regex, a label per match; anything else goes the long way,
    which decides what it means."""
    hit = _label_cache.get(body)
    if hit is not None:
        return hit
    out = _parse_labels_new(body)
    if out is not None and (has_controls(body) or "\\" in body):
        # a label value is someone else's text (a LiteLLM team alias, an api_base, a
        # model id): its escapes and controls end here, where every collector reading an
        # exposition reads its labels, so nothing after holds one (issue 44)
        out = tuple((printable(k), printable(v)) for k, v in out)
    if out is not None:
        if len(_label_cache) >= LABEL_CACHE_MAX:
            _label_cache.clear()
        _label_cache[body] = out
    return out


def _parse_labels_new(body: str) -> Labels | None:
    if "\\" not in body:
        pairs: list[tuple[str, str]] = []
        pos, n = 0, len(body)
        while pos < n:
            m = _PAIR.match(body, pos)
            if m is None:
                break
            pairs.append((m[1], m[2]))
            pos = m.end()
        else:
            pairs.sort()
            return tuple(pairs)
    return _parse_labels_slow(body)


def _parse_labels_slow(body: str) -> Labels | None:
    out: list[tuple[str, str]] = []
    i, n = 0, len(body)
    while i < n:
        while i < n and body[i] in " ,":
            i += 1
        if i >= n:
            break
        eq = body.find("=", i)
        if eq < 0:
            return None
        name = body[i:eq].strip()
        if not name or not (name[0].isalpha() or name[0] == "_"):
            return None
        j = eq + 1
        if j >= n or body[j] != '"':
            return None
        j += 1
        start = j
        chunks: list[str] | None = None
        while True:
            k = body.find('"', j)
            if k < 0:
                return None
            bs = body.find("\\", j, k)
            if bs < 0:
                if chunks is None:
                    value = body[start:k]
                else:
                    chunks.append(body[j:k])
                    value = "".join(chunks)
                j = k + 1
                break
            # slow path: escapes
            if chunks is None:
                chunks = []
            chunks.append(body[j:bs])
            if bs + 1 >= n:
                return None
            esc = body[bs + 1]
            chunks.append({"n": "\n", "\\": "\\", '"': '"'}.get(esc, "\\" + esc))
            j = bs + 2
        out.append((name, value))
        i = j
    out.sort()
    return tuple(out)


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class ParseMemo:
    """What each line's head (the text before its value) meant in an earlier scrape,
    and the layout of the last scrape read without an error.

    A target exports the same series every scrape; only the values move. A slot's
    poll keeps one of these: a scrape with its last one's layout is read from it
    (``Layout``), and in another one a line seen before costs a split, a lookup and a
    ``float``, not a parse. It is only consulted for one (families, model) pair,
    the one it was filled for; a head is remembered only when the head alone decides
    what the line is (a sample with one value and no timestamp, or a line skipped on
    its name), so a remembered line reads exactly as the long way would read it.
    Emptied when it holds ``limit`` heads or ``max_chars`` characters of them: bounded
    whatever a target sends."""

    def __init__(self, limit: int = 8192, max_chars: int = 2 * 1024 * 1024) -> None:
        self.limit = limit
        self.max_chars = max_chars
        self.chars = 0
        self.heads: dict[str, _Meant | None] = {}
        self.key: tuple[frozenset[str] | None, str | None] | None = None
        self.layout: Layout | None = None
        self.layout_reads = 0
        """Scrapes read whole from the layout (what a test and the bench look at)."""

    def for_(self, families: frozenset[str], model: str | None) -> dict[str, _Meant | None]:
        key = (families, model)
        if key != self.key or len(self.heads) >= self.limit or self.chars >= self.max_chars:
            self.heads = {}
            self.chars = 0
            self.key = key
            self.layout = None  # it stands on what the heads meant
        return self.heads


class Layout(Struct, frozen=True, eq=False):
    """What each line of a scrape was, for reading the next ones: a server's next scrape
    almost always has the same lines in the same order, only other values.

    Each line has a prefix that decides alone what the line is: a sample's head and
    the space before its value; ``#`` for a comment; the name and the ``{`` (or space)
    after it for a sample of a family left out. A scrape whose every line starts with
    its prefix holds exactly the samples the layout says, at the values after the
    prefixes of the kept lines: it is read by one pass of ``startswith`` and a
    ``float`` per kept line, with no look at any line's meaning.

    Its ``Exposition`` keeps the values in the layout's order and the layout, so what
    is asked of every such scrape (a family's series of one model, grouped by a label)
    is worked out once per layout, in ``groupings`` and ``created_at``, not once per
    scrape."""

    prefixes: list[str]
    cuts: tuple[tuple[int, int], ...]
    """(line index, prefix length) of each sample, in order: sample i's value is the
    text of line cuts[i][0] after its first cuts[i][1] characters."""
    families: dict[str, tuple[tuple[Labels, ...], tuple[int, ...]]]
    """name → (label sets, sample indices), in the order the families first appear."""
    by_model: dict[tuple[str, str | None], tuple[tuple[Labels, ...], tuple[int, ...]]]
    """(name, model_name) → that family's series of that model: label sets, indices."""
    models: dict[str, tuple[str | None, ...]]
    """name → the ``model_name`` values of its series (None: without the label)."""
    groupings: dict[tuple[str, str, str | None], Grouping] = field(default_factory=dict)
    """(family, model, label) → its ``Grouping``: what the figures work out from the
    layout alone, kept for its next scrapes (one per family and label the catalog asks,
    so bounded)."""
    created_at: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """model → where its ``*_created`` series sit among the values."""

    def __eq__(self, other: object) -> bool:  # the lines it read, not what was worked out
        if not isinstance(other, Layout):
            return NotImplemented
        return (self.prefixes, self.cuts, self.families, self.by_model, self.models) == (
            other.prefixes, other.cuts, other.families, other.by_model, other.models)

    def series(self, name: str, values: list[float]) -> dict[Labels, float]:
        """Family ``name`` of a scrape read by this layout, with its ``values``."""
        got = self.families.get(name)
        if got is None:
            return {}
        return dict(zip(got[0], [values[i] for i in got[1]], strict=True))

    def values_of(self, samples: dict[str, dict[Labels, float]]) -> list[float]:
        """The values of a scrape this layout was learnt on, in its order."""
        out = [0.0] * len(self.cuts)
        for name, (labels, ix) in self.families.items():
            fam = samples[name]
            for ls, i in zip(labels, ix, strict=True):
                out[i] = fam[ls]
        return out


def _skip_prefix(line: str) -> str | None:
    """The prefix that keeps a line of a family left out just that: its name, exactly,
    and what ends the name. None when the name has no such clean end."""
    brace = line.find("{")
    name = line[:brace] if brace >= 0 else line.split(None, 1)[0]
    end = "{" if brace >= 0 else " "
    if name != name.strip() or not line.startswith(name + end):
        return None
    return name + end


def _learn_layout(lines: list[str], heads: dict[str, _Meant | None]) -> Layout | None:
    """The layout of a scrape that the long way read without an error, or None when a
    line's head does not decide alone what it is (a blank line, a timestamp, ...)."""
    prefixes: list[str] = []
    cuts: list[tuple[int, int]] = []
    fams: dict[str, tuple[list[Labels], list[int]]] = {}
    models: dict[tuple[str, str | None], tuple[list[Labels], list[int]]] = {}
    for i, line in enumerate(lines):
        head = line.rpartition(" ")[0]
        meant = heads.get(head, _MISS)
        if meant is _MISS:
            return None
        if meant is None:
            prefix = "#" if line[0] == "#" else _skip_prefix(line)
            if prefix is None:
                return None
            prefixes.append(prefix)
            continue
        name, labels, mv = meant
        for got in (fams.setdefault(name, ([], [])), models.setdefault((name, mv), ([], []))):
            got[0].append(labels)
            got[1].append(len(cuts))
        prefixes.append(head + " ")
        cuts.append((i, len(head) + 1))
    names: dict[str, list[str | None]] = {}
    for name, mv in models:
        names.setdefault(name, []).append(mv)
    return Layout(prefixes, tuple(cuts),
                  {n: (tuple(ls), tuple(ix)) for n, (ls, ix) in fams.items()},
                  {k: (tuple(ls), tuple(ix)) for k, (ls, ix) in models.items()},
                  {n: tuple(mvs) for n, mvs in names.items()})


def _read_by_layout(lines: list[str], layout: Layout) -> list[float] | None:
    """The values, in the layout's order, of a scrape whose lines start
    with the layout's prefixes; None when they do not, or a value does not read as a
    number (the long way says what it is). ``float`` reads a value as ``split()``
    would cut it: surrounding whitespace is dropped, and whitespace inside fails."""
    if len(lines) != len(layout.prefixes) or not all(
            map(str.startswith, lines, layout.prefixes)):
        return None
    try:
        return [float(lines[i][n:]) for i, n in layout.cuts]
    except ValueError:
        return None


LARGE_TEXT = 256 * 1024
"""Past this size (vLLM's exposition is ~55 KB) the parse does no extra passes over the
text to save work on its lines: the passes would cost more than they save."""


@functools.lru_cache(maxsize=16)
def _common_prefix(families: frozenset[str]) -> str:
    """What every name of ``families`` starts with ("" when nothing is shared)."""
    if not families:
        return ""
    lo, hi = min(families), max(families)  # what these two share, all between share
    n = 0
    while n < min(len(lo), len(hi)) and lo[n] == hi[n]:
        n += 1
    return lo[:n]


_Meant = tuple[str, Labels, str | None]
"""A sample line's name, labels and ``model_name`` (None: the series has none)."""
_MISS: _Meant = ("", (), None)


class LabelMemo:
    """The label sets of a target's last scrape, for its next one: a gateway's 40k user
    series outgrow the shared cache (``LABEL_CACHE_MAX``), which then emptied itself
    twice a scrape: every label set was parsed again, and every kept scrape held label
    tuples of its own (a 6 MB LiteLLM exposition: a second of CPU a poll, and 1 GB after
    20 polls, issue 44). With this, a series seen in the scrape before costs a lookup and
    its tuple is shared by every scrape that holds it. Bounded: it holds what the last
    scrape held, no more."""

    def __init__(self) -> None:
        self.last: dict[str, Labels] = {}
        self.now: dict[str, Labels] = {}

    def get(self, body: str) -> Labels | None:
        hit = self.now.get(body)
        if hit is None:
            hit = self.last.get(body)
            if hit is None:
                hit = _parse_labels_new(body)
                if hit is not None and (has_controls(body) or "\\" in body):
                    hit = tuple((printable(k), printable(v)) for k, v in hit)
            if hit is not None:
                self.now[body] = hit
        return hit

    def done(self) -> None:
        """One scrape read: what it held is what the next one is read against."""
        self.last, self.now = self.now, {}


def parse(text: str, families: frozenset[str] | None = None,
          model: str | None = None, memo: ParseMemo | None = None,
          label_memo: LabelMemo | None = None) -> Exposition:
    """Parse exposition text; never raises.

    ``families`` keeps only those sample names (a slot's poll needs the catalog's, not
    the process and Python ones), ``model`` only the series whose ``model_name`` is that
    one (series without the label are kept). A line left out is skipped on its name or a
    substring test, before its labels are read: an exposition with 100k series of other
    models costs a scan, not a parse. Lines left out are not checked either: the error
    count covers the lines kept. ``memo`` (with ``families``) reads lines seen in an
    earlier scrape of the same target from what they meant then."""
    samples: dict[str, dict[Labels, float]] = {}
    types: dict[str, str] = {}
    errors: list[str] = []
    error_count = 0
    tag = None if model is None else f'model_name="{_escaped(model)}"'
    # Every line that can be kept holds the families' common prefix ("vllm:"): the lines
    # before the first one that does and after the last are left out unread (~120 of
    # vLLM's 661: the process, Python and HTTP families), by two searches of the text.
    # (A large text is not copied for it: the model filter below thins those.)
    start = 0  # where the region read begins in the text
    prefix = _common_prefix(families) if families is not None else ""
    region = text
    if prefix and len(text) <= LARGE_TEXT:
        first = text.find(prefix)
        if first < 0:
            region = ""
        else:
            start = text.rfind("\n", 0, first) + 1
            end = text.find("\n", text.rfind(prefix))
            region = text[start:] if end < 0 else text[start:end]
    lines = region.split("\n")
    heads = memo.for_(families, model) if memo is not None and families is not None else None
    layout = memo.layout if memo is not None and heads is not None else None
    # The layout is tried before the model filter (and the two counts that decide it):
    # a scrape with the layout's heads holds no line the filter would drop that the
    # layout keeps (a kept line's value is a number, so its head decides the filter)
    read = _read_by_layout(lines, layout) if layout is not None else None
    filtered = False
    if read is None and tag is not None and (
            len(region) > LARGE_TEXT or region.count('model_name="') != region.count(tag)):
        # other models' series go in one comprehension: ~0.1 µs a line, where the loop
        # below spends several (100k foreign series: 10 ms, not 100). Equal counts mean
        # every model_name is this one (each tag holds one), and there is none to drop;
        # a large text is not counted first (two more passes), just filtered.
        lines = [ln for ln in lines if tag in ln or 'model_name="' not in ln]
        filtered = True
        if layout is not None:  # a layout learnt on a scrape that had others' lines
            read = _read_by_layout(lines, layout)
    if read is not None and memo is not None:
        memo.layout_reads += 1
        return Exposition(types={}, _values=read, _layout=layout)

    def bad(lineno: int, why: str) -> None:
        nonlocal error_count
        error_count += 1
        if len(errors) < MAX_ERRORS_KEPT:
            offset = text.count("\n", 0, start)  # the lines before the region read
            if filtered:  # numbered in the filtered list: find it in the text
                at = text.find(lines[lineno - 1])
                lineno = text.count("\n", 0, at) + 1 if at >= 0 else lineno + offset
            else:
                lineno += offset
            errors.append(f"line {lineno}: {why}")

    def keep(name: str, labels: Labels, value: float, lineno: int) -> None:
        fam = samples.get(name)
        if fam is None:
            fam = samples[name] = {}
        if fam.setdefault(labels, value) is not value:  # the first one stays
            bad(lineno, f"duplicate series {name}")

    head = ""
    learnt = 0
    for lineno, line in enumerate(lines, 1):
        if heads is not None:
            head, _, tail = line.rpartition(" ")
            hit = heads.get(head, _MISS)
            if hit is None:
                continue
            if hit is not _MISS:
                try:
                    value = float(tail)
                except ValueError:  # not a number: the long way below says what it is
                    hit = _MISS
                if hit is not _MISS:
                    keep(hit[0], hit[1], value, lineno)
                    continue
            # a head decides alone only when it holds the name: not blank, not indented
            if not head or head[0].isspace():
                head = ""
        if not line or line.isspace():
            continue
        if line[0] == "#":
            if families is not None:
                if head and heads is not None:  # a head is only cut where heads are
                    heads[head] = None
                    learnt += len(head)
                continue  # the types are for people reading a whole exposition
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                kind = parts[3].strip()
                if kind not in ("counter", "gauge", "histogram", "summary", "untyped",
                                "info", "stateset", "gaugehistogram", "unknown"):
                    bad(lineno, f"unknown type {kind!r}")
                types[parts[2]] = kind
            continue
        brace = line.find("{")
        if families is not None:
            fname = line[:brace] if brace >= 0 else line.split(None, 1)[0]
            if fname.strip() not in families:
                if head and heads is not None and len(fname) <= len(head):
                    heads[head] = None
                    learnt += len(head)
                continue
        try:
            if brace >= 0:
                close = line.rfind("}")
                if close < brace:
                    bad(lineno, "unclosed label set")
                    continue
                name = line[:brace].strip()
                body = line[brace + 1:close]
                labels = (label_memo.get(body) if label_memo is not None
                          else _parse_labels(body))
                if labels is None:
                    bad(lineno, "malformed labels")
                    continue
                rest = line[close + 1:].split()
            else:
                parts = line.split()
                name, rest, labels = parts[0], parts[1:], ()
            if not rest:
                bad(lineno, "missing value")
                continue
            if len(rest) > 2:
                bad(lineno, "trailing garbage")
                continue
            value = _parse_value(rest[0])
        except (ValueError, IndexError):
            bad(lineno, "unreadable value")
            continue
        if not name:
            bad(lineno, "missing metric name")
            continue
        keep(name, labels, value, lineno)
        if (head and heads is not None and len(rest) == 1
                and len(head) + 1 + len(rest[0]) == len(line)):
            heads[head] = (name, labels, label(labels, "model_name"))
            learnt += len(head)
    if memo is not None and heads is not None:
        memo.chars += learnt
        # a scrape read without an error, its every head remembered, is the layout the
        # next ones are read by (a duplicate series is an error: none in a layout)
        memo.layout = (_learn_layout(lines, heads)
                       if error_count == 0 and len(lines) <= memo.limit else None)
        if memo.layout is not None:  # this scrape is read by it too (a window's far end)
            return Exposition(_samples=samples, types=types, _layout=memo.layout,
                              _values=memo.layout.values_of(samples))
    if label_memo is not None:
        label_memo.done()
    return Exposition(_samples=samples, types=types, errors=tuple(errors),
                      error_count=error_count)


def label(labels: Labels, key: str) -> str | None:
    for k, v in labels:
        if k == key:
            return v
    return None


def finite(x: float | None) -> float | None:
    """None for NaN/±Inf/None: JSON and the screen show those as "undefined"."""
    if x is None or math.isnan(x) or math.isinf(x):
        return None
    return x
