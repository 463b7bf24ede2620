"""The webhook's durable outbox: ``STATE_DIR/outbox.sqlite``, shared by every session.

Issue 43, item 6: without Alertmanager the direct webhook is the only way an alert leaves
the console, so it must lose nothing. Each raise and each clear the shared alert book
hands out (``shared_alerts.py``) is written here in the book's own transaction, by
whichever session judged it, webhook or not; only a session with a webhook takes entries
out, and only after the receiver answered 2xx. So:

- a clear judged by a session without a webhook (a wall, ``record``) still reaches it;
- a POST that fails (a 500, a redirect, no answer) is tried again, with a doubling
  backoff on the monotonic clock, by any session with a webhook, now or after a restart;
- a process killed between judging and posting left its entry here;
- a raise and its clear go out in the order they were judged: of each alert, only the
  oldest entry is ever tried, and a later one waits for it.

Why sqlite (stdlib) and not an append-only file: entries are taken out one by one, by
several processes, in any order across alerts; a log would need a compaction and an index
of what was delivered, both written by hand. sqlite in WAL mode with ``synchronous=FULL``
gives that transactionally and survives a ``kill -9`` at any point. One drainer at a
time (``outbox.drain.lock``, ``flock``, released by the kernel when its holder dies), so
two sessions never post the same entry at once.

Delivery is at least once: a POST the receiver accepted whose answer was lost (the
poster killed mid-request) is posted again.

Blocking (sqlite, flock): callers run these methods off the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import math
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from msgspec import Struct

FIRST_BACKOFF_S = 2.0
"""The wait after a first failed POST; doubled at each failure after it."""
MAX_BACKOFF_S = 300.0
"""The longest wait between two tries of one entry."""
MAX_DEPTH = 10_000
"""A bound for a state dir no session with a webhook ever drains (oldest dropped)."""
BUSY_TIMEOUT_S = 2.0
DRAINER_FRESH_S = 7 * 86400.0
"""A session without a webhook hands raises to the outbox only when a session with one
drained it this recently: a state dir no webhook ever reads does not pile up a week of
posts for the day one is configured (a clear of a raise handed out is always written)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_mono REAL NOT NULL DEFAULT 0,
    last_error TEXT
);
CREATE INDEX IF NOT EXISTS outbox_key ON outbox (key, id);
CREATE TABLE IF NOT EXISTS drainer (one INTEGER PRIMARY KEY CHECK (one = 1), seen_at REAL);
"""


class Entry(Struct, frozen=True):
    id: int
    key: str
    kind: str
    """"raise" or "clear"."""
    payload: str
    """The JSON body to POST, as it was judged."""
    attempts: int


class Depth(Struct, frozen=True):
    depth: int
    oldest_at: float | None
    """Wall time the oldest undelivered entry was judged (None: empty)."""
    oldest_attempts: int = 0
    last_error: str | None = None

    def to_json(self, now: float) -> dict[str, object]:
        return {"depth": self.depth, "oldest_at": self.oldest_at,
                "oldest_age_s": None if self.oldest_at is None else max(0.0, now - self.oldest_at),
                "oldest_attempts": self.oldest_attempts, "last_error": self.last_error}


class Outbox:
    """``STATE_DIR/outbox.sqlite``: the webhook's undelivered raises and clears."""

    def __init__(self, state_dir: Path, *, mono: Callable[[], float] = time.monotonic) -> None:
        self.path = state_dir / "outbox.sqlite"
        self.lock_path = state_dir / "outbox.drain.lock"
        self.mono = mono
        self._drained_at = -math.inf

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # a connection per use: cheap, and safe across threads and forks
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")  # a committed entry survives power loss
            db.executescript(_SCHEMA)
            yield db
        finally:
            db.close()

    # -- writers ---------------------------------------------------------------------
    def put(self, entries: list[tuple[str, str, str]], now: float) -> None:
        """(key, kind, payload) entries, in one transaction, in this order."""
        if not entries:
            return
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT INTO outbox (key, kind, payload, created_at) "
                           "VALUES (?, ?, ?, ?)", [(k, kind, p, now) for k, kind, p in entries])
            (n,) = db.execute("SELECT COUNT(*) FROM outbox").fetchone()
            if n > MAX_DEPTH:
                db.execute("DELETE FROM outbox WHERE id IN (SELECT id FROM outbox "
                           "ORDER BY id LIMIT ?)", (n - MAX_DEPTH,))
            db.execute("COMMIT")

    def done(self, entry_id: int) -> None:
        with self._db() as db:
            db.execute("DELETE FROM outbox WHERE id = ?", (entry_id,))

    def failed(self, entry: Entry, error: str) -> float:
        """Try it again after a backoff (returned, seconds)."""
        wait = min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** min(entry.attempts, 30))
        with self._db() as db:
            db.execute("UPDATE outbox SET attempts = attempts + 1, next_mono = ?, "
                       "last_error = ? WHERE id = ?",
                       (self.mono() + wait, error[:200], entry.id))
        return wait

    def drained(self, now: float) -> None:
        """A session with a webhook drains this outbox (wall time ``now``): written once
        an hour at most (a drain runs every poll; a write there would be an fsync each)."""
        if abs(now - self._drained_at) < DRAINER_FRESH_S / 168:
            return
        self._drained_at = now
        with self._db() as db:
            db.execute("INSERT INTO drainer (one, seen_at) VALUES (1, ?) ON CONFLICT (one) "
                       "DO UPDATE SET seen_at = excluded.seen_at", (now,))

    # -- readers ---------------------------------------------------------------------
    def has_drainer(self, now: float) -> bool:
        """Whether a session with a webhook drained it within ``DRAINER_FRESH_S``."""
        if not self.path.exists():
            return False
        with self._db() as db:
            row = db.execute("SELECT seen_at FROM drainer").fetchone()
        return row is not None and row[0] is not None and abs(now - row[0]) <= DRAINER_FRESH_S

    def due(self, limit: int = 100) -> list[Entry]:
        """The entries to try now, oldest first: of each alert only its oldest entry, and
        only once its backoff has passed."""
        if not self.path.exists():
            return []
        now = self.mono()
        with self._db() as db:
            rows = db.execute(
                "SELECT id, key, kind, payload, attempts, next_mono FROM outbox "
                "WHERE id IN (SELECT MIN(id) FROM outbox GROUP BY key) ORDER BY id LIMIT ?",
                (limit,)).fetchall()
        # CLOCK_MONOTONIC is one clock for every process of a boot; a wait further ahead
        # than the longest backoff was set before a reboot: due now
        return [Entry(i, k, kind, p, n) for i, k, kind, p, n, at in rows
                if at <= now or at - now > MAX_BACKOFF_S]

    def depth(self) -> Depth:
        if not self.path.exists():
            return Depth(0, None)
        with self._db() as db:
            (n,) = db.execute("SELECT COUNT(*) FROM outbox").fetchone()
            row = db.execute("SELECT created_at, attempts, last_error FROM outbox "
                             "ORDER BY id LIMIT 1").fetchone()
        return Depth(n, None) if row is None else Depth(n, row[0], row[1], row[2])

    def all(self) -> list[Entry]:
        if not self.path.exists():
            return []
        with self._db() as db:
            rows = db.execute("SELECT id, key, kind, payload, attempts FROM outbox "
                              "ORDER BY id").fetchall()
        return [Entry(*r) for r in rows]

    # -- the one drainer -------------------------------------------------------------
    def try_drain_lock(self) -> int | None:
        """The drainer's lock (an fd to :meth:`release`), or None: another drains."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    @staticmethod
    def release(fd: int) -> None:
        os.close(fd)


def message(source: str, kind: str, severity: str, title: str, detail: str,
            ended: str | None) -> str:
    """The Slack-compatible body of one raise or clear."""
    icon = {"crit": ":red_circle:", "warn": ":large_orange_circle:",
            "info": ":information_source:"}.get(severity, ":information_source:")
    if kind == "raise":
        line = f"{icon} {title}" + (f" — {detail}" if detail else "")
    elif ended is None:
        line = f":white_check_mark: cleared: {title}"
    else:
        line = f":black_square_for_stop: {ended}: {title}"
    return json.dumps({"text": f"[{source}]\n{line}"})


async def post(url: str, payload: str, timeout_s: float) -> str | None:
    """POST one body; None when the receiver answered 2xx, else why not. A redirect is
    not followed (a 3xx is not a delivery: the body would be re-sent where the URL's
    owner did not say)."""
    import httpx  # here, not at the top: the console's first frame does not wait for it

    try:
        # httpx's timeout is per read: a server dripping a byte a second never trips it.
        # One deadline covers the whole exchange.
        async with asyncio.timeout(timeout_s):
            async with httpx.AsyncClient(timeout=timeout_s, trust_env=False,
                                         follow_redirects=False) as c:
                r = await c.post(url, content=payload,
                                 headers={"Content-Type": "application/json"})
        return None if 200 <= r.status_code < 300 else f"webhook HTTP {r.status_code}"
    except TimeoutError:
        return f"webhook failed: no answer within {timeout_s:g} s"
    except httpx.HTTPError as exc:
        return f"webhook failed: {type(exc).__name__}"


RunBlocking = Callable[..., Awaitable[Any]]


async def drain(outbox: Outbox, url: str, timeout_s: float, run_blocking: RunBlocking,
                on_error: Callable[[str], None] | None = None,
                now: float | None = None) -> int:
    """Post every due entry (one drainer at a time across processes); the count delivered.
    A failed entry waits its backoff and holds back the later entries of its alert.
    ``now``: the caller's wall time, to say a drainer is there (``has_drainer``)."""
    await run_blocking(outbox.drained, time.time() if now is None else now)
    fd = await run_blocking(outbox.try_drain_lock)
    if fd is None:
        return 0  # another session drains now
    delivered = 0
    try:
        blocked: set[str] = set()
        while True:
            entries = [e for e in await run_blocking(outbox.due) if e.key not in blocked]
            if not entries:
                return delivered
            for e in entries:
                err = await post(url, e.payload, timeout_s)
                if err is None:
                    await run_blocking(outbox.done, e.id)
                    delivered += 1
                else:
                    blocked.add(e.key)  # its alert's later entries wait for it
                    wait = await run_blocking(outbox.failed, e, err)
                    if on_error is not None:
                        on_error(f"{err}: tried again in {wait:g} s")
    finally:
        await run_blocking(outbox.release, fd)
