"""The heartbeat every part of the project sends Alertmanager, and the pod agent's own
sender (issue 43, item 5).

Alertmanager's dead-man's-switch convention (kube-prometheus's ``Watchdog``): an alert
that always fires, sent again at an interval with ``endsAt`` a few intervals ahead.
While its sender lives Alertmanager keeps it firing and its route's receiver hears it at
every repeat; once the sender is gone the last ``endsAt`` passes, Alertmanager resolves
it, and a dead-man's-switch service that stops hearing it pages. The ``sender`` label
says whose it is: ``pod-console`` (any console session), ``pod-agent`` (with the
``pod`` and ``profile`` it supervises: "this pod's agent died", not "no console"),
``prometheus`` (the rendered rules). The shape is here, in the agent, because the agent
imports nothing of the console and the console may import the agent
(``console/session/alertmanager.py`` builds its own heartbeat with :func:`alert`).

The agent's sender (:class:`Heartbeat`) runs as its own task beside the watchdog's: a
send is a POST in a thread of its own (one worker: never a thread the watchdog tick's
traffic read waits for) with a socket timeout, awaited under one deadline. A send
still hung at the next beat is not doubled: that beat counts as failed. Failures are
counted and served (``status --json``: ``heartbeat``), and written to the agent's log
when they start, when their reason changes and when the sends go through again, not at
every beat. The URL (``POD_AGENT_ALERTMANAGER_URL``, in the pod's environment or the
agent's ``.env``, as ``POD_AGENT_WEBHOOK_URL``) may carry credentials
(``https://user:pass@host``): they become an ``Authorization`` header and are never
logged or served; only the scheme, host and port are (:attr:`Target.origin`).
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import datetime as dt
import json
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

WATCHDOG = "Watchdog"
LEAD_INTERVALS = 4
"""``endsAt`` is this many intervals ahead (as Prometheus sends its alerts): a late send
or two resolves nothing; a sender gone lets it resolve within this many intervals."""
URL_ENV = "POD_AGENT_ALERTMANAGER_URL"
DEFAULT_INTERVAL_S = 30.0
MAX_TIMEOUT_S = 10.0
"""A send's deadline: the interval, at least 2 s, at most this."""
AGENT_SUMMARY = ("pod-agent is supervising this pod: this alert always fires; its "
                 "absence means the pod's agent (or the pod) is gone")


def iso(t: float) -> str:
    """A Unix time as Alertmanager's API writes it (UTC, milliseconds, ``Z``)."""
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def alert(labels: Mapping[str, str], summary: str, now: float, started: float,
          ends_at: float) -> dict[str, Any]:
    """One heartbeat as ``POST /api/v2/alerts`` takes it: ``alertname: Watchdog``,
    ``severity: none`` (the rendered ``alertmanager.yml`` routes it to a receiver of its
    own) and the sender's ``labels`` (its identity: the same at every send)."""
    return {"labels": {"alertname": WATCHDOG, "severity": "none", **labels},
            "annotations": {"summary": summary},
            "startsAt": iso(min(started, now)), "endsAt": iso(ends_at), "generatorURL": ""}


def agent_labels(pod: str, profile: str) -> dict[str, str]:
    return {"sender": "pod-agent", "pod": _label(pod), "profile": _label(profile)}


def _label(value: str) -> str:
    """A label value from the pod's environment: printable, bounded, never empty
    (Alertmanager drops an empty label, and the pod label is the heartbeat's identity)."""
    return "".join(c for c in value if c.isprintable())[:200] or "unknown"


class HeartbeatError(Exception):
    """Why a send failed, in words that never hold the URL."""


@dataclass(frozen=True)
class Target:
    endpoint: str
    """``…/api/v2/alerts``, without the credentials."""
    origin: str
    """Scheme, host and port: what is logged and served."""
    authorization: str | None = None


def target(url: str) -> Target:
    """The v2 alerts endpoint of an Alertmanager URL; ValueError (without the URL in
    its words) for one that is not http(s)."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise ValueError(f"{URL_ENV} is not a URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{URL_ENV} is not an http(s) URL")
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = host if port is None else f"{host}:{port}"
    auth = None
    if parts.username is not None:
        pair = (f"{urllib.parse.unquote(parts.username)}:"
                f"{urllib.parse.unquote(parts.password or '')}")
        auth = "Basic " + base64.b64encode(pair.encode()).decode()
    path = parts.path.rstrip("/") + "/api/v2/alerts"
    return Target(urllib.parse.urlunsplit((parts.scheme, netloc, path, "", "")),
                  f"{parts.scheme}://{netloc}", auth)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, not a place to send the credentials to."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
"""No proxy from the environment (the pod's, for the console's Alertmanager on loopback
or a private network), no redirects followed."""


def post(t: Target, alerts: list[dict[str, Any]], timeout_s: float) -> None:
    """POST ``alerts``; HeartbeatError unless Alertmanager answers 2xx (blocking: run it
    in a thread)."""
    headers = {"Content-Type": "application/json"}
    if t.authorization:
        headers["Authorization"] = t.authorization
    req = urllib.request.Request(t.endpoint, method="POST", headers=headers,
                                 data=json.dumps(alerts).encode())
    try:
        with _OPENER.open(req, timeout=timeout_s) as resp:
            resp.read(65536)
            status = resp.status
    except urllib.error.HTTPError as exc:
        raise HeartbeatError(f"HTTP {exc.code}") from None
    except socket.timeout:  # (the builtin TimeoutError on 3.10+; the test reads the name)
        raise HeartbeatError(f"no answer within {timeout_s:g} s") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, socket.timeout):
            raise HeartbeatError(f"no answer within {timeout_s:g} s") from None
        raise HeartbeatError(_os_error(reason)) from None
    except (OSError, ValueError) as exc:
        raise HeartbeatError(_os_error(exc)) from None
    if not 200 <= status < 300:
        raise HeartbeatError(f"HTTP {status}")


def _os_error(exc: object) -> str:
    """``connection refused`` and the like, not the exception's text (which may quote the
    host it failed on, never the credentials: they are not in the request's URL)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:120]
    return type(exc).__name__


def configured_url(env_file: str) -> str | None:
    """``POD_AGENT_ALERTMANAGER_URL`` from the environment, else the agent's ``.env``
    (read at every beat: a URL written there later is used without a restart)."""
    from .envfile import read_env

    return os.environ.get(URL_ENV) or read_env(env_file).get(URL_ENV) or None


@dataclass
class HeartbeatState:
    """What ``status --json`` says of the heartbeat (``heartbeat``)."""

    interval_s: float
    to: str | None = None
    """Where it goes (scheme, host, port), None while no URL is configured."""
    sent_at: float | None = None
    """Unix time of the last send Alertmanager accepted."""
    last_error: str | None = None
    last_error_at: float | None = None
    failing_since: float | None = None
    """The first failed send of the current run of failures (None while they go)."""
    failures: int = 0
    """Failed sends since the agent started."""
    sends: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"configured": self.to is not None, "to": self.to,
                "interval_s": self.interval_s, "sent_at": self.sent_at,
                "last_error": self.last_error, "last_error_at": self.last_error_at,
                "failing_since": self.failing_since, "failures": self.failures,
                "sends": self.sends}


class Heartbeat:
    """The pod agent's ``Watchdog``: :meth:`run` beats every ``interval_s`` until
    ``stop`` is set. ``url`` says the configured URL (None: no heartbeat), ``say``
    writes one line to the agent's log and audit log."""

    def __init__(self, labels: Mapping[str, str], interval_s: float,
                 url: Callable[[], str | None], say: Callable[[dict[str, Any]], None],
                 summary: str = AGENT_SUMMARY) -> None:
        self.labels = dict(labels)
        self.interval_s = interval_s
        self.timeout_s = min(MAX_TIMEOUT_S, max(2.0, interval_s))
        self.summary = summary
        self._url = url
        self._say = say
        self.state = HeartbeatState(interval_s)
        self.started = time.time()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="heartbeat")
        self._inflight: concurrent.futures.Future[str | None] | None = None
        self._said: str | None = None

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not stop.is_set():
                began = loop.time()  # the cadence: monotonic
                with contextlib.suppress(Exception):  # a bug here never ends the agent
                    await self.beat()
                wait = max(0.05, self.interval_s - (loop.time() - began))
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), wait)
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)

    async def beat(self) -> None:
        """One send (or none, with no URL). The timestamps are the real wall clock, not
        the agent's pod clock (a demo's runs fast): Alertmanager compares them with its
        own."""
        if self._inflight is not None and not self._inflight.done():
            self._failed(f"the last send has not returned after {self.timeout_s:g} s",
                         time.time())
            return
        now = time.time()
        body = [alert(self.labels, self.summary, now, self.started,
                      now + LEAD_INTERVALS * self.interval_s)]
        fut = self._inflight = self._pool.submit(self._send, body)
        try:
            # the socket timeout bounds each read; this bounds the whole exchange
            origin = await asyncio.wait_for(asyncio.wrap_future(fut), self.timeout_s + 1.0)
        except asyncio.TimeoutError:
            self._failed(f"no answer within {self.timeout_s:g} s", now)
            return
        except HeartbeatError as exc:
            self._failed(str(exc), now)
            return
        except Exception as exc:  # a bug is a failed send too: counted, said
            self._failed(f"{type(exc).__name__}: {exc}"[:200], now)
            return
        if origin is None:  # not configured: nothing sent, nothing failed
            self.state.to = None
            return
        st = self.state
        st.sent_at, st.sends = now, st.sends + 1
        if st.failing_since is not None or self._said is None:
            self._said = ""
            self._say({"op": "heartbeat", "ok": True, "to": origin,
                       "interval_s": self.interval_s,
                       **({"failed_sends": st.failures} if st.failing_since else {})})
        st.failing_since = None

    def _send(self, body: list[dict[str, Any]]) -> str | None:
        """In the worker thread: the URL (``.env`` is a file), then the POST. The
        target's origin, or None when no URL is configured."""
        url = self._url()
        if not url:
            return None
        try:
            t = target(url)
        except ValueError as exc:
            raise HeartbeatError(str(exc)) from None
        self.state.to = t.origin
        post(t, body, self.timeout_s)
        return t.origin

    def _failed(self, why: str, now: float) -> None:
        st = self.state
        st.failures += 1
        st.last_error, st.last_error_at = why, now
        if st.failing_since is None:
            st.failing_since = now
        if why != self._said:  # when it starts and when the reason changes
            self._said = why
            self._say({"op": "heartbeat", "ok": False, "to": st.to, "error": why,
                       "failures": st.failures})
