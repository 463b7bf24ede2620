"""``pod-console record export``: a time range of a recording as one self-contained file
for a ticket (``replay FILE`` opens it on another machine).

It holds numbers, names and markers, never a secret: every string is rewritten without
URL credentials and without any secret the settings or the environment hold (API keys,
tokens, webhook URLs), the compression has no dictionary (a dictionary is text learnt
from the original), and the finished file, decompressed, is searched for each secret
before it is kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import zstandard

from console.model.redact import redact_url
from console.session.record import codec
from console.session.record.reader import SqliteTape
from console.session.record.store import (
    CHUNK_POLLS,
    FORMAT,
    SCHEMA,
    VERSION,
    ChunkCodec,
    RecordingError,
    is_keyframe,
    pack_chunk,
    write_meta,
)

SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|WEBHOOK)", re.I)
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s\"']*@")
REDACTED = "[redacted]"


def secrets_of(settings: Any = None, env: dict[str, str] | None = None) -> list[str]:
    """Every secret value the settings and the environment hold (6 characters or more:
    shorter ones are words, not keys)."""
    from pydantic import SecretStr

    out: set[str] = set()
    if settings is not None:
        for name in type(settings).model_fields:
            v = getattr(settings, name, None)
            if isinstance(v, SecretStr):
                out.add(v.get_secret_value())
    for k, v in (os.environ if env is None else env).items():
        if SECRET_ENV.search(k):
            out.add(v)
    return sorted((s for s in out if len(s) >= 6), key=len, reverse=True)


def scrub(value: Any, secrets: Iterable[str]) -> Any:
    secrets = list(secrets)
    if isinstance(value, str):
        # credentials in a URL: its userinfo dropped, a token in its query masked
        s = redact_url(_USERINFO.sub(r"\1", value))
        for secret in secrets:
            s = s.replace(secret, REDACTED)
        return s
    if isinstance(value, list):
        return [scrub(v, secrets) for v in value]
    if isinstance(value, dict):
        return {scrub(k, secrets): scrub(v, secrets) for k, v in value.items()}
    return value


def export(src: Path, dest: Path, t_from: float, t_to: float,
           secrets: Iterable[str] = ()) -> int:
    """Polls of ``src`` from ``t_from`` to ``t_to`` into the new file ``dest``; how many."""
    secrets = list(secrets)
    tape = SqliteTape(src)
    try:
        times, seqs = tape.times(), tape._seqs
        chosen = [s for s, t in zip(seqs, times, strict=True) if t_from <= t <= t_to]
        if not chosen:
            raise RecordingError(f"{src.name}: no poll between those times")
        start = _lead_in(tape, chosen)
        if dest.exists():
            raise RecordingError(f"{dest}: exists already (not overwritten)")
        tmp = dest.with_name(dest.name + ".part")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        db = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            db.executescript(SCHEMA)
            db.execute("BEGIN")
            meta = {k: tape.meta[k] for k in ("profile", "context", "window_s", "history_s",
                                              "refresh_s", "wall", "plotted") if k in tape.meta}
            write_meta(db, {"format": FORMAT, "version": VERSION, "exported": time.time(),
                            "range": [t_from, t_to], **scrub(meta, secrets)})
            for (lay_id,) in {(r[1],) for s in range(start, chosen[-1] + 1)
                              for r in tape.record(s)[0]["raw"].values()}:
                body = tape._db.execute("SELECT digest, body FROM layouts WHERE id = ?",
                                        (lay_id,)).fetchone()
                keys = codec.decompress(zstandard.ZstdDecompressor(), bytes(body[1]))
                clean = json.dumps(scrub(json.loads(keys), secrets)).encode()
                db.execute("INSERT INTO layouts (id, digest, body) VALUES (?, ?, ?)",
                           (lay_id, body[0], zstandard.ZstdCompressor().compress(clean)))
            plain = ChunkCodec()
            batch: list[int] = []
            for s in range(start, chosen[-1] + 1):
                batch.append(s)
                if len(batch) >= CHUNK_POLLS or s == chosen[-1]:
                    _write_chunk(db, tape, plain, batch, secrets)
                    batch = []
            db.executemany("INSERT INTO polls (seq, t) VALUES (?, ?)",
                           [(s, t) for s, t in zip(seqs, times, strict=True)
                            if t_from <= t <= t_to])
            db.executemany("INSERT INTO markers (t, kind, text, key) VALUES (?, ?, ?, ?)",
                           [(m.t, m.kind, scrub(m.text, secrets), scrub(m.key, secrets))
                            for m in tape.markers() if t_from <= m.t <= t_to])
            db.execute("COMMIT")
            db.execute("VACUUM")
        finally:
            db.close()
        _check_clean(tmp, secrets)
        tmp.rename(dest)
        return len(chosen)
    finally:
        tape.close()


def _lead_in(tape: SqliteTape, chosen: list[int]) -> int:
    """The first poll the exported ones need: the full record the first one's state is
    told against, and every scrape their windows start from."""
    start = chosen[0]
    k = start
    while k > tape._chunks[0].seq0 and not is_keyframe(tape.record(k)[0]):
        k -= 1
    start = min(start, k)
    for s in chosen:
        rec = tape.record(s)[0]
        for raw in rec["raw"].values():
            for ref in (raw[5], raw[6]):
                if ref is not None:
                    start = min(start, int(ref))
        for how in rec["fig"].values():
            if how[0] == "s":
                start = min(start, int(how[1]))
    return start


def _write_chunk(db: sqlite3.Connection, tape: SqliteTape, plain: ChunkCodec,
                 batch: list[int], secrets: list[str]) -> None:
    recs = []
    arrays = []
    points = []
    for s in batch:
        rec, values = tape.record(s)
        recs.append(scrub(rec, secrets))
        arrays.append([(slot, int(raw[1]), values[slot]) for slot, raw in rec["raw"].items()])
        c = tape._chunk_of(s)
        keys, polls = tape._points(c)
        flat = polls[s - c.seq0]
        points.append(scrub([[*keys[flat[i]], flat[i + 1], flat[i + 2]]
                             for i in range(0, len(flat), 3)], secrets))
    db.execute("INSERT INTO chunks (seq0, seq1, t0, t1, dict, body, points) "
               "VALUES (?, ?, ?, ?, NULL, ?, ?)",
               (batch[0], batch[-1], recs[0]["t"], recs[-1]["t"],
                pack_chunk(plain, recs, arrays), plain.pack_points(points)))


def _check_clean(path: Path, secrets: list[str]) -> None:
    """No secret in the file, nor in any of its compressed frames."""
    if not secrets:
        return
    blobs = [path.read_bytes()]
    db = sqlite3.connect(str(path))
    try:
        d = zstandard.ZstdDecompressor()
        for body, pts in db.execute("SELECT body, points FROM chunks"):
            blobs += [d.decompress(bytes(body)), d.decompress(bytes(pts))]
        for (body,) in db.execute("SELECT body FROM layouts"):
            blobs.append(d.decompress(bytes(body)))
    finally:
        db.close()
    for secret in secrets:
        needle = secret.encode()
        if any(needle in b for b in blobs):
            path.unlink()
            raise RecordingError("the export still held a secret: not written")
