"""Reading a recording back: a :class:`SqliteTape` rebuilds the console's state at any
poll from what was stored, by the code the live poll runs (``window_figures`` on the
slots' scrapes, ``figures_from_answers`` on Prometheus's answers), and lists the
recordings of a state directory with the incidents in each.

A file that is not a recording, is cut short, corrupt, or of a newer format raises
:class:`RecordingError` with a sentence that says which; nothing here hangs on a file
another console is writing (WAL: readers never wait for the writer).
"""

from __future__ import annotations

import bisect
import json
import math
import sqlite3
import struct
from collections import OrderedDict, deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args
from urllib.parse import quote

import zstandard
from msgspec import Struct
from msgspec.structs import replace

from console.model.history import History, quantile_over_time
from console.model.model_figures import ModelFigures
from console.model.printable import clean, printable
from console.model.snapshot import DeploymentSnapshot, SlotSnapshot
from console.session.record import codec
from console.session.record.folder import recording_files
from console.session.record.store import (
    CHUNK_POLLS,
    FORMAT,
    STALE_REF_POLLS,
    VERSION,
    ChunkCodec,
    RecordingError,
    is_keyframe,
    is_live,
    unpack_chunk,
)
from console.session.record.tape import Marker, MarkerKind
from console.session.view import ConsoleState, slot_columns
from console.sources.collect.exposition import Exposition, Layout
from console.sources.collect.figures import engine_of
from console.sources.collect.poller import PLOTTED
from console.sources.collect.promql import MODEL_BY, by_model, figures_from_answers
from console.sources.collect.slot import kv_usage, window_figures

SQLITE_MAGIC = b"SQLite format 3\x00"
_READ_ERRORS = (sqlite3.DatabaseError, zstandard.ZstdError, ValueError, KeyError,
                IndexError, TypeError, struct.error, codec.CodecError, AttributeError,
                OverflowError, RecursionError, MemoryError)
"""What a corrupt or crafted file makes the reading raise: each said as one sentence
(a self-reference was a RecursionError, a huge time an OverflowError: tracebacks)."""
MAX_BACK_POLLS = 4 * CHUNK_POLLS
"""How far back a poll's record may walk to its keyframe: a keyframe starts every
chunk; a record pointing further (or forward, or at itself) is corrupt, not a reason to
read the whole file. (A window's far end is one seek: anywhere earlier in the file.)"""
MAX_KV_POLLS = 4096
"""Polls a KV p99 may span (its window at the fastest refresh)."""
MAX_DICT_BYTES = 1024 * 1024
"""A compression dictionary's size at most (the recorder trains 16 KB ones)."""
MARKER_KINDS = frozenset(get_args(MarkerKind))
MAX_TIME = 1e11
"""A poll time past this (year 5138) is no time a console wrote."""


def check_file(path: Path) -> None:
    """Raise :class:`RecordingError` when ``path`` cannot be a recording at all."""
    try:
        with path.open("rb") as f:
            head = f.read(100)
    except FileNotFoundError:
        raise RecordingError(f"{path}: no such file") from None
    except OSError as exc:
        raise RecordingError(f"{path}: cannot be read ({exc.strerror})") from None
    if not head.startswith(SQLITE_MAGIC[:len(head)]) or (head and len(head) >= 16
                                                           and head[:16] != SQLITE_MAGIC):
        raise RecordingError(f"{path}: not a pod-console recording (not an SQLite file)")
    if len(head) < 100:
        raise RecordingError(f"{path}: truncated ({len(head)} bytes: not even a header)")


def open_recording(path: Path) -> tuple[sqlite3.Connection, dict[str, Any]]:
    """The file's connection (read only) and its meta, or a clear RecordingError."""
    check_file(path)
    try:
        uri = "file:" + quote(str(path.absolute()))
        if Path(f"{path}-wal").exists():  # being written (or a writer was killed)
            try:
                db = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=2.0,
                                     check_same_thread=False)
                db.execute("SELECT 1 FROM sqlite_master LIMIT 1")
            except sqlite3.OperationalError:  # a killed writer's WAL wants recovering
                db = sqlite3.connect(str(path), timeout=2.0, check_same_thread=False)
        else:
            # a finished recording (one attached to a ticket) is read as it is: immutable,
            # so SQLite writes nothing beside it (mode=ro alone made -wal and -shm)
            db = sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True, timeout=2.0,
                                 check_same_thread=False)
        db.execute("PRAGMA query_only=1")
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise RecordingError(f"{path}: corrupt or truncated ({exc})") from None
    if "meta" not in tables:
        db.close()
        raise RecordingError(f"{path}: an SQLite file, but not a pod-console recording "
                             "(no meta table)")
    try:
        meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    except (sqlite3.DatabaseError, ValueError, RecursionError) as exc:  # deep JSON
        db.close()
        raise RecordingError(f"{path}: corrupt or truncated ({exc})") from None
    if meta.get("format") != FORMAT:
        db.close()
        raise RecordingError(f"{path}: not a pod-console recording "
                             f"(format {meta.get('format')!r})")
    version = meta.get("version")
    if not isinstance(version, int) or version > VERSION:
        db.close()
        raise RecordingError(f"{path}: written by a newer pod-console (recording format "
                             f"{version}; this one reads up to {VERSION})")
    missing = {"chunks", "polls", "markers", "layouts", "dicts"} - tables
    if missing:
        db.close()
        raise RecordingError(f"{path}: corrupt (missing {', '.join(sorted(missing))})")
    return db, meta


def _span(v: Any) -> float:
    """A window or history span from the meta: seconds, a week at most."""
    x = float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan
    if not 0.0 < x <= 7 * 86400.0:
        raise ValueError(f"a span of {str(v)[:40]}")
    return x


class _Chunk(Struct, frozen=True):
    id: int
    seq0: int
    seq1: int
    dict: int | None


class SqliteTape:
    """A recording as a :class:`~console.session.record.tape.Tape` (see the module
    docstring). ``refresh`` picks up the polls written since (a live recording)."""

    def __init__(self, path: Path, cache_chunks: int = 16) -> None:
        self.path = path
        self._db, self.meta = open_recording(path)
        self._codecs: dict[int | None, ChunkCodec] = {}
        self._layouts: dict[int, tuple[codec.SeriesKeys, Layout]] = {}
        self._chunk_cache: OrderedDict[int, tuple[list[dict[str, Any]],
                                                  list[dict[str, list[float]]]]] = OrderedDict()
        self._kv: dict[tuple[int, str], float | None] = {}
        self._points_cache: OrderedDict[int, tuple[list[tuple[str, str]], list[list[Any]]]] \
            = OrderedDict()
        self._exp_cache: OrderedDict[tuple[int, str], Exposition] = OrderedDict()
        self._cache_n = cache_chunks
        self._seqs: list[int] = []
        self._times: list[float] = []
        self._chunks: list[_Chunk] = []
        self._chunk_starts: list[int] = []
        try:
            self.window_s = _span(self.meta.get("window_s", 300.0))
            self.history_s = _span(self.meta.get("history_s", 3600.0))
        except (TypeError, ValueError) as exc:
            self._db.close()
            raise RecordingError(f"{path.name}: corrupt (its meta: {exc})") from None
        self.refresh()

    def _guard(self, what: str, exc: BaseException) -> RecordingError:
        return RecordingError(f"{self.path.name}: {what} unreadable, the file is corrupt "
                              f"or truncated ({type(exc).__name__}: {exc})"[:400])

    def refresh(self) -> None:
        try:
            self._refresh()
        except RecordingError:
            raise
        except _READ_ERRORS as exc:
            raise self._guard("the index", exc) from None

    def _refresh(self) -> None:
        try:
            rows = self._db.execute("SELECT seq, t FROM polls ORDER BY seq").fetchall()
            chunks = self._db.execute(
                "SELECT id, seq0, seq1, dict FROM chunks ORDER BY seq0, seq1 DESC").fetchall()
        except sqlite3.DatabaseError as exc:
            raise self._guard("the index", exc) from None
        self._seqs = [int(s) for s, _ in rows]
        self._times = [float(t) for _, t in rows]
        if any(not (0.0 <= t <= MAX_TIME) for t in self._times):  # also NaN
            raise RecordingError(f"{self.path.name}: corrupt (a poll time that is no time)")
        out: list[_Chunk] = []
        for cid, s0, s1, d in chunks:
            if out and s0 <= out[-1].seq1:
                continue  # a one-poll chunk already packed (read in the same moment)
            out.append(_Chunk(int(cid), int(s0), int(s1), None if d is None else int(d)))
        self._chunks = out
        self._chunk_starts = [c.seq0 for c in out]

    # -- the Tape protocol ----------------------------------------------------------
    def times(self) -> Sequence[float]:
        return self._times

    def markers(self) -> Sequence[Marker]:
        try:
            rows = self._db.execute(
                "SELECT t, kind, text, key FROM markers ORDER BY t, id").fetchall()
        except sqlite3.DatabaseError as exc:
            raise self._guard("the markers", exc) from None
        try:
            # a marker's text is an alert's title: outside text, cleaned where it is read
            return [Marker(float(t), k, printable(x, 500), printable(key, 200))
                    for t, k, x, key in rows
                    if 0.0 <= float(t) <= MAX_TIME and k in MARKER_KINDS]
        except _READ_ERRORS as exc:
            raise self._guard("the markers", exc) from None

    def close(self) -> None:
        self._db.close()

    def state_at(self, index: int) -> ConsoleState:
        seq = self._seqs[index]
        try:
            return self._state(seq)
        except RecordingError:
            raise
        except _READ_ERRORS as exc:
            raise self._guard(f"poll {index}", exc) from None

    # -- reading chunks ----------------------------------------------------------------
    def _codec(self, dict_id: int | None) -> ChunkCodec:
        got = self._codecs.get(dict_id)
        if got is None:
            body = None
            if dict_id is not None:
                row = self._db.execute("SELECT body FROM dicts WHERE id = ?",
                                       (dict_id,)).fetchone()
                if row is None:
                    raise RecordingError(f"{self.path.name}: corrupt (dictionary "
                                         f"{dict_id} missing)")
                body = bytes(row[0])
                if len(body) > MAX_DICT_BYTES:
                    raise RecordingError(f"{self.path.name}: corrupt (a dictionary of "
                                         f"{len(body) >> 10} KB)")
            got = self._codecs[dict_id] = ChunkCodec(body)
        return got

    def _chunk_of(self, seq: int) -> _Chunk:
        i = bisect.bisect_right(self._chunk_starts, seq) - 1
        if i < 0 or not self._chunks[i].seq0 <= seq <= self._chunks[i].seq1:
            self.refresh()  # packed since the index was read
            i = bisect.bisect_right(self._chunk_starts, seq) - 1
            if i < 0 or not self._chunks[i].seq0 <= seq <= self._chunks[i].seq1:
                raise RecordingError(f"{self.path.name}: poll {seq} is not in the file "
                                     "(dropped by retention, or the file is cut short)")
        return self._chunks[i]

    def _load(self, c: _Chunk) -> tuple[list[dict[str, Any]], list[dict[str, list[float]]]]:
        got = self._chunk_cache.get(c.id)
        if got is not None:
            self._chunk_cache.move_to_end(c.id)
            return got
        row = self._db.execute("SELECT body FROM chunks WHERE id = ?", (c.id,)).fetchone()
        if row is None:
            self.refresh()
            return self._load(self._chunk_of(c.seq0))
        got = unpack_chunk(self._codec(c.dict), bytes(row[0]))
        self._chunk_cache[c.id] = got
        while len(self._chunk_cache) > self._cache_n:
            self._chunk_cache.popitem(last=False)
        return got

    def _points(self, c: _Chunk) -> tuple[list[tuple[str, str]], list[list[Any]]]:
        got = self._points_cache.get(c.id)
        if got is not None:
            return got
        row = self._db.execute("SELECT points FROM chunks WHERE id = ?", (c.id,)).fetchone()
        if row is None:
            self.refresh()
            return self._points(self._chunk_of(c.seq0))
        got = self._codec(c.dict).unpack_points_flat(bytes(row[0]))
        self._points_cache[c.id] = got
        while len(self._points_cache) > 256:
            self._points_cache.popitem(last=False)
        return got

    def record(self, seq: int) -> tuple[dict[str, Any], dict[str, list[float]]]:
        """Poll ``seq``'s stored record and its slots' values."""
        c = self._chunk_of(seq)
        recs, arrays = self._load(c)
        i = seq - c.seq0
        return recs[i], arrays[i]

    def _layout(self, lay_id: int) -> tuple[codec.SeriesKeys, Layout]:
        got = self._layouts.get(lay_id)
        if got is None:
            row = self._db.execute("SELECT body FROM layouts WHERE id = ?",
                                   (lay_id,)).fetchone()
            if row is None:
                raise RecordingError(f"{self.path.name}: corrupt (layout {lay_id} missing)")
            keys = codec.keys_from_blob(codec.decompress(zstandard.ZstdDecompressor(),
                                                         bytes(row[0]), codec.MAX_JSON_BYTES))
            got = self._layouts[lay_id] = (keys, codec.layout_of(keys))
        return got

    def _exposition(self, seq: int, slot: str) -> tuple[float, Exposition]:
        key = (seq, slot)
        rec, values = self.record(seq)
        raw = rec["raw"][slot]
        got = self._exp_cache.get(key)
        if got is None:
            keys, lay = self._layout(int(raw[1]))
            got = codec.exposition_of(keys, values[slot], bool(raw[2]), lay if raw[2] else None,
                                      tuple(raw[3]), int(raw[4]))
            self._exp_cache[key] = got
            while len(self._exp_cache) > 1024:
                self._exp_cache.popitem(last=False)
        return float(raw[0]), got

    # -- rebuilding a state ----------------------------------------------------------
    def _figures(self, seq: int, slot: SlotSnapshot, how: list[Any]
                 ) -> tuple[ModelFigures | None, float | None]:
        """A slot's figures and KV p99 at poll ``seq``, by the live poll's own code."""
        model = slot.served_model_name
        if how[0] == "d":
            rec, _ = self.record(seq)
            raw = rec["raw"][slot.slot]
            t, exp = self._exposition(seq, slot.slot)
            # the far end is one seek, anywhere earlier in this file: a window spans its
            # time, not a count of polls (at 0.2 s a poll, 300 s held 1500 of them)
            earlier = None if raw[5] is None else self._exposition(
                self._back(seq, raw[5], seq - self._chunks[0].seq0, "a window's far end"),
                slot.slot)
            eng = engine_of(exp)  # the scrape's own families tell its engine
            figs = window_figures(t, exp, earlier, model, eng)
            kvs: list[float] = []
            if raw[6] is not None:
                kv_from = self._back(seq, raw[6], MAX_KV_POLLS, "a KV range", same=True)
                for k in range(kv_from, seq + 1):
                    key = (k, slot.slot)
                    if key not in self._kv:
                        r, _ = self.record(k)
                        self._kv[key] = kv_usage(self._exposition(k, slot.slot)[1], model,
                                                 eng) if slot.slot in r["raw"] else None
                        if len(self._kv) > 65536:
                            self._kv.clear()
                    kv = self._kv.get(key)
                    if kv is not None:
                        kvs.append(kv)
            return figs, quantile_over_time(0.99, kvs)
        if how[0] == "p":
            rec, _ = self.record(seq)
            at = float(how[2]) if len(how) > 2 and how[2] is not None else None
            figs_by, kv_by = by_model(*figures_from_answers(rec["prom"], float(how[1]),
                                                            MODEL_BY, at))
            return figs_by.get(model), kv_by.get(model)
        if how[0] == "s":
            k = self._back(seq, how[1], STALE_REF_POLLS, "a stale slot's figures")
            rec, _ = self.record(k)
            snap = codec.decode(rec["snap"])
            for s in snap.slots:
                if s.slot == slot.slot:
                    h = rec["fig"].get(s.slot)
                    return (s.figures, s.kv_p99) if h is None else self._figures(k, s, h)
        raise RecordingError(f"{self.path.name}: unknown figure source {how[0]!r}")

    def _back(self, seq: int, ref: Any, most: int, what: str, same: bool = False) -> int:
        """The poll a record at ``seq`` refers back to, checked: an integer before
        ``seq`` (or ``seq`` itself with ``same``) and at most ``most`` polls back. A
        reference to itself recursed; one a billion polls back looped for minutes."""
        k = ref if isinstance(ref, int) and not isinstance(ref, bool) else None
        if k is None or not (seq - most <= k <= seq) or (k == seq and not same):
            raise RecordingError(f"{self.path.name}: corrupt ({what} of poll {seq} "
                                 f"refers to {str(ref)[:40]})")
        return k

    def snapshot(self, seq: int) -> DeploymentSnapshot | None:
        rec, _ = self.record(seq)
        snap = codec.decode(rec["snap"])
        if snap is None:
            return None
        slots = []
        for s in snap.slots:
            how = rec["fig"].get(s.slot)
            if how is not None:
                figs, kv = self._figures(seq, s, how)
                s = replace(s, figures=figs, kv_p99=kv)
            slots.append(s)
        out: DeploymentSnapshot = replace(snap, slots=tuple(slots))
        return out

    def _fields(self, seq: int) -> dict[str, Any]:
        """The state's other fields at ``seq``: from the last full record, changes on."""
        back: list[dict[str, Any]] = []
        k = seq
        while True:
            rec, _ = self.record(k)
            back.append(rec["st"])
            if is_keyframe(rec) or k == self._chunks[0].seq0:
                break
            if len(back) > MAX_BACK_POLLS:
                raise RecordingError(f"{self.path.name}: corrupt (poll {seq} has no full "
                                     "record before it)")
            k -= 1
        out: dict[str, Any] = {}
        for st in reversed(back):
            out.update(st)
        return {k: codec.decode(v) for k, v in out.items()}

    def history_at(self, index: int) -> History:
        """The plots' history as it stood after poll ``index`` (a replay's plots around
        its cursor read a later poll's: the state's figures are not needed)."""
        return self.history(self._seqs[index], self._times[index])

    def history(self, seq: int, t: float) -> History:
        """The plots' history as it stood after poll ``seq`` (the recorded hour)."""
        h = History(self.history_s, 1.0)
        start = bisect.bisect_left(self._times, t - self.history_s)
        end = bisect.bisect_right(self._seqs, seq)
        if start >= end:
            return h
        first, last = self._seqs[start], self._seqs[end - 1]
        seen: dict[str, set[str]] = {}
        series: dict[tuple[str, str], list[tuple[float, float]]] = {}
        c = self._chunk_of(first)
        while True:
            keys, polls = self._points(c)
            lists = []
            for key in keys:
                got = series.get(key)
                if got is None:
                    got = series[key] = []
                lists.append(got)
            for j, flat in enumerate(polls):
                if not first <= c.seq0 + j <= last:
                    continue
                for k in range(0, len(flat), 3):
                    v = flat[k + 2]
                    if v is None or v != v:
                        continue
                    got = lists[flat[k]]
                    pt = float(flat[k + 1])
                    if not got or pt > got[-1][0]:  # as History.add: in order, once
                        got.append((pt, float(v)))
            if c.seq1 >= last:
                break
            i = bisect.bisect_right(self._chunk_starts, c.seq0)
            if i >= len(self._chunks):
                break
            c = self._chunks[i]
        for (name, metric), got in series.items():
            if not got:
                continue
            seen.setdefault(name, set()).add(metric)
            cutoff = got[-1][0] - h.window_s  # History.add trims by the newest point
            k = bisect.bisect_left(got, (cutoff, -math.inf))
            h.series(name, metric).points = deque(got[k:], maxlen=h.maxlen)
        rec, _ = self.record(seq)
        slots = set(rec["fig"])
        plotted = set(self.meta.get("plotted") or PLOTTED)
        missing = {s for s in slots if s in seen} if set(PLOTTED) - plotted else set()
        if missing:  # a figure plotted since this was recorded: computed from the samples
            self._fill(h, missing, self._seqs[start:end])
        return h

    def _fill(self, h: History, slots: set[str], seqs: list[int]) -> None:
        for k in seqs:
            snap = self.snapshot(k)
            if snap is None:
                continue
            for s in snap.slots:
                if s.slot in slots and s.figures is not None and s.stale_since is None:
                    for key in PLOTTED:
                        h.add(s.slot, key, snap.fetched_at, s.figures.value(key))

    def _state(self, seq: int) -> ConsoleState:
        f = self._fields(seq)
        codec.check_fields(ConsoleState, f)  # a wrong class where the view goes: refused
        # a file is outside text like any source: its words cleaned as they are read
        # (what a console recorded was clean already: then nothing is copied)
        f = clean(f)
        snap = clean(self.snapshot(seq))
        view = f["view"]
        pod = f["pod"]
        gpus, utils, states = slot_columns(view, pod)
        t = f["polled_at"] if f["polled_at"] is not None else f["now"]
        return ConsoleState(
            view=view, ready=f["ready"], now=f["now"], snapshot=snap, pod=pod,
            alerts=f["alerts"], stale=f["stale"], history=self.history(seq, t),
            allowed=f["allowed"], gpus=gpus, utils=utils, states=states,
            operation=f["operation"], alert_history=f["alert_history"],
            thresholds=f["thresholds"], polled_at=f["polled_at"], ages=f["ages"],
            spend_month=f["spend_month"], stop=f["stop"], gpu_marks=f["gpu_marks"],
            stalled=f["stalled"],
            # the gateway's reading as the session had it (none in an older recording)
            gateway=f.get("gateway"), idle_source=f.get("idle_source", "slots"),
            active_window_s=f.get("active_window_s", 3600.0))


# -- what `replay --list` prints ---------------------------------------------------------

class RecordingInfo(Struct, frozen=True):
    path: Path
    profile: str | None = None
    started: float | None = None
    ended: float | None = None
    polls: int = 0
    live: bool = False
    incidents: tuple[Marker, ...] = ()
    """Alerts (and Xid events) that fired, oldest first."""
    error: str | None = None
    """Why the file cannot be read (the rest is then empty)."""


def describe(path: Path) -> RecordingInfo:
    try:
        db, meta = open_recording(path)
    except RecordingError as exc:
        return RecordingInfo(path, error=str(exc))
    try:
        n, t0, t1 = db.execute("SELECT count(*), min(t), max(t) FROM polls").fetchone()
        rows = db.execute("SELECT t, kind, text, key FROM markers WHERE kind IN "
                          "('alert', 'xid') AND text NOT LIKE 'cleared:%' ORDER BY t").fetchall()
    except sqlite3.DatabaseError as exc:
        return RecordingInfo(path, error=f"{path}: corrupt or truncated ({exc})")
    finally:
        db.close()
    return RecordingInfo(path, profile=meta.get("profile"), started=t0, ended=t1,
                         polls=int(n or 0), live=is_live(path),
                         incidents=tuple(Marker(float(t), k, x, key) for t, k, x, key in rows))


def list_recordings(directory: Path) -> list[RecordingInfo]:
    """Every recording of ``directory``, oldest first, with the incidents in each."""
    return [describe(p) for p in reversed(recording_files(directory))]
