"""Writing every poll to ``STATE_DIR/recordings/``: one SQLite file (WAL) per console
start, written by a thread of its own so that no poll waits on the disk.

What a file holds (``SCHEMA``):

- ``meta``: the format and its version, who wrote it (pid, host, profile), the poller's
  window and the plots' span;
- ``layouts``: a slot's series keys (family and labels of every value), once per
  layout change;
- ``chunks``: runs of polls (``CHUNK_POLLS``), each a zstd frame (a dictionary trained
  on the first polls): a JSON header (the readings, how each figure is rebuilt, what the
  state shows beside the figures, as changes from the poll before) and the slots'
  values as float64 in their layout's order, each XORed with the slot's values of the
  poll before (a value that did not move is zeros) and cut into byte planes; the plots'
  points ride in a small frame of their own (what a seek into an hour of plots reads);
- ``polls``: the index by time (a seek is one indexed lookup and one chunk);
- ``markers``: alert transitions, Xid events, operations (audit ids), watchdog
  decisions, and the recorder's own pauses.

A poll is committed on its own as a one-poll chunk as soon as it is written (``kill
-9`` loses at most the poll being written); every ``CHUNK_POLLS`` those are packed into
one chunk. Retention (age, then size) drops the oldest chunks of the directory first.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import fcntl
import json
import os
import queue
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import zstandard
from msgspec import Struct, field
from msgspec.structs import replace

from console.model.history import History
from console.model.snapshot import DeploymentSnapshot, PodSnapshot
from console.session.record import codec
from console.session.record.retention import Entry, Retention, listing, remove
from console.session.record.tape import Marker
from console.session.view import ConsoleState
from console.sources.collect.exposition import Layout
from console.sources.collect.poller import PLOTTED, PollRead, plotted_values

FORMAT = "pod-console-recording"
VERSION = 1
SUFFIX = ".podrec"
CHUNK_POLLS = 60
"""Polls packed in one chunk (two minutes at a 2 s refresh)."""
DICT_AFTER = 24
"""Polls the compression dictionary is trained on (the first ones)."""
DICT_SIZE = 16 * 1024
LEVEL = 9
QUICK_LEVEL = 1
"""A poll is first written alone, as a chunk of its own (a crash loses at most that
poll), and packed with the others at ``LEVEL`` once ``CHUNK_POLLS`` are written: the
one-poll chunks are short-lived, so they get zstd's fastest level (a fifth of the
recorder's CPU went to compressing them at ``LEVEL``)."""
STALE_REF_POLLS = 600
"""A stale slot's figures are told as "those of poll N" this many polls back at most;
older ones are stored as numbers (retention may have dropped poll N)."""
QUEUE_MAX = 256
RETRY_S = 10.0
"""While paused (a full disk), how often a write is tried again."""

FIRST_FIELDS = ("ready", "now", "operation", "alerts", "stale", "allowed", "alert_history",
                "thresholds", "polled_at", "ages", "spend_month", "stop", "gpu_marks",
                "stalled", "pod", "view")
GATEWAY_FIELDS = ("gateway", "idle_source", "active_window_s")
"""The gateway's reading (issue 34) and how the idle countdown and "who is using it" read
it: stored since; a recording made before has none (the state's defaults)."""
STATE_FIELDS = FIRST_FIELDS + GATEWAY_FIELDS
"""What a screen shows beside the slots' readings, stored as the state had it (changes
only); ``gpus``, ``utils`` and ``states`` follow from ``view`` and ``pod``."""


def is_keyframe(rec: dict[str, Any]) -> bool:
    """A record holding every state field (the others hold changes): marked ``key`` since
    the gateway's fields were added; before, one holding all the fields there were."""
    if "key" in rec:
        return bool(rec["key"])
    return len(rec["st"]) >= len(FIRST_FIELDS)

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS dicts (id INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS layouts (id INTEGER PRIMARY KEY, digest TEXT UNIQUE NOT NULL,
                                    body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (id INTEGER PRIMARY KEY, seq0 INTEGER NOT NULL,
                                   seq1 INTEGER NOT NULL, t0 REAL NOT NULL, t1 REAL NOT NULL,
                                   dict INTEGER, body BLOB NOT NULL, points BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_seq ON chunks (seq0);
CREATE TABLE IF NOT EXISTS polls (seq INTEGER PRIMARY KEY, t REAL NOT NULL);
CREATE INDEX IF NOT EXISTS polls_t ON polls (t);
CREATE TABLE IF NOT EXISTS markers (id INTEGER PRIMARY KEY, t REAL NOT NULL,
                                    kind TEXT NOT NULL, text TEXT NOT NULL, key TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS markers_t ON markers (t);
"""


class RecordingError(Exception):
    """A recording that cannot be read or written, and why (said as is to the user)."""


def is_full(exc: BaseException) -> bool:
    """A disk (or quota) that is full: recording pauses until there is room."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(exc, sqlite3.OperationalError) and "full" in str(exc).lower()


def recordings_dir(state_dir: Path) -> Path:
    return state_dir / "recordings"


class PollItem(Struct, frozen=True):
    """What the session hands the recorder after a poll: immutable values only."""

    state: ConsoleState
    read: PollRead | None = None
    """The poller's raw readings of ``state.snapshot`` (None: a source without them)."""
    pod_read: PodSnapshot | None = None
    """The pod reading this poll brought (None: the pod was not read this poll)."""


class _Points(History):
    """Collects what a poll adds to the plots (``record_gpus`` writes into it)."""

    def __init__(self) -> None:
        super().__init__()
        self.got: list[list[Any]] = []

    def add(self, slot: str, metric: str, t: float, value: float | None) -> None:
        self.got.append([slot, metric, t, value])


class _Encoder(Struct):
    """Turns polls into chunk records; remembers what the next poll is told against."""

    layouts: dict[str, int] = field(default_factory=dict)
    by_object: dict[int, tuple[Layout, int]] = field(default_factory=dict)
    prev_state: dict[str, str] = field(default_factory=dict)
    raw_seq: dict[tuple[str, int], dict[float, int]] = field(default_factory=dict)
    """(slot, poller generation) → probe time → the seq that holds that scrape."""
    first_raw: dict[tuple[str, int], float] = field(default_factory=dict)
    fresh: dict[str, tuple[float, int]] = field(default_factory=dict)
    """Slot → (fetched_at, seq) of its last poll with fresh figures."""
    last_snapshot: DeploymentSnapshot | None = None


class ChunkCodec:
    """Compresses and decompresses chunk bodies (with the file's dictionary, if any)."""

    def __init__(self, dictionary: bytes | None = None, level: int = LEVEL) -> None:
        self.dictionary = dictionary
        d = zstandard.ZstdCompressionDict(dictionary) if dictionary else None
        if d is not None:
            d.precompute_compress(level=level)  # digested once, not at every chunk
        self._c = zstandard.ZstdCompressor(level=level, dict_data=d)
        self._d = zstandard.ZstdDecompressor(dict_data=d)

    def pack(self, header: dict[str, Any], arrays: list[bytes]) -> bytes:
        head = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
        body = codec.shuffle(b"".join(arrays))
        return self._c.compress(codec.HEADER.pack(len(head)) + head + body)

    def unpack(self, blob: bytes) -> tuple[dict[str, Any], bytes]:
        raw = codec.decompress(self._d, blob)
        (n,) = codec.HEADER.unpack_from(raw)
        if n > codec.MAX_JSON_BYTES:
            raise codec.CodecError(f"a chunk header of {n >> 20} MB (at most "
                                   f"{codec.MAX_JSON_BYTES >> 20} MB is read)")
        head = json.loads(raw[codec.HEADER.size:codec.HEADER.size + n])
        return head, codec.unshuffle(raw[codec.HEADER.size + n:])

    def pack_points(self, points: list[list[list[Any]]]) -> bytes:
        """Each poll's plot points ([series, metric, t, value] each) as the series'
        names once and, per poll, flat (series index, t, value) triplets."""
        keys: dict[tuple[str, str], int] = {}
        polls = []
        for poll in points:
            flat: list[Any] = []
            for name, metric, t, v in poll:
                flat += [keys.setdefault((name, metric), len(keys)), t, v]
            polls.append(flat)
        return self._c.compress(json.dumps({"k": [list(k) for k in keys], "p": polls},
                                           separators=(",", ":"), allow_nan=False).encode())

    def unpack_points_flat(self, blob: bytes) -> tuple[list[tuple[str, str]], list[list[Any]]]:
        got = json.loads(codec.decompress(self._d, blob, codec.MAX_JSON_BYTES))
        return [(str(a), str(b)) for a, b in got["k"]], list(got["p"])

    def unpack_points(self, blob: bytes) -> list[list[list[Any]]]:
        keys, polls = self.unpack_points_flat(blob)
        return [[[*keys[flat[i]], flat[i + 1], flat[i + 2]] for i in range(0, len(flat), 3)]
                for flat in polls]


def _finite(x: float | None) -> float | None:
    return x if x is not None and x == x and abs(x) != float("inf") else None


def encode_poll(enc: _Encoder, item: PollItem, seq: int, keyframe: bool,
                new_layout: Callable[[codec.SeriesKeys], int]
                ) -> tuple[dict[str, Any], list[tuple[str, int, list[float]]], list[Any]]:
    """One poll as a chunk record: (JSON record, the slots' value arrays, plot points)."""
    st = item.state
    snap = st.snapshot
    read = item.read if item.read is not None and snap is not None \
        and item.read.snapshot is snap and snap is not enc.last_snapshot else None
    figs: dict[str, Any] = {}
    raw: dict[str, Any] = {}
    arrays: list[tuple[str, int, list[float]]] = []
    slots_out = []
    points = _Points()
    if snap is not None:
        for s in snap.slots:
            how: Any = None
            sr = read.slots.get(s.slot) if read is not None else None
            gen = read.generation if read is not None else 0
            if (sr is not None and s.stale_since is None and s.source == "direct"
                    and s.figures is not None):
                keys, values, by_layout = codec.series_of(sr.exposition)
                lay_obj = sr.exposition._layout
                cached = enc.by_object.get(id(lay_obj)) if lay_obj is not None else None
                if cached is not None and cached[0] is lay_obj:
                    lay_id = cached[1]
                else:
                    lay_id = new_layout(keys)
                    if lay_obj is not None:
                        if len(enc.by_object) > 64:
                            enc.by_object.clear()
                        enc.by_object[id(lay_obj)] = (lay_obj, lay_id)
                seqs = enc.raw_seq.setdefault((s.slot, gen), {})
                enc.first_raw.setdefault((s.slot, gen), sr.t)
                seqs[sr.t] = seq
                earlier = seqs.get(sr.earlier) if sr.earlier is not None else None
                kv_from = seqs.get(sr.kv_from) if sr.kv_from is not None else None
                window_s = read.window_s if read is not None else 300.0
                cut = sr.t - 2 * window_s - 60  # seqs a later window can still name
                for t_old in [t for t in seqs if t < cut]:
                    del seqs[t_old]
                arrays.append((s.slot, lay_id, values))
                raw[s.slot] = [sr.t, lay_id, int(by_layout), list(sr.exposition.errors),
                               sr.exposition.error_count, earlier, kv_from]
                if (sr.earlier is None or earlier is not None) and (
                        sr.kv_from is None or kv_from is not None):
                    how = ["d"]
            elif (s.source == "prometheus" and s.stale_since is None and read is not None
                  and read.prom_answers is not None):
                how = ["p", read.window_s, read.prom_at]
            elif (s.stale_since is not None and s.figures is not None
                  and enc.fresh.get(s.slot, (None, 0))[0] == s.stale_since
                  and seq - enc.fresh[s.slot][1] <= STALE_REF_POLLS):
                how = ["s", enc.fresh[s.slot][1]]
            if s.figures is not None and s.stale_since is None:
                enc.fresh[s.slot] = (s.fetched_at, seq)
                for metric, value in plotted_values(s.figures).items():
                    points.add(s.slot, metric, snap.fetched_at, value)
            if how is not None:
                figs[s.slot] = how
                s = replace(s, figures=None, kv_p99=None)
            slots_out.append(s)
        snap_out: Any = replace(snap, slots=tuple(slots_out))
    else:
        snap_out = None
    enc.last_snapshot = snap
    if item.pod_read is not None:
        from console.session.gpu_history import record_gpus

        record_gpus(points, item.pod_read.gpus, st.polled_at or st.now)
    state: dict[str, Any] = {}
    for name in STATE_FIELDS:
        text = codec.dumps(getattr(st, name))
        if keyframe or enc.prev_state.get(name) != text:
            state[name] = json.loads(text)
            enc.prev_state[name] = text
    rec = {"seq": seq, "key": int(keyframe), "t": _poll_time(st),
           "snap": codec.encode(snap_out), "fig": figs,
           "raw": raw, "prom": read.prom_answers if read is not None
           and any(h[0] == "p" for h in figs.values()) else None,
           "st": state}
    pts = [[a, b, t, _finite(v)] for a, b, t, v in points.got if _finite(v) is not None]
    return rec, arrays, pts


def _poll_time(st: ConsoleState) -> float:
    return st.polled_at if st.polled_at is not None else st.now


def pack_chunk(codec_: ChunkCodec, records: list[dict[str, Any]],
               arrays: list[list[tuple[str, int, list[float]]]]) -> bytes:
    """Records and their arrays as one chunk body: each slot's values XORed with its
    values of the poll before in the chunk (same layout), then byte planes."""
    prev: dict[tuple[str, int], bytes] = {}
    blobs: list[bytes] = []
    index: list[list[Any]] = []
    for i, arrs in enumerate(arrays):
        for slot, lay_id, values in arrs:
            b = codec.pack(values)
            p = prev.get((slot, lay_id))
            delta = p is not None and len(p) == len(b)
            blobs.append(codec.xor(b, p) if delta and p is not None else b)
            prev[(slot, lay_id)] = b
            index.append([i, slot, lay_id, len(values), int(delta)])
    return codec_.pack({"v": VERSION, "polls": records, "arrays": index}, blobs)


def unpack_chunk(codec_: ChunkCodec, blob: bytes
                 ) -> tuple[list[dict[str, Any]], list[dict[str, list[float]]]]:
    """A chunk's records and, for each, its slots' values."""
    head, body = codec_.unpack(blob)
    if head.get("v") != VERSION:
        raise RecordingError(f"a chunk of format {head.get('v')!r} (this console reads "
                             f"{VERSION})")
    prev: dict[tuple[str, int], bytes] = {}
    polls = list(head["polls"])
    out: list[dict[str, list[float]]] = [{} for _ in polls]
    pos = 0
    for i, slot, lay_id, n, delta in head["arrays"]:
        b = body[pos:pos + 8 * n]
        pos += 8 * n
        if delta:
            b = codec.xor(b, prev[(slot, lay_id)])
        prev[(slot, lay_id)] = b
        out[i][slot] = codec.unpack(b)
    return polls, out


def open_db(path: Path, create: bool) -> sqlite3.Connection:
    db = sqlite3.connect(str(path), timeout=5.0, isolation_level=None,
                         check_same_thread=False)
    if create:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(SCHEMA)
    return db


def write_meta(db: sqlite3.Connection, meta: dict[str, Any]) -> None:
    db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                   [(k, json.dumps(v)) for k, v in meta.items()])


def alert_markers(before: ConsoleState | None, after: ConsoleState) -> list[Marker]:
    """Alert transitions and watchdog decisions between two polls, as markers."""
    out: list[Marker] = []
    t = _poll_time(after)
    # what a parent explains (a cooldown's 5xx) is marked with it, not on its own
    was = ({a.key: a for a in before.alerts if a.state == "firing" and a.parent is None}
           if before else {})
    now = {a.key: a for a in after.alerts if a.state == "firing" and a.parent is None}
    for key, a in now.items():
        if key not in was:
            # when it fired, not this poll's time: an alert that fired while no poll
            # was written (recording paused) is marked where it fired
            at = a.fired_at if a.fired_at is not None and a.fired_at <= t else t
            out.append(Marker(at, "xid" if key.startswith("xid:") else "alert",
                              f"{a.severity.upper()} {a.title}", key))
    for key, a in was.items():
        if key not in now:
            out.append(Marker(t, "alert", f"cleared: {a.title}", key))
    p0 = before.pod.stop_plan if before is not None and before.pod is not None else None
    p1 = after.pod.stop_plan if after.pod is not None else None
    w0 = before.pod.last_watchdog_result if before is not None and before.pod else None
    w1 = after.pod.last_watchdog_result if after.pod is not None else None
    if p1 is not None:
        if p1.last_stop_at is not None and (p0 is None or p0.last_stop_at != p1.last_stop_at):
            out.append(Marker(t, "watchdog", f"stop: {p1.last_stop_reason or '?'}"
                              + (f" by {p1.last_stop_by}" if p1.last_stop_by else ""),
                              "stop"))
        if p0 is not None and p1.next_reason != p0.next_reason and p1.next_reason:
            out.append(Marker(t, "watchdog", f"next stop: {p1.next_reason}", "next"))
        if p0 is not None and p1.warning and not p0.warning:
            out.append(Marker(t, "watchdog", f"stop warning: {p1.next_reason or '?'}",
                              "warning"))
    if w1 and w1 != w0 and w0 is not None:
        out.append(Marker(t, "watchdog", f"watchdog: {w1}"[:200], "result"))
    return out


class Recorder:
    """Records polls into a file of its own under ``directory`` (see the module
    docstring). ``poll`` and ``mark`` never block: a bounded queue to the writer thread
    (a poll that finds it full is dropped and counted). ``on_pause``: told (from the
    writer thread) why recording paused, and None when it resumes."""

    def __init__(self, directory: Path, meta: dict[str, Any], *,
                 keep_s: float = 7 * 86400.0, max_bytes: int = 1 << 30,
                 chunk_polls: int = CHUNK_POLLS, clock: Callable[[], float] = time.time,
                 mono: Callable[[], float] = time.monotonic,
                 on_pause: Callable[[str | None], None] | None = None,
                 fault: Callable[[], None] | None = None) -> None:
        self.directory = directory
        self.keep_s = keep_s
        self.max_bytes = max_bytes
        self.chunk_polls = chunk_polls
        self.clock = clock
        """The wall clock: file names, the times of polls and markers."""
        self.mono = mono
        """The monotonic clock: every age retention counts (see ``Retention``)."""
        self.retention = Retention(clock(), mono())
        self.on_pause = on_pause or (lambda why: None)
        self.fault = fault
        """Called before every write (tests inject a full disk here)."""
        self.retry_s = RETRY_S
        self.dropped = 0
        self.written = 0
        self.paused: str | None = None
        self.cpu_s = 0.0
        """Thread CPU seconds the writer has spent (what the benchmark reads)."""
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue(QUEUE_MAX)
        self._meta = {"format": FORMAT, "version": VERSION, "pid": os.getpid(),
                      "host": socket.gethostname(), "started": clock(),
                      "plotted": list(PLOTTED), **meta}
        """``plotted``: the figures the plots' points were stored for (a figure plotted
        since is computed from the samples on replay)."""
        self.path: Path | None = None
        """This recorder's file (set by its thread, which creates it)."""
        self._lock_fd = -1
        self._db: sqlite3.Connection | None = None
        self._enc = _Encoder()
        self._codec = ChunkCodec()
        self._quick = ChunkCodec(level=QUICK_LEVEL)
        self._dict_id: int | None = None
        self._seq = 0
        self._pending: list[tuple[dict[str, Any], list[tuple[str, int, list[float]]],
                                  list[Any]]] = []
        self._training: list[bytes] = []
        self._prev_state: ConsoleState | None = None
        self._paused_at: float | None = None
        self._next_try = 0.0
        self._held: list[Marker] = []
        self._packed: collections.deque[tuple[int, float]] = collections.deque()
        self._poll_clocks: tuple[float, float] | None = None
        """This file's packed chunks: (last seq, monotonic time written), oldest first:
        its own chunks age on the monotonic clock, never on their wall times."""
        self._thread = threading.Thread(target=self._run, name="recorder", daemon=True)
        self._thread.start()

    # -- the loop's side: never blocks ---------------------------------------------
    def poll(self, item: PollItem) -> bool:
        try:
            # the poll's two clocks, read here together: the writer may run later, and
            # ages (this file's chunks', retention's) are the polls', not the writer's;
            # read apart, the two clocks would look stepped by the writer's delay
            self._queue.put_nowait(("poll", (item, (self.clock(), self.mono()))))
            return True
        except queue.Full:
            self.dropped += 1
            return False

    def mark(self, marker: Marker) -> None:
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(("mark", marker))

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything queued so far is written (tests, exit)."""
        done = threading.Event()
        try:
            self._queue.put(("sync", done), timeout=timeout)
        except queue.Full:
            return False
        return done.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive():
            with contextlib.suppress(queue.Full):
                self._queue.put(("close", None), timeout=timeout)
            self._thread.join(timeout)
        if self._lock_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)

    # -- the writer thread ------------------------------------------------------------
    def _open(self) -> None:
        """A file of this recorder's own: no other console ever writes into it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(self.clock()))
        for n in range(1000):
            path = self.directory / f"{stamp}-{os.getpid()}-{n}{SUFFIX}"
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
                break
            except FileExistsError:
                continue
        else:  # pragma: no cover - a thousand consoles in one second
            raise RecordingError(f"no free recording name in {self.directory}")
        self._lock_fd = fd
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # live: retention leaves it be
        self._db = open_db(path, create=True)
        write_meta(self._db, self._meta)
        self.path = path

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            self._open()
            with contextlib.suppress(Exception):
                self._retain()
        assert self._db is not None
        return self._db

    def _run(self) -> None:
        while True:
            kind, arg = self._queue.get()
            c0 = time.thread_time()
            if kind == "close":
                self._finish()
                return
            if kind == "sync":
                arg.set()
                continue
            try:
                if kind == "poll":
                    item, self._poll_clocks = arg
                    self._write_poll(item)
                else:
                    self._write_markers([arg])
            except Exception as exc:
                self._failed(exc)
            self.cpu_s += time.thread_time() - c0

    def _clocks(self) -> tuple[float, float]:
        """The wall and monotonic times of the poll being written (the clocks' now,
        before any)."""
        return self._poll_clocks or (self.clock(), self.mono())

    def _finish(self) -> None:
        with contextlib.suppress(Exception):
            if self.paused is None and self._pending:
                self._pack()
        if self._db is not None:
            with contextlib.suppress(Exception):
                self._db.close()

    def _check(self) -> None:
        if self.fault is not None:
            self.fault()

    def _failed(self, exc: BaseException) -> None:
        with contextlib.suppress(Exception):
            if self._db is not None and self._db.in_transaction:
                self._db.execute("ROLLBACK")
        why = ("disk full" if is_full(exc) else f"{type(exc).__name__}: {exc}")[:200]
        if self.paused is None:
            self.paused = why
            self._paused_at = self.clock()
            self._held.append(Marker(self._paused_at, "recording",
                                     f"recording paused: {why}", "paused"))
            self.on_pause(why)
        self._next_try = time.monotonic() + self.retry_s

    def _resumed(self) -> None:
        why, self.paused = self.paused, None
        self._write_markers([*self._held, Marker(self.clock(), "recording",
                                                 f"recording resumed (was: {why})",
                                                 "resumed")])
        self._held = []
        self.on_pause(None)

    def _write_markers(self, markers: Iterable[Marker]) -> None:
        markers = list(markers)
        if not markers:
            return
        if self.paused is not None:
            self._held.extend(markers)
            return
        self._check()
        self.db.executemany("INSERT INTO markers (t, kind, text, key) VALUES (?, ?, ?, ?)",
                             [(m.t, m.kind, m.text, m.key) for m in markers])

    def _new_layout(self, keys: codec.SeriesKeys) -> int:
        blob = codec.keys_blob(keys)
        digest = codec.keys_digest(blob)
        got = self._enc.layouts.get(digest)
        if got is not None:
            return got
        row = self.db.execute("SELECT id FROM layouts WHERE digest = ?", (digest,)).fetchone()
        if row is None:
            cur = self.db.execute("INSERT INTO layouts (digest, body) VALUES (?, ?)",
                                   (digest, zstandard.ZstdCompressor(level=LEVEL).compress(blob)))
            lay_id = int(cur.lastrowid or 0)
        else:
            lay_id = int(row[0])
        self._enc.layouts[digest] = lay_id
        return lay_id

    def _write_poll(self, item: PollItem) -> None:
        if self.paused is not None:
            if time.monotonic() < self._next_try:
                self.dropped += 1
                return
            self._enc = _Encoder()  # the polls lost: nothing refers back to them
            self._pending = []
        self._check()
        self.db.execute("BEGIN IMMEDIATE")
        keyframe = not self._pending
        seq = self._seq
        rec, arrays, pts = encode_poll(self._enc, item, seq, keyframe, self._new_layout)
        markers = alert_markers(self._prev_state, item.state)
        body = pack_chunk(self._quick, [rec], [arrays])
        pblob = self._quick.pack_points([pts])
        self.db.execute("INSERT INTO chunks (seq0, seq1, t0, t1, dict, body, points) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (seq, seq, rec["t"], rec["t"], self._dict_id or None, body, pblob))
        self.db.execute("INSERT OR REPLACE INTO polls (seq, t) VALUES (?, ?)", (seq, rec["t"]))
        self.db.executemany("INSERT INTO markers (t, kind, text, key) VALUES (?, ?, ?, ?)",
                             [(m.t, m.kind, m.text, m.key) for m in markers])
        self.db.execute("COMMIT")
        self._seq += 1
        self.written += 1
        self._prev_state = item.state
        self._pending.append((rec, arrays, pts))
        if self.paused is not None:
            self._resumed()
        if self._dict_id is None and len(self._training) < DICT_AFTER:
            self._training.append(pack_chunk(ChunkCodec(), [rec], [arrays]))
        if len(self._pending) >= self.chunk_polls:
            self._pack()

    def _train(self) -> None:
        """The dictionary, from the first polls (their decompressed bodies)."""
        samples: list[bytes | bytearray | memoryview[int]] = []
        d = ChunkCodec()
        for blob in self._training:
            head, body = d.unpack(blob)
            samples.append(json.dumps(head, separators=(",", ":")).encode())
            samples.append(body)
        self._training = []
        try:
            trained = zstandard.train_dictionary(DICT_SIZE, samples, level=LEVEL)
        except zstandard.ZstdError:
            self._dict_id = 0  # too little to learn from: no dictionary
            return
        cur = self.db.execute("INSERT INTO dicts (body) VALUES (?)", (trained.as_bytes(),))
        self._dict_id = int(cur.lastrowid or 0)
        self._codec = ChunkCodec(trained.as_bytes())
        self._quick = ChunkCodec(trained.as_bytes(), level=QUICK_LEVEL)

    def _pack(self) -> None:
        """The pending one-poll chunks as one chunk."""
        if self._dict_id is None:
            self._train()
        recs = [r for r, _, _ in self._pending]
        body = pack_chunk(self._codec, recs, [a for _, a, _ in self._pending])
        pblob = self._codec.pack_points([p for _, _, p in self._pending])
        seq0, seq1 = recs[0]["seq"], recs[-1]["seq"]
        self._check()
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute("DELETE FROM chunks WHERE seq0 >= ? AND seq1 <= ?", (seq0, seq1))
        self.db.execute("INSERT INTO chunks (seq0, seq1, t0, t1, dict, body, points) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (seq0, seq1, recs[0]["t"], recs[-1]["t"],
                          self._dict_id or None, body, pblob))
        self.db.execute("COMMIT")
        self._packed.append((seq1, self._clocks()[1]))
        self._pending = []
        self._retain()

    def _retain(self) -> None:
        """Age, then size: the oldest files of the directory go first (a file another
        console is writing keeps its own; this one drops its oldest chunks). One scan of
        the directory per pass, whatever the number of files; a file that vanishes, a
        dangling link or one that cannot be removed is passed over, never a pause.
        Ages are the monotonic clock's where this process knows one; a file's time is
        trusted only while the wall clock has not stepped (``Retention``)."""
        now, mono = self._clocks()
        keep = self.retention
        keep.observe(now, mono)
        files = listing(self.directory)
        own = self.path.name if self.path is not None else None
        candidates = [f for f in files if f.name.endswith(SUFFIX) and f.name != own
                      and not f.link]
        candidates.sort(key=lambda f: f.mtime)
        keep.seen(candidates, now, mono)
        total = sum(f.size for f in files)
        sizes = {f.name: f.size for f in files}
        gone: set[str] = set()

        def drop(f: Entry) -> None:
            nonlocal total
            if remove(f.path):
                gone.add(f.name)
                for name in (f.name, f"{f.name}-wal", f"{f.name}-shm"):
                    total -= sizes.pop(name, 0)

        for f in candidates:
            if keep.old(f, now, mono, self.keep_s) and not _locked(f.path):
                drop(f)
        # this file's own chunks: by the monotonic time each was written
        cut = None
        while self._packed and mono - self._packed[0][1] > self.keep_s:
            cut = self._packed.popleft()[0]
        if cut is not None:
            self.db.execute("DELETE FROM chunks WHERE seq1 <= ?", (cut,))
            self.db.execute("DELETE FROM polls WHERE seq <= ?", (cut,))
        for f in candidates:
            if total <= self.max_bytes:
                return
            if f.name not in gone and not _locked(f.path):
                drop(f)
        others = total - sum(v for k, v in sizes.items() if own is not None
                             and k.startswith(own))
        while self._used_bytes() + others > self.max_bytes:
            row = self.db.execute("SELECT id, seq1 FROM chunks ORDER BY seq0 LIMIT 1"
                                   ).fetchone()
            if row is None or row[1] >= self._seq - len(self._pending) - 1:
                return  # only what is being written is left
            self.db.execute("DELETE FROM chunks WHERE id = ?", (row[0],))
            self.db.execute("DELETE FROM polls WHERE seq <= ?", (row[1],))

    def _used_bytes(self) -> int:
        page = self.db.execute("PRAGMA page_size").fetchone()[0]
        count = self.db.execute("PRAGMA page_count").fetchone()[0]
        free = self.db.execute("PRAGMA freelist_count").fetchone()[0]
        return int(page * (count - free))


def _locked(path: Path) -> bool:
    """Whether a live recorder holds ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def is_live(path: Path) -> bool:
    return _locked(path)


class SharedTurn:
    """One recording among processes that show the same polls: the web wall's tabs each
    run a wall session, and read their slots through one scrape relay, so one of them
    records for all. Whoever holds ``path`` (a lock file) records; the others ask again
    at each poll and take over when the holder's process ends (the lock goes with it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1

    def mine(self) -> bool:
        if self._fd >= 0:
            return True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the descriptor releases the lock
            self._fd = -1
