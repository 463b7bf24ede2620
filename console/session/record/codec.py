"""How a recording writes what a poll brought: JSON for the readings (the console's own
frozen records, by name, read back only from its own modules) and packed float64
values for the slots' samples, in the order of their exposition's layout.

Nothing here is pickle: a recording handed over in a ticket is data, never code. A class
named in a file is rebuilt only when it is in ``RECORDED_TYPES`` (the state's own
types, listed by name); nothing named in a file is ever imported.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import math
import re
import struct
from array import array
from collections.abc import Mapping, Sequence
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import zstandard
from msgspec import Struct
from pydantic import BaseModel

from console.sources.collect.exposition import Exposition, Labels, Layout, label


class CodecError(ValueError):
    """A stored value this console cannot read back (named in the message)."""


RECORDED_TYPES = (
    "console.config.settings:GatewaySettings",
    "console.config.settings:SlotThresholds",
    "console.model.alerts:Alert",
    "console.model.alerts:AlertEvent",
    "console.model.fleet:FleetRow",
    "console.model.fleet:FleetSnapshot",
    "console.model.gateway:DeploymentRow",
    "console.model.gateway:GatewaySnapshot",
    "console.model.gateway:UserRow",
    "console.model.gpu_state:Gpu",
    "console.model.gpu_state:GpuProcess",
    "console.model.gpu_state:GpuReport",
    "console.model.gpu_state:XidRecord",
    "console.model.gpu_topology:GpuTopology",
    "console.model.gpu_topology:P2pProbe",
    "console.model.model_figures:CacheConfig",
    "console.model.model_figures:ModelFigures",
    "console.model.pod_run:PodRun",
    "console.model.pod_stop:PlannedStop",
    "console.model.snapshot:AgentHeartbeat",
    "console.model.snapshot:DeploymentSnapshot",
    "console.model.snapshot:PodSnapshot",
    "console.model.snapshot:SlotSnapshot",
    "console.model.snapshot:StopPlan",
    "console.model.stall:Stall",
    "console.session.view:ConsoleState",
    "console.session.view:ConsoleView",
    "console.session.view:ReplayMark",
    "console.sources.collect.targets:SlotTarget",
)
"""Every class a recording may name: the console state's own types, field by field
(``ConsoleState`` down). A name in a file is looked up in this table, never imported:
a recording once made replay import ``pod_agent.__main__`` (issue 44), which ran the
agent's command line. A class not listed here is refused when written as when read, so
a new type in the state fails the recorder's tests instead of a replay."""

MAX_DEPTH = 64
"""How deep a stored value may nest (the state nests ~8 deep): a file nesting
thousands deep was a RecursionError, not a sentence."""

_classes: dict[str, type] = {}


def _table() -> dict[str, type]:
    if not _classes:
        # the modules that define the state's types, by name here (not from a file)
        from console.config import settings
        from console.model import (
            alerts,
            fleet,
            gateway,
            gpu_state,
            gpu_topology,
            model_figures,
            pod_run,
            pod_stop,
            snapshot,
            stall,
        )
        from console.session import view
        from console.sources.collect import targets
        mods = {m.__name__: m for m in (settings, alerts, fleet, gateway, gpu_state, gpu_topology,
                                        model_figures, pod_run, pod_stop, snapshot, stall,
                                        view,
                                        targets)}
        for name in RECORDED_TYPES:
            module, _, qual = name.partition(":")
            _classes[name] = getattr(mods[module], qual)
    return _classes


def _class(name: str) -> type:
    got = _table().get(name)
    if got is None:
        raise CodecError(f"a class a recording may not hold: {name[:120]!r}")
    return got


def encode(obj: Any) -> Any:
    """``obj`` as plain JSON values (see the module docstring)."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"$f": repr(obj)}
    if isinstance(obj, tuple):
        return {"$t": [encode(x) for x in obj]}
    if isinstance(obj, list):
        return [encode(x) for x in obj]
    if isinstance(obj, (frozenset, set)):
        return {"$s": sorted((encode(x) for x in obj), key=repr)}
    if isinstance(obj, Struct):
        cls = type(obj)
        _class(f"{cls.__module__}:{cls.__qualname__}")  # only what a replay may read back
        return {"$c": f"{cls.__module__}:{cls.__qualname__}",
                "v": {name: encode(getattr(obj, name)) for name in cls.__struct_fields__}}
    if isinstance(obj, BaseModel):
        model = type(obj)
        _class(f"{model.__module__}:{model.__qualname__}")
        return {"$p": f"{model.__module__}:{model.__qualname__}",
                "v": obj.model_dump(mode="json")}
    if isinstance(obj, Mapping):
        if all(isinstance(k, str) and not k.startswith("$") for k in obj):
            return {k: encode(v) for k, v in obj.items()}
        return {"$m": [[encode(k), encode(v)] for k, v in obj.items()]}
    if isinstance(obj, ZoneInfo):
        return {"$z": obj.key}
    if isinstance(obj, dt.timezone):
        off = obj.utcoffset(None)
        return {"$tz": off.total_seconds() if off is not None else 0.0}
    raise CodecError(f"cannot record a {type(obj).__name__}")


def decode(v: Any, depth: int = 0) -> Any:
    """A stored value back, its classes looked up in ``RECORDED_TYPES`` only; anything
    malformed (a wrong shape, a nesting past ``MAX_DEPTH``, a class's wrong fields) is a
    :class:`CodecError`."""
    if depth > MAX_DEPTH:
        raise CodecError(f"a value nested deeper than {MAX_DEPTH}")
    d = depth + 1
    if isinstance(v, list):
        return [decode(x, d) for x in v]
    if not isinstance(v, dict):
        return v
    try:
        if "$t" in v:
            return tuple(decode(x, d) for x in _list(v["$t"]))
        if "$f" in v:
            return float(str(v["$f"]))
        if "$s" in v:
            return frozenset(decode(x, d) for x in _list(v["$s"]))
        if "$m" in v:
            return {_hashable(decode(k, d)): decode(x, d) for k, x in _list(v["$m"])}
        if "$c" in v:
            cls = _class(str(v["$c"]))
            fields = v["v"]
            if not isinstance(fields, dict):
                raise CodecError(f"{str(v['$c'])[:120]}: fields are not a mapping")
            values = {str(k): decode(x, d) for k, x in fields.items()}
            check_fields(cls, values)
            return cls(**values)
        if "$p" in v:
            model = _class(str(v["$p"]))
            if not issubclass(model, BaseModel):
                raise CodecError(f"not a model: {str(v['$p'])[:120]!r}")
            return model.model_validate(v["v"])
    except CodecError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
        raise CodecError(f"a stored value of the wrong shape ({type(exc).__name__}: "
                         f"{str(exc)[:200]})") from None
    if "$z" in v:
        try:
            return ZoneInfo(str(v["$z"]))
        except (ZoneInfoNotFoundError, ValueError):
            return dt.UTC
    if "$tz" in v:
        try:
            return dt.timezone(dt.timedelta(seconds=float(v["$tz"])))
        except (TypeError, ValueError, OverflowError):
            return dt.UTC
    return {k: decode(x, d) for k, x in v.items()}


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_expected: dict[tuple[type, str], tuple[frozenset[str], bool, bool]] = {}


def _expects(cls: type, name: str, annotation: str) -> tuple[frozenset[str], bool, bool]:
    """The recorded classes a field's annotation names, whether it allows None, and
    whether they are the field itself (not a container's items)."""
    key = (cls, name)
    got = _expected.get(key)
    if got is None:
        known = {n.partition(":")[2] for n in RECORDED_TYPES}
        words = set(_WORD.findall(annotation))
        got = _expected[key] = (frozenset(words & known), "None" in words,
                                "[" not in annotation)
    return got


def check_fields(cls: type, values: dict[str, Any]) -> None:
    """Each value that a field declares as one of the recorded classes is one of them
    (or None where allowed): a file holding, say, a slot target where the view goes is
    refused here, not an AttributeError on a screen. Containers' items are checked one
    level deep (``tuple[Alert, ...]``, ``dict[str, Stall]``)."""
    if not issubclass(cls, Struct):
        return
    for name, annotation in _annotations(cls).items():
        if name not in values:
            continue
        want, none_ok, bare = _expects(cls, name, annotation)
        if not want:
            continue
        v = values[name]
        if bare:
            items = [v]
        elif isinstance(v, dict):
            items = list(v.values())
        elif isinstance(v, list | tuple | frozenset):
            items = list(v)
        else:
            raise CodecError(f"{cls.__name__}.{name}: a {type(v).__name__}, not a "
                             "collection")
        for x in items:
            if x is None and none_ok:
                continue
            if type(x).__name__ not in want or not isinstance(x, Struct | BaseModel):
                raise CodecError(f"{cls.__name__}.{name}: a {type(x).__name__[:60]} "
                                 f"where {' or '.join(sorted(want))} goes")


@functools.cache  # per class: every value read back of it asks
def _annotations(cls: type[Struct]) -> dict[str, str]:
    """Each field's annotation as written (the modules say ``from __future__ import
    annotations``: strings, never evaluated here), a subclass's own over its base's."""
    written: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        written.update({k: str(v) for k, v in vars(klass).get("__annotations__", {}).items()})
    return {name: written.get(name, "") for name in cls.__struct_fields__}


def _list(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise CodecError("a stored collection that is not a list")
    return v


def _hashable(k: Any) -> Any:
    return tuple(k) if isinstance(k, list) else k


def dumps(obj: Any) -> str:
    return json.dumps(encode(obj), separators=(",", ":"), allow_nan=False)


def loads(text: str | bytes) -> Any:
    return decode(json.loads(text))


# -- a slot's samples: series keys once per layout, values per poll --------------------

SeriesKeys = tuple[tuple[str, Labels], ...]
"""(family, label set) of every value, in the values' order."""


def series_of(exp: Exposition) -> tuple[SeriesKeys, list[float], bool]:
    """The series keys and values of a scrape, and whether it was read by a layout (it
    is rebuilt the same way, so the figures' code takes the same path on replay)."""
    lay, values = exp._layout, exp._values
    if lay is not None and values is not None:
        keys: list[tuple[str, Labels]] = [("", ())] * len(values)
        for name, (label_sets, ix) in lay.families.items():
            for ls, i in zip(label_sets, ix, strict=True):
                keys[i] = (name, ls)
        return tuple(keys), list(values), True
    out_k: list[tuple[str, Labels]] = []
    out_v: list[float] = []
    for name, fam in exp.samples.items():
        for ls, x in fam.items():
            out_k.append((name, ls))
            out_v.append(x)
    return tuple(out_k), out_v, False


def layout_of(keys: SeriesKeys) -> Layout:
    """The layout whose values are in ``keys``' order, built as the parser learns one
    (families and models in the order they first appear)."""
    fams: dict[str, tuple[list[Labels], list[int]]] = {}
    models: dict[tuple[str, str | None], tuple[list[Labels], list[int]]] = {}
    for i, (name, ls) in enumerate(keys):
        mv = label(ls, "model_name")
        for got in (fams.setdefault(name, ([], [])), models.setdefault((name, mv), ([], []))):
            got[0].append(ls)
            got[1].append(i)
    names: dict[str, list[str | None]] = {}
    for name, mv in models:
        names.setdefault(name, []).append(mv)
    return Layout([], tuple((i, 0) for i in range(len(keys))),
                  {n: (tuple(ls), tuple(ix)) for n, (ls, ix) in fams.items()},
                  {k: (tuple(ls), tuple(ix)) for k, (ls, ix) in models.items()},
                  {n: tuple(mvs) for n, mvs in names.items()})


def exposition_of(keys: SeriesKeys, values: Sequence[float], by_layout: bool,
                  layout: Layout | None = None, errors: tuple[str, ...] = (),
                  error_count: int = 0) -> Exposition:
    """A stored scrape as the poller held it."""
    if by_layout:
        lay = layout if layout is not None else layout_of(keys)
        return Exposition(types={}, _values=list(values), _layout=lay)
    samples: dict[str, dict[Labels, float]] = {}
    for (name, ls), x in zip(keys, values, strict=True):
        samples.setdefault(name, {})[ls] = x
    return Exposition(_samples=samples, types={}, errors=errors, error_count=error_count)


def keys_blob(keys: SeriesKeys) -> bytes:
    return json.dumps([[n, [list(p) for p in ls]] for n, ls in keys],
                      separators=(",", ":")).encode()


def keys_from_blob(blob: bytes) -> SeriesKeys:
    raw = json.loads(blob)
    return tuple((str(n), tuple((str(a), str(b)) for a, b in ls)) for n, ls in raw)


def keys_digest(blob: bytes) -> str:
    return hashlib.blake2b(blob, digest_size=16).hexdigest()


def pack(values: Sequence[float]) -> bytes:
    return array("d", values).tobytes()


def unpack(blob: bytes) -> list[float]:
    a = array("d")
    a.frombytes(blob)
    return a.tolist()


def xor(a: bytes, b: bytes) -> bytes:
    """Bytewise XOR of two equal-length buffers (a value that did not move: zeros)."""
    n = len(a)
    return (int.from_bytes(a, "little") ^ int.from_bytes(b, "little")).to_bytes(n, "little")


def shuffle(buf: bytes, width: int = 8) -> bytes:
    """Byte planes: every value's first byte, then every second byte… (zstd finds the
    runs of equal high bytes of nearby floats)."""
    return b"".join(buf[k::width] for k in range(width))


def unshuffle(buf: bytes, width: int = 8) -> bytes:
    n = len(buf) // width
    out = bytearray(len(buf))
    for k in range(width):
        out[k::width] = buf[k * n:(k + 1) * n]
    return bytes(out)


HEADER = struct.Struct("<I")


MAX_CHUNK_BYTES = 32 * 1024 * 1024
"""What one stored frame may decompress to (a chunk of 60 polls of a busy deployment is
under 2 MB). A 64 KB file once claimed 1.5 GB and replay took it (issue 44): a frame
larger than this, or one that does not say its size and runs past it, is refused."""


MAX_JSON_BYTES = 8 * 1024 * 1024
"""What a stored JSON text may be (a chunk's header, its plot points, a layout's keys):
a real one is under 2 MB; 30 MB of ``[0,0,…]`` parsed to 250 MB of Python objects."""


def decompress(d: zstandard.ZstdDecompressor, blob: bytes,
               cap: int = MAX_CHUNK_BYTES) -> bytes:
    """``blob`` decompressed, never more than ``cap`` bytes of it held: a frame that
    says it is larger is refused before any is read, one that does not say is read in
    pieces and refused as soon as it runs past the cap."""
    try:
        size = zstandard.frame_content_size(blob)
    except zstandard.ZstdError as exc:
        raise CodecError(f"not a compressed frame ({exc})") from None
    if size > cap:
        raise CodecError(f"a compressed frame of {size >> 20} MB (at most {cap >> 20} MB "
                         "is read)")
    out = bytearray()
    with d.stream_reader(blob, read_across_frames=False) as r:
        while True:
            piece = r.read(1 << 20)
            if not piece:
                break
            out += piece
            if len(out) > cap:
                raise CodecError(f"a compressed frame past {cap >> 20} MB (refused)")
    return bytes(out)
