"""One alert book per state dir (issue 31, finding 13): every new wall session (a browser
tab, a reconnect) re-posted every firing alert to the webhook, and an acknowledgement did
not carry over. Here several sessions on one state dir post to a real HTTP receiver on
loopback, and the book is hammered by real processes."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pydantic import SecretStr

from console.model.alerts import Alert
from console.session.session import POD_POLL_S
from console.session.shared_alerts import SharedAlerts
from tests.session.world import World, world

T0 = 1_800_000_000.0


class Receiver:
    """A webhook on loopback: every POST's JSON body, in order."""

    def __init__(self) -> None:
        self.posts: list[str] = []
        self.arrived = threading.Condition()
        posts, arrived = self.posts, self.arrived

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.send_response(200)
                self.end_headers()
                with arrived:
                    posts.append(json.loads(body)["text"])
                    arrived.notify_all()

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def about(self, word: str) -> list[str]:
        with self.arrived:
            return [p for p in self.posts if word in p]


@pytest.fixture
def hook() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def session_on(tmp: Path, hook: Receiver) -> World:
    """A new session (a browser tab, a reconnect, a console) on the shared state dir."""
    return world(tmp, T0, webhook_url=SecretStr(hook.url), run_blocking=asyncio.to_thread)


async def poll(*worlds: World, advance: float = POD_POLL_S) -> None:
    for w in worlds:
        w.clock.advance(advance)
        assert await w.session.poll()
        await w.session.settle()  # the book's sync and the webhook's post


async def test_sessions_on_one_state_dir_post_a_firing_alert_once(tmp_path: Path,
                                                                  hook: Receiver) -> None:
    first = session_on(tmp_path, hook)
    first.pod.run(T0 - 600, status="EXITED")
    await poll(first)
    assert len(hook.about("pod stopped")) == 1
    # ten more sessions start (tabs opened, reconnects), each sees the pod EXITED
    others = []
    for _ in range(10):
        w = session_on(tmp_path, hook)
        w.pod.run(T0 - 600, status="EXITED")
        await poll(w)
        assert any(a.key == "stopped" for a in w.session.state().alerts)  # shown there
        others.append(w)
    await poll(first, *others)  # and they go on polling
    assert len(hook.about("pod stopped")) == 1, hook.posts
    # the pod is resumed: the clear is posted once, whoever sees it first
    for w in (first, *others):
        w.pod.run(T0 + 60)
    await poll(first, *others)
    assert len(hook.about("cleared: pod stopped")) == 1, hook.posts
    # it stops again: a new alert, posted again (once)
    for w in (first, *others):
        w.pod.run(T0 - 600, status="EXITED")
    await poll(*others, first)
    assert len([p for p in hook.about("pod stopped") if "cleared" not in p]) == 2, hook.posts


async def test_an_acknowledgement_in_one_session_is_seen_in_another(tmp_path: Path,
                                                                    hook: Receiver) -> None:
    console, wall = session_on(tmp_path, hook), session_on(tmp_path, hook)
    for w in (console, wall):
        w.pod.run(T0 - 600, status="EXITED")
    await poll(console, wall)
    (acked,) = console.session.acknowledge("alice")
    assert acked.startswith("pod stopped"), acked  # a stop made elsewhere: one info event
    await console.session.settle()
    await poll(wall)
    (alert,) = [a for a in wall.session.state().alerts if a.key == "stopped"]
    assert alert.acked_by == "alice"
    assert any(e.kind == "acknowledged" and e.detail == "by alice"
               for e in wall.session.state().alert_history)
    # a session that starts now shows it acknowledged too
    late = session_on(tmp_path, hook)
    late.pod.run(T0 - 600, status="EXITED")
    await poll(late)
    assert [a.acked_by for a in late.session.state().alerts if a.key == "stopped"] == ["alice"]
    # a new firing after a clear is not covered by the old acknowledgement
    for w in (console, wall, late):
        w.pod.run(T0 + 60)
    await poll(console, wall, late)
    for w in (console, wall, late):
        w.pod.run(T0 - 600, status="EXITED")
    await poll(console, wall, late)
    assert [a.acked_by for a in wall.session.state().alerts if a.key == "stopped"] == [None]
    assert len(hook.about("pod stopped")) == 3  # fired, cleared, fired: once each


@pytest.mark.parametrize("content", [b"{not json", b"null", b"[1, 2]", b'{"alerts": 7}',
                                     b'{"alerts": {"stopped": {"seen_at": "x"}}}',
                                     b"[" * 100_000])
async def test_a_bad_book_starts_clean_with_a_warning(tmp_path: Path, hook: Receiver,
                                                      content: bytes) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "alerts.json").write_bytes(content)
    w = session_on(tmp_path, hook)
    w.pod.run(T0 - 600, status="EXITED")
    await poll(w)  # never a crash
    assert len(hook.about("pod stopped")) == 1
    data = json.loads((state / "alerts.json").read_text())
    assert data["alerts"]["stopped"]["posted"] is True
    if b"seen_at" not in content:  # (an entry of the wrong shape is dropped, not the book)
        assert any("starting a clean alert book" in text for text, _ in w.notes), w.notes
        assert (state / "alerts.json.bad").read_bytes() == content


async def test_a_book_that_cannot_be_written_costs_duplicates_never_the_post(
        tmp_path: Path, hook: Receiver) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "alerts.json.lock").mkdir()  # the lock cannot be opened
    w = session_on(tmp_path, hook)
    w.pod.run(T0 - 600, status="EXITED")
    await poll(w)
    await poll(w)
    assert len(hook.about("pod stopped")) == 1
    assert sum("shared alert book not usable" in text for text, _ in w.notes) == 1


def _claim(state_dir: str, start: object, out: object) -> None:
    a = Alert("stopped", "info", "pod EXITED", "", T0)
    start.wait()  # type: ignore[attr-defined]
    r = SharedAlerts(Path(state_dir)).sync(T0, raised=[a], webhook=True)
    out.put(len(r.post_raised))  # type: ignore[attr-defined]


def test_processes_racing_for_one_alert_post_it_once(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_claim, args=(str(tmp_path), start, out)) for _ in range(6)]
    for p in procs:
        p.start()
    start.set()
    claims = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(60)
    assert sorted(claims) == [0, 0, 0, 0, 0, 1]


def test_an_entry_no_session_has_seen_for_an_hour_is_posted_again(tmp_path: Path) -> None:
    from console.session.shared_alerts import STALE_S, TOUCH_S

    book = SharedAlerts(tmp_path)
    a = Alert("stopped", "info", "pod EXITED", "", T0)
    assert len(book.sync(T0, raised=[a], webhook=True).post_raised) == 1
    # a session showing it keeps it fresh (a write at most every TOUCH_S)
    mtime = (tmp_path / "alerts.json").stat().st_mtime_ns
    book.sync(T0 + 1, firing=[a])
    assert (tmp_path / "alerts.json").stat().st_mtime_ns == mtime  # nothing to write
    book.sync(T0 + TOUCH_S, firing=[a])
    assert not book.sync(T0 + TOUCH_S + STALE_S - 1, raised=[a], webhook=True).post_raised
    # then every console closes; it fires again the next morning: posted again
    later = T0 + 2 * TOUCH_S + 3 * STALE_S
    assert len(book.sync(later, raised=[a], webhook=True).post_raised) == 1
