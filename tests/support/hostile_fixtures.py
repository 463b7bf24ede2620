"""Writes ``tests/fixtures/hostile/``: inputs that attack the console, one file per shape,
each documented below (``SHAPES``). Run it again after a change of the recording format:

    PYTHONPATH=$PWD python3 tests/support/hostile_fixtures.py

Two kinds:

- ``litellm_metrics_hostile.txt``: the real LiteLLM capture (``litellm_metrics.txt``) with
  every label a screen shows (``model_group``, ``model_id``, ``api_base``, ``team_alias``,
  ``end_user``, ``requested_model``) carrying terminal escapes: OSC 0 (retitle), OSC 52
  (clipboard), OSC 8 (a ``javascript:`` link), CSI 2J (clear), an 8-bit CSI, a bidi
  override, and a password and a key in ``api_base``'s URL (the canaries below).
- ``*.podrec``: a real recording (the session tier's world, 70 polls, its recorder)
  altered one way per file. ``replay`` of each must end with one sentence and status 1
  or 2, within 2 s and 200 MB, and import nothing the file names.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "hostile"
CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "litellm_metrics.txt"

CANARY_PASSWORD = "CANARY-pw-7731"
CANARY_KEY = "CANARY-key-5521"
ESCAPES = ("\x1b]0;PWNED\x07", "\x1b]52;c;UFdORUQ=\x07", "\x1b[2J\x1b[H",
           "\x1b]8;;javascript:alert(1)\x1b\\\\", "\u009b2J", "\u202e")
"""What the hostile labels carry (as the exposition writes them: ``\\\\`` is one
backslash): title, clipboard, clear screen, link, 8-bit CSI, bidi override."""

LABELS = {
    'model_group="tiny"': 'model_group="tiny\x1b]0;PWNED\x07"',
    'requested_model="tiny"': 'requested_model="tiny\x1b]0;PWNED\x07"',
    'model_id="tiny-a"': 'model_id="tiny-a\x1b[2J\x1b[H"',
    'team_alias="None"': 'team_alias="ops\x1b]52;c;UFdORUQ=\x07"',
    'end_user="alice"': 'end_user="alice\x1b]8;;javascript:alert(1)\x1b\\\\\u009b2J\u202e"',
    'api_base="http://127.0.0.1:33391/v1"':
        f'api_base="http://admin:{CANARY_PASSWORD}@127.0.0.1:33391/v1?api_key={CANARY_KEY}'
        '\x1b]0;BASE\x07"',
}

SHAPES: dict[str, str] = {
    "import.podrec": "the state names pod_agent.__main__:main as a class ($p): an import "
                     "of it once ran pod-agent's command line inside replay",
    "bomb.podrec": "the first chunk is a 64 KB zstd frame that says it holds 1.5 GB",
    "bomb-unsized.podrec": "the same bomb without its size in the frame (read in pieces)",
    "deep-meta.podrec": "the meta's window_s is a list nested 100,000 deep",
    "huge-time.podrec": "a poll's time is 1e300 (no date: localtime overflows)",
    "self-reference.podrec": "a slot's figures are 'those of poll N' with N the poll itself",
    "wrong-class-view.podrec": "the state's view is a SlotTarget, not a ConsoleView",
    "deep-points.podrec": "the plots' points of the first chunk nest 100,000 deep",
    "wrong-kv-range.podrec": "a slot's KV p99 spans from poll -10^12 to this one",
    "deep-state.podrec": "a state field nests 100,000 deep in the chunk's header",
    "wide-header.podrec": "a chunk's JSON header is 30 MB of [0,0,0,...] (under the frame "
                          "cap: 250 MB once parsed)",
    "alert-escapes.podrec": "a GOOD recording whose alert marker's text holds terminal "
                            "escapes (replay --list must print them cleaned)",
    "state-escapes.podrec": "a GOOD recording whose state's words (the stale reason, a "
                            "slot's health detail) hold terminal escapes",
}
READABLE = frozenset({"alert-escapes.podrec", "state-escapes.podrec"})
"""The shapes that are recordings still (their words are what is hostile)."""


def hostile_exposition() -> str:
    text = CAPTURE.read_text()
    for a, b in LABELS.items():
        assert a in text, a
        text = text.replace(a, b)
    return text


async def _record(tmp: Path) -> Path:
    from tests.session.test_record import _recorded

    w, path = await _recorded(tmp, 70)
    await w.session.aclose()
    return path


def base_recording(tmp: Path) -> Path:
    """A real recording, folded into one file (its WAL checkpointed) with a fixed meta."""
    src = asyncio.run(_record(tmp))
    db = sqlite3.connect(src)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.execute("PRAGMA journal_mode=DELETE")
    db.executemany("UPDATE meta SET value = ? WHERE key = ?",
                   [(json.dumps(0), "pid"), (json.dumps("fixture"), "host")])
    db.commit()
    db.execute("VACUUM")
    db.close()
    out = tmp / "base.podrec"
    shutil.copyfile(src, out)
    return out


def _codec(db: sqlite3.Connection, dict_id: int | None) -> Any:
    from console.session.record.store import ChunkCodec

    if dict_id is None:
        return ChunkCodec()
    (body,) = db.execute("SELECT body FROM dicts WHERE id = ?", (dict_id,)).fetchone()
    return ChunkCodec(bytes(body))


def _rewrite_first_chunk(db: sqlite3.Connection, change: Any) -> None:
    """Chunk 1 decoded, ``change(records, arrays)`` applied, packed back."""
    from console.session.record import codec
    from console.session.record.store import pack_chunk

    cid, dict_id, body = db.execute(
        "SELECT id, dict, body FROM chunks ORDER BY seq0 LIMIT 1").fetchone()
    c = _codec(db, dict_id)
    head, raw = c.unpack(bytes(body))
    polls = head["polls"]
    arrays: list[list[tuple[str, int, list[float]]]] = [[] for _ in polls]
    pos = 0
    for i, slot, lay_id, n, _delta in head["arrays"]:
        arrays[i].append((slot, lay_id, codec.unpack(raw[pos:pos + 8 * n])))
        pos += 8 * n
    change(polls, arrays)
    db.execute("UPDATE chunks SET body = ? WHERE id = ?", (pack_chunk(c, polls, arrays), cid))


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def _bomb(db: sqlite3.Connection, sized: bool) -> None:
    import zstandard

    size = 1536 * 1024 * 1024
    comp = zstandard.ZstdCompressor(level=1, write_content_size=sized)
    import io
    out = io.BytesIO()
    block = b"\0" * (16 * 1024 * 1024)
    with comp.stream_writer(out, size=size if sized else -1, closefd=False) as w:
        for _ in range(size // len(block)):
            w.write(block)
    db.execute("UPDATE chunks SET body = ?, dict = NULL WHERE id = "
               "(SELECT id FROM chunks ORDER BY seq0 LIMIT 1)", (out.getvalue(),))


def _view_class(polls: list[dict[str, Any]], arrays: Any) -> None:
    polls[0]["st"]["view"] = {"$c": "console.sources.collect.targets:SlotTarget", "v": {
        "slot": "X", "served_model_name": "x", "port": 1, "base_url": "http://127.0.0.1:1"}}


def _self_ref(polls: list[dict[str, Any]], arrays: Any) -> None:
    slot = polls[0]["snap"]["v"]["slots"]["$t"][0]["v"]["slot"]
    for p in polls:
        p["fig"][slot] = ["s", p["seq"]]


def _kv_range(db: sqlite3.Connection) -> None:
    """A layout of one series and a slot read the direct way, its KV range absurd."""
    import zstandard

    from console.session.record import codec

    keys = (("vllm:kv_cache_usage_perc", (("model_name", "qwen3.8-flash-next"),)),)
    blob = codec.keys_blob(keys)
    db.execute("INSERT INTO layouts (id, digest, body) VALUES (1, ?, ?)",
               (codec.keys_digest(blob), zstandard.ZstdCompressor().compress(blob)))

    def change(polls: list[dict[str, Any]], arrays: Any) -> None:
        slot = polls[0]["snap"]["v"]["slots"]["$t"][0]["v"]["slot"]
        for i, p in enumerate(polls):
            p["fig"][slot] = ["d"]
            p["raw"][slot] = [p["t"], 1, 1, [], 0, None, -10 ** 12]
            arrays[i].append((slot, 1, [0.5]))
    _rewrite_first_chunk(db, change)


def _deep_state(db: sqlite3.Connection) -> None:
    """A state field nested 100,000 deep: written as text (no JSON encoder nests so deep)."""
    from console.session.record import codec

    _rewrite_first_chunk(db, lambda polls, arrays: polls[0]["st"].__setitem__("ages", "DEEP"))
    cid, dict_id, body = db.execute(
        "SELECT id, dict, body FROM chunks ORDER BY seq0 LIMIT 1").fetchone()
    c = _codec(db, dict_id)
    raw = c._d.decompress(bytes(body))
    (n,) = codec.HEADER.unpack_from(raw)
    head = raw[codec.HEADER.size:codec.HEADER.size + n].replace(
        b'"DEEP"', ('{"$t":[' * 100_000 + "]}" * 100_000).encode(), 1)
    blob = c._c.compress(codec.HEADER.pack(len(head)) + head + raw[codec.HEADER.size + n:])
    db.execute("UPDATE chunks SET body = ? WHERE id = ?", (blob, cid))


def _state_words(polls: list[dict[str, Any]], arrays: Any) -> None:
    for p in polls:
        if "stale" in p["st"] or p is polls[0]:
            p["st"]["stale"] = "refused\x1b]0;PWNED\x07\x1b]52;c;UFdORUQ=\x07\x1b[2J"
        for s in p["snap"]["v"]["slots"]["$t"]:
            s["v"]["health_detail"] = "200\x1b]0;SLOT\x07\u009b2J"


def _wide_header(db: sqlite3.Connection) -> None:
    from console.session.record import codec

    cid, dict_id = db.execute("SELECT id, dict FROM chunks ORDER BY seq0 LIMIT 1").fetchone()
    c = _codec(db, dict_id)
    head = b"[" + b"0," * (15 * 1024 * 1024) + b"0]"
    db.execute("UPDATE chunks SET body = ? WHERE id = ?",
               (c._c.compress(codec.HEADER.pack(len(head)) + head), cid))


def _import(polls: list[dict[str, Any]], arrays: Any) -> None:
    polls[0]["st"]["stop"] = {"$p": "pod_agent.__main__:main", "v": {}}


def _alert(db: sqlite3.Connection) -> None:
    (t,) = db.execute("SELECT min(t) FROM polls").fetchone()
    db.execute("INSERT INTO markers (t, kind, text, key) VALUES (?, 'alert', ?, 'down:Q')",
               (t + 10, "CRIT Q down\x1b]0;PWNED\x07\x1b]52;c;UFdORUQ=\x07\x1b[2J"))


def write_all(out: Path = HERE) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "litellm_metrics_hostile.txt").write_text(hostile_exposition())
    with tempfile.TemporaryDirectory() as d:
        base = base_recording(Path(d))
        shaped: dict[str, Any] = {
            "import.podrec": lambda db: _rewrite_first_chunk(db, _import),
            "bomb.podrec": lambda db: _bomb(db, True),
            "bomb-unsized.podrec": lambda db: _bomb(db, False),
            "deep-meta.podrec": lambda db: db.execute(
                "UPDATE meta SET value = ? WHERE key = 'window_s'", (_deep(100_000),)),
            "huge-time.podrec": lambda db: db.execute(
                "UPDATE polls SET t = 1e300 WHERE seq = (SELECT max(seq) FROM polls)"),
            "self-reference.podrec": lambda db: _rewrite_first_chunk(db, _self_ref),
            "wrong-class-view.podrec": lambda db: _rewrite_first_chunk(db, _view_class),
            "deep-points.podrec": lambda db: _deep_points(db),
            "wrong-kv-range.podrec": _kv_range,
            "deep-state.podrec": _deep_state,
            "wide-header.podrec": _wide_header,
            "alert-escapes.podrec": _alert,
            "state-escapes.podrec": lambda db: _rewrite_first_chunk(db, _state_words),
        }
        assert set(shaped) == set(SHAPES)
        for name, make in shaped.items():
            dest = out / name
            shutil.copyfile(base, dest)
            db = sqlite3.connect(dest)
            make(db)
            db.commit()
            db.execute("VACUUM")
            db.close()
    (out / "README.md").write_text(
        "# Hostile inputs\n\nWritten by `tests/support/hostile_fixtures.py` (run it to "
        "write them again); each shape:\n\n"
        + "".join(f"- `{n}`: {why}\n" for n, why in
                  {"litellm_metrics_hostile.txt": "LiteLLM's capture with escapes in every "
                   "label a screen shows and a password and key in api_base", **SHAPES}.items()))


def _deep_points(db: sqlite3.Connection) -> None:
    cid, dict_id = db.execute("SELECT id, dict FROM chunks ORDER BY seq0 LIMIT 1").fetchone()
    c = _codec(db, dict_id)
    blob = c._c.compress(('{"k":[["FLASH","x"]],"p":' + _deep(100_000) + "}").encode())
    db.execute("UPDATE chunks SET points = ? WHERE id = ?", (blob, cid))


if __name__ == "__main__":
    write_all()
