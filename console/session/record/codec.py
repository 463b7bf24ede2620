"""How a recording writes what a poll brought: JSON for the readings (the console's own
frozen dataclasses, by name, read back only from its own modules) and packed float64
values for the slots' samples, in the order of their exposition's layout.

Nothing here is pickle: a recording handed over in a ticket is data, never code. A class
named in a file is rebuilt only when it is one of the console's dataclasses or pydantic
models (``console.*`` or ``pod_agent.*``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import importlib
import json
import math
import struct
from array import array
from collections.abc import Mapping, Sequence
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel

from console.sources.collect.exposition import Exposition, Labels, Layout, label


class CodecError(ValueError):
    """A stored value this console cannot read back (named in the message)."""


_ALLOWED_ROOTS = ("console.", "pod_agent.")
_classes: dict[str, type] = {}


def _class(name: str) -> type:
    got = _classes.get(name)
    if got is not None:
        return got
    module, _, qual = name.partition(":")
    if not module.startswith(_ALLOWED_ROOTS) or not qual or "." in qual:
        raise CodecError(f"a class this console does not own: {name!r}")
    try:
        cls = getattr(importlib.import_module(module), qual)
    except (ImportError, AttributeError) as exc:
        raise CodecError(f"unknown class {name!r} (a newer console wrote it?)") from exc
    if not isinstance(cls, type) or not (
            dataclasses.is_dataclass(cls) or issubclass(cls, BaseModel)):
        raise CodecError(f"not a data class: {name!r}")
    _classes[name] = cls
    return cls


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
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        cls = type(obj)
        return {"$c": f"{cls.__module__}:{cls.__qualname__}",
                "v": {f.name: encode(getattr(obj, f.name))
                      for f in dataclasses.fields(obj) if f.init}}
    if isinstance(obj, BaseModel):
        model = type(obj)
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


def decode(v: Any) -> Any:
    if isinstance(v, list):
        return [decode(x) for x in v]
    if not isinstance(v, dict):
        return v
    if "$t" in v:
        return tuple(decode(x) for x in v["$t"])
    if "$f" in v:
        return float(v["$f"])
    if "$s" in v:
        return frozenset(decode(x) for x in v["$s"])
    if "$m" in v:
        return {_hashable(decode(k)): decode(x) for k, x in v["$m"]}
    if "$c" in v:
        cls = _class(str(v["$c"]))
        try:
            return cls(**{k: decode(x) for k, x in v["v"].items()})
        except TypeError as exc:
            raise CodecError(f"{v['$c']}: {exc}") from exc
    if "$p" in v:
        model = _class(str(v["$p"]))
        assert issubclass(model, BaseModel)
        return model.model_validate(v["v"])
    if "$z" in v:
        try:
            return ZoneInfo(str(v["$z"]))
        except (ZoneInfoNotFoundError, ValueError):
            return dt.UTC
    if "$tz" in v:
        return dt.timezone(dt.timedelta(seconds=float(v["$tz"])))
    return {k: decode(x) for k, x in v.items()}


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
