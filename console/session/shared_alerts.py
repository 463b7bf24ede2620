"""One alert book per state directory, shared by every session that shows its pod.

Each console, wall and browser session of the web wall (a ``wall`` process of its own)
judges its own polls; what they must agree on is kept here, in ``STATE_DIR/alerts.json``:
which alerts are firing, which of them the webhook has already been told about, and who
acknowledged them. So a new session, or a browser that reconnects, does not post an alert
again that another session has posted and that still fires (issue 31: "pod EXITED" was
posted once per session start), a clear is posted once, and an acknowledgement made in
one session is shown in every other.

Every change is one transaction: the file is locked (``alerts.json.lock``, ``flock``,
waited for at most ``LOCK_WAIT_S``), read, changed and replaced whole (temporary file,
fsync, rename). A file that cannot be read as a book (cut short, not JSON, a wrong shape)
is set aside with a logged warning and the book starts empty; the caller is never
crashed by it. An entry that no session has seen firing for ``STALE_S`` is dropped (every
session showing it refreshes it every ``TOUCH_S``): an alert that fires again after a
night with no console open is posted again.

With the webhook's outbox (``outbox.py``, issue 43) "posted" means "handed to the
outbox": a raise or clear is written there in the same transaction, and delivered (or
retried) by whichever session has a webhook.

Blocking (a lock, a read, an fsync): sessions call :meth:`SharedAlerts.sync` off the loop.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec import Struct, field

from console.config.config_file import replace_whole
from console.model.alerts import Alert
from console.model.printable import printable

if TYPE_CHECKING:
    from console.session.outbox import Outbox

log = logging.getLogger(__name__)

VERSION = 1
STALE_S = 3600.0
"""An entry no session has seen firing for this long is gone (its clear went unseen)."""
TOUCH_S = 60.0
"""How often a session showing a firing alert says so (a write, only then)."""
LOCK_WAIT_S = 2.0
"""How long a sync waits for another session's (a few milliseconds' hold)."""
MAX_ENTRIES = 1000
"""Alerts are a few per pod: a bound against a file written by something else."""


class SharedAlertsError(Exception):
    """The book could not be used (lock not had in time, a read or write failed)."""


class Synced(Struct, frozen=True):
    """What one sync decided for the session that asked."""

    post_raised: tuple[Alert, ...] = ()
    """Of the alerts it raised: those no session has posted yet (its to post)."""
    post_cleared: tuple[Alert, ...] = ()
    """Of the alerts it cleared: those still in the book (no other session cleared them)."""
    acks: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Every firing alert's acknowledgement: key → (who, when)."""
    warning: str | None = None
    """The file was unreadable and the book started empty: why (said once by the caller)."""


def _entry(raw: Any) -> dict[str, Any] | None:
    """A stored entry as this version writes it, or None (dropped)."""
    if not isinstance(raw, dict):
        return None
    seen, posted = raw.get("seen_at"), raw.get("posted")
    if not isinstance(seen, int | float) or isinstance(seen, bool) or not math.isfinite(seen):
        return None
    out: dict[str, Any] = {"seen_at": float(seen), "posted": posted is True,
                           "title": printable(raw.get("title", ""), 500)}
    by, at = raw.get("acked_by"), raw.get("acked_at")
    if isinstance(by, str) and isinstance(at, int | float) and math.isfinite(at):
        out["acked_by"], out["acked_at"] = printable(by, 200), float(at)
    return out


class SharedAlerts:
    """``STATE_DIR/alerts.json``: the alert book every session on that state dir shares."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "alerts.json"
        self.lock_path = state_dir / "alerts.json.lock"

    # -- the file -------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Any:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise SharedAlertsError(f"{self.lock_path}: {exc.strerror or exc}") from None
        try:
            deadline = time.monotonic() + LOCK_WAIT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise SharedAlertsError(
                            f"{self.lock_path}: held by another session for more than "
                            f"{LOCK_WAIT_S:g} s") from None
                    time.sleep(0.01)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _read(self) -> tuple[dict[str, dict[str, Any]], str | None]:
        """The entries, and a warning when the file was not a book (then: none)."""
        try:
            text = self.path.read_bytes()
        except FileNotFoundError:
            return {}, None
        except OSError as exc:
            raise SharedAlertsError(f"{self.path}: {exc.strerror or exc}") from None
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or not isinstance(data.get("alerts"), dict):
                raise ValueError("not an alert book")
            entries = {str(k)[:200]: e for k, raw in list(data["alerts"].items())[:MAX_ENTRIES]
                       if (e := _entry(raw)) is not None}
        except (ValueError, RecursionError) as exc:
            why = (f"{self.path} unreadable ({type(exc).__name__}: {str(exc)[:120]}): "
                   "starting a clean alert book")
            log.warning(why)
            with contextlib.suppress(OSError):
                os.replace(self.path, self.path.with_name(self.path.name + ".bad"))
            return {}, why
        return entries, None

    def _write(self, entries: dict[str, dict[str, Any]]) -> None:
        data = json.dumps({"version": VERSION, "alerts": entries}, sort_keys=True).encode()
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")  # one per writer
        try:
            replace_whole(self.path, data, tmp)
        except OSError as exc:
            raise SharedAlertsError(f"{self.path}: {exc.strerror or exc}") from None

    # -- the one transaction -----------------------------------------------------------------
    def sync(self, now: float, *, raised: Iterable[Alert] = (), cleared: Iterable[Alert] = (),
             firing: Iterable[Alert] = (), acked: Iterable[Alert] = (),
             webhook: bool = False, unposted: Iterable[str] = (),
             outbox: Outbox | None = None, source: str = "") -> Synced:
        """One session's changes into the book, and what it should do about them.

        ``raised``/``cleared``: what its last evaluation fired and cleared. ``firing``:
        every alert firing there now (kept from going stale). ``acked``: alerts it
        acknowledged. ``webhook``: whether it posts (then raised alerts nobody posted yet
        are claimed for it to post). ``unposted``: keys whose post it claimed but failed
        (another session, or its next raise, may post them). ``outbox``: the webhook's
        durable outbox (``outbox.py``): raises no session handed out yet and clears of
        handed-out alerts are written there in this transaction, by any session, with a
        webhook or not (then ``posted`` means "in the outbox", never "delivered").
        Raises :class:`SharedAlertsError` when the book cannot be used."""
        with self._locked():
            entries, warning = self._read()
            before = json.dumps(entries, sort_keys=True)
            for key in [k for k, e in entries.items() if now - e["seen_at"] > STALE_S]:
                del entries[key]
            for key in unposted:
                if key in entries:
                    entries[key]["posted"] = False
            post_raised: list[Alert] = []
            # with an outbox, a session without a webhook claims (writes there) too, as
            # long as some session with one drains it
            claim = webhook or (outbox is not None and bool(raised)
                                and self._drained(outbox, now))
            for a in raised:
                e = entries.get(a.key)
                if e is None:
                    e = entries[a.key] = {"seen_at": now, "posted": False, "title": a.title}
                e["seen_at"], e["title"] = now, a.title
                if claim and not e["posted"]:
                    e["posted"] = True
                    post_raised.append(a)
            for a in firing:
                e = entries.get(a.key)
                if e is None:  # another session saw it clear, or the book was reset
                    entries[a.key] = {"seen_at": now, "posted": True, "title": a.title}
                elif now - e["seen_at"] >= TOUCH_S:
                    e["seen_at"] = now
            for a in acked:
                e = entries.get(a.key)
                # a newer acknowledgement replaces one of an earlier run (withdrawn
                # there: ``AlertBook.new_run``), never the other way round
                if e is not None and a.acked_by is not None and (
                        "acked_by" not in e
                        or float(e.get("acked_at") or 0.0) < (a.acked_at or now)):
                    e["acked_by"] = a.acked_by
                    e["acked_at"] = a.acked_at if a.acked_at is not None else now
            # a clear is posted by the one session that finds its alert still in the book,
            # and only when the alert itself was posted
            post_cleared = [a for a in cleared
                            if (e := entries.pop(a.key, None)) is not None and e["posted"]]
            if outbox is not None:
                # before the book is written: killed in between, the book still says
                # "not handed out" and the next session hands it out again (a duplicate,
                # never a loss)
                self._enqueue(outbox, source, now, post_raised, post_cleared)
            if json.dumps(entries, sort_keys=True) != before or warning is not None:
                self._write(entries)
            acks = {k: (e["acked_by"], e["acked_at"]) for k, e in entries.items()
                    if "acked_by" in e}
        return Synced(tuple(post_raised), tuple(post_cleared), acks, warning)

    @staticmethod
    def _drained(outbox: Outbox, now: float) -> bool:
        try:
            return outbox.has_drainer(now)
        except (OSError, sqlite3.Error) as exc:
            raise SharedAlertsError(f"{outbox.path}: {exc}") from None

    @staticmethod
    def _enqueue(outbox: Outbox, source: str, now: float, raised: list[Alert],
                 cleared: list[Alert]) -> None:
        from console.session.outbox import message

        rows = [(a.key, "raise", message(source, "raise", a.severity, a.title,
                                         a.description(), None)) for a in raised]
        rows += [(a.key, "clear", message(source, "clear", a.severity, a.title, a.detail,
                                          a.ended)) for a in cleared]
        try:
            outbox.put(rows, now)
        except (OSError, sqlite3.Error) as exc:
            raise SharedAlertsError(f"{outbox.path}: {exc}") from None
