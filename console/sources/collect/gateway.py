"""The gateway's collector: LiteLLM's ``/health/liveliness``, ``/health/readiness`` and
``/metrics`` (with a bearer key from the environment or a key file, never argv), read
into a ``GatewaySnapshot`` of the gateway catalog's figures (``catalog.GATEWAY``).

Never ``/health``: it needs a key and calls every backend. Every request has the
console's request timeout (shorter than the refresh) and a body cap; a large
exposition is parsed off the event loop, and only the catalog's families are kept.

Figures are computed like the slots' direct path: over the window between this scrape
and the oldest kept one inside ``window_s`` (counter increases per series, reset-aware,
summed per deployment, model group and gateway; quantiles over the summed bucket
increases: ``numbers.py``). With one scrape they are lifetime values.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import os
import re
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec import Struct
from msgspec.structs import replace

from console.model.catalog import (
    GATEWAY,
    GATEWAY_USAGE,
    GW_COOLDOWNS,
    GW_OVERHEAD,
    GW_REQUESTS,
    GW_STATE,
    Gauge,
    Increase,
    Quantile,
    Ratio,
    Source,
    gateway_families,
)
from console.model.gateway import DeploymentRow, GatewaySnapshot, UserRow, deployment_status
from console.model.numbers import bucket_quantile, counter_delta, cumulative_buckets, safe_ratio
from console.model.printable import printable
from console.model.redact import redact_url
from console.sources.collect.exposition import Exposition, LabelMemo, Labels, finite, parse
from console.sources.collect.http import HttpClient, HttpError, Response
from console.sources.collect.promql import PromClient, PromError

if TYPE_CHECKING:
    from console.config.settings import GatewaySettings

MAX_EXPOSITION_BYTES = 8 * 1024 * 1024
"""LiteLLM's exposition grows with users × models × labels (2 MB is seen); past this the
target is misconfigured and the scrape is refused while reading."""
INLINE_PARSE_CHARS = 128 * 1024
FAMILIES = gateway_families()
USER_FAMILIES = tuple(f.source.names[0] for f in GATEWAY_USAGE
                      if isinstance(f.source, Increase))
NONE = ("", "None", "none", "null")
KEEP_SCRAPES = 64
KEEP_SPACING = 8
"""Scrapes kept per window, about (``GatewayCollector.read``)."""

ScopeKey = Callable[[Labels], str | None]


async def _no_result() -> list[dict[str, Any]]:
    """A query not asked: nothing, as Prometheus answers for no series."""
    return []


def _label(labels: Labels, key: str) -> str | None:
    for k, v in labels:
        if k == key:
            return None if v in NONE else v
    return None


def group_map(exp: Exposition) -> dict[str, str]:
    """model_id → model group, from the families that carry both (the overhead
    histogram's ``model_group`` first: an alias request's ``requested_model`` is the
    alias)."""
    out: dict[str, str] = {}
    for name, lab in ((GW_OVERHEAD + "_bucket", "model_group"), (GW_REQUESTS, "requested_model"),
                      ("litellm_deployment_failure_responses_total", "requested_model")):
        for labels in exp.series(name):
            mid, grp = _label(labels, "model_id"), _label(labels, lab)
            if mid and grp:
                out.setdefault(mid, grp)
    return out


def deployment_key(labels: Labels) -> str | None:
    return _label(labels, "model_id")


def group_key(groups: dict[str, str]) -> ScopeKey:
    def key(labels: Labels) -> str | None:
        mid = _label(labels, "model_id")
        if mid and mid in groups:
            return groups[mid]
        return _label(labels, "model_group") or _label(labels, "requested_model")
    return key


def total_key(labels: Labels) -> str | None:
    return ""


def user_name(labels: Labels) -> str | None:
    """How a user or key is named: its alias, the request's end user, the key's user id,
    else a short prefix of the key's *hash* (never key material)."""
    for k in ("api_key_alias", "end_user", "user"):
        v = _label(labels, k)
        if v and v != "default_user_id":
            return v
    h = _label(labels, "hashed_api_key")
    if h == "litellm_proxy_master_key":
        return "master key"
    if h:
        return "key " + h[:8]
    return _label(labels, "user")


def _matches(labels: Labels, match: tuple[str, str] | None,
             cache: dict[tuple[str, str], re.Pattern[str]]) -> bool:
    if match is None:
        return True
    pat = cache.get(match)
    if pat is None:
        pat = cache[match] = re.compile(match[1])
    return pat.fullmatch(dict(labels).get(match[0], "")) is not None


_RX: dict[tuple[str, str], re.Pattern[str]] = {}


def increases(later: Exposition, earlier: Exposition | None, name: str, key: ScopeKey,
              match: tuple[str, str] | None = None) -> dict[str, float]:
    """Per scope key, the counter's increase between the scrapes (each series on its own,
    a drop read as a restart from zero, as Prometheus does), or its value with one scrape."""
    out: dict[str, float] = {}
    for k, _, d in _series_increases(later, earlier, name, key, match):
        out[k] = out.get(k, 0.0) + d
    return out


def bucket_increases(later: Exposition, earlier: Exposition | None, name: str,
                     key: ScopeKey) -> dict[str, dict[str, float]]:
    """:func:`increases` of a histogram's buckets: per scope key, per bucket bound."""
    out: dict[str, dict[str, float]] = {}
    for k, labels, d in _series_increases(later, earlier, name, key, None):
        le = dict(labels).get("le", "")
        per = out.setdefault(k, {})
        per[le] = per.get(le, 0.0) + d
    return out


def _series_increases(later: Exposition, earlier: Exposition | None, name: str,
                      key: ScopeKey, match: tuple[str, str] | None
                      ) -> Iterator[tuple[str, Labels, float]]:
    """(scope key, labels, increase) of each series of ``name`` (see :func:`increases`)."""
    before = earlier.series(name) if earlier is not None else {}
    for labels, v in later.series(name).items():
        if not _matches(labels, match, _RX):
            continue
        k = key(labels)
        if k is None:
            continue
        if earlier is not None:
            a = before.get(labels)
            # a series new since the earlier scrape started from zero in between
            d = counter_delta(a, v) if a is not None else v
        else:
            d = v
        if not math.isnan(d):
            yield k, labels, d


def _first(exp: Exposition, names: tuple[str, ...], suffix: str = "") -> str | None:
    for n in names:
        if n + suffix in exp:
            return n
    return None


def _quantile(q: float, per_le: dict[str, float]) -> float | None:
    buckets = []
    for le, c in per_le.items():
        try:
            buckets.append((float(le), c))
        except ValueError:
            continue
    return finite(bucket_quantile(q, cumulative_buckets(buckets)))


def evaluate(source: Source, later: Exposition, earlier: Exposition | None,
             window_s: float | None, key: ScopeKey) -> dict[str, float | None]:
    """One gateway catalog source, per scope key."""
    if isinstance(source, Gauge):
        name = _first(later, source.names)
        out: dict[str, float | None] = {}
        if name is None:
            return out
        for labels, v in later.series(name).items():
            k = key(labels)
            if k is None or finite(v) is None:
                continue
            cur = out.get(k)
            out[k] = v if cur is None else max(cur, v)
        return out
    if isinstance(source, Increase):
        name = _first(later, source.names)
        if name is None:
            return {}
        inc = increases(later, earlier, name, key, source.match)
        if not source.per_second:
            return {k: finite(v) for k, v in inc.items()}
        return {k: (finite(safe_ratio(v, window_s)) if window_s else None)
                for k, v in inc.items()}
    if isinstance(source, Quantile):
        name = _first(later, source.names, "_bucket")
        if name is None:
            return {}
        per = bucket_increases(later, earlier, name + "_bucket", key)
        return {k: _quantile(source.q, les) for k, les in per.items()}
    if isinstance(source, Ratio):
        num_n, den_n = _first(later, source.num), _first(later, source.den)
        if den_n is None:
            return {}
        den = increases(later, earlier, den_n, key)
        num = increases(later, earlier, num_n, key, source.match) if num_n else {}
        res: dict[str, float | None] = {}
        for k, d in den.items():
            r = safe_ratio(num.get(k, 0.0), d)
            res[k] = None if r is None else finite(source.plus + r)
        return res
    raise TypeError(f"not a gateway figure source: {source!r}")


def figures_by(later: Exposition, earlier: Exposition | None, window_s: float | None,
               key: ScopeKey) -> dict[str, dict[str, float | None]]:
    """Every gateway figure per scope key: ``{scope: {figure: value}}``."""
    out: dict[str, dict[str, float | None]] = {}
    for fig in GATEWAY:
        for k, v in evaluate(fig.source, later, earlier, window_s, key).items():
            out.setdefault(k, {})[fig.key] = v
    return out


class _UserSeries(Struct):
    day: dt.date
    baseline: float
    since: float
    last_value: float
    last_seen: float | None


DROP_LABELS = frozenset({"__name__", "job", "instance"})
"""What Prometheus adds to a series: not the proxy's."""


def exposition_of(result: list[dict[str, object]]) -> Exposition:
    """A Prometheus instant-vector answer as the exposition it was scraped from."""
    samples: dict[str, dict[Labels, float]] = {}
    for item in result:
        metric = item.get("metric")
        value = item.get("value")
        if not isinstance(metric, dict) or not isinstance(value, list) or len(value) != 2:
            continue
        name = metric.get("__name__")
        try:
            v = float(value[1])
        except (TypeError, ValueError):
            continue
        if not isinstance(name, str):
            continue
        # Prometheus's JSON holds the proxy's label values as the proxy wrote them:
        # outside text, cleaned here as the exposition parser cleans its own
        labels = tuple(sorted((printable(k), printable(x)) for k, x in metric.items()
                              if k not in DROP_LABELS))
        samples.setdefault(name, {})[labels] = v
    return Exposition(_samples=samples)


def _status_only(r: Response | BaseException) -> Response | BaseException:
    """A health answer whose body was over the cap, as its status alone: LiteLLM's
    readiness lists every callback and model (a big proxy's is over 64 KB), and its
    status, not its size, says whether the proxy is ready."""
    if isinstance(r, HttpError) and r.kind == "too_large" and r.status_code:
        return Response(r.status_code, {}, b"")
    return r


def _describe(exc: BaseException) -> str:
    if isinstance(exc, HttpError):
        return printable(redact_url(exc.describe()), 200)
    return printable(redact_url(f"{type(exc).__name__}: {exc}"), 200)


class GatewayCollector:
    """Polls one gateway; keeps its earlier scrapes (bounded) and what it learnt of each
    user series and deployment between polls. Never raises from ``poll``."""

    def __init__(self, url: str, settings: GatewaySettings, window_s: float,
                 timeout_s: float, client: HttpClient | None = None,
                 zone: dt.tzinfo | None = None, prom: PromClient | None = None,
                 prom_selector: str = "") -> None:
        self.url = url.rstrip("/")
        self.shown_url = redact_url(printable(self.url))
        """The URL as a snapshot, a screen or a recording holds it: no password, no key
        (``self.url``, which holds them, is only ever connected to)."""
        self.settings = settings
        self.window_s = window_s
        self.timeout_s = timeout_s
        self._client = client
        self._own_client = client is None
        self.zone = zone
        self.scrapes: deque[tuple[float, Exposition]] = deque(maxlen=KEEP_SCRAPES)
        self._users: dict[tuple[str, Labels], _UserSeries] = {}
        self._cooled: dict[str, tuple[float, float]] = {}
        """model_id → (cooldown counter total, when it was last seen to move)."""
        self._reads = 0
        """Scrapes read so far: the kept ones are sparse, so their count does not tell
        a first scrape from a later one."""
        self._starts: deque[float] = deque(maxlen=16)
        self._multi = False
        self.prom = prom
        self.prom_selector = prom_selector
        """Matchers added to the Prometheus query (``,job="litellm"``)."""
        self._prom_earlier: tuple[float, Exposition] | None = None
        self._big = False
        """The last exposition was large: it is read off the event loop too."""
        self._labels = LabelMemo()
        """The last scrape's label sets: the next one shares them (``LabelMemo``)."""

    @property
    def client(self) -> HttpClient:
        if self._client is None:
            self._client = HttpClient()
        return self._client

    async def aclose(self) -> None:
        if self._own_client and self._client is not None:
            await self._client.aclose()
            self._client = None  # a later poll (another loop: a one-shot command) opens anew

    # -- the key ----------------------------------------------------------------------
    def _key_where(self) -> str:
        s = self.settings
        return (f"gateway.key_file ({s.key_file})" if s.key_file is not None
                else f"the {s.key_env} environment variable (gateway.key_env)")

    def _read_key(self) -> str | None:
        s = self.settings
        if s.key_file is not None:
            try:
                text = Path(s.key_file).expanduser().read_text(errors="replace")
            except OSError:
                return None
            line = text.strip().splitlines()[0] if text.strip() else ""
            return line.strip() or None
        return os.environ.get(s.key_env) or None

    # -- one poll -----------------------------------------------------------------------
    async def _get(self, path: str, headers: dict[str, str] | None = None,
                   max_bytes: int = 64 * 1024) -> Response:
        return await self.client.get(self.url + path, timeout=self.timeout_s,
                                     headers=headers, max_bytes=max_bytes)

    async def _metrics(self, key: str | None) -> Response:
        hdrs = {"Authorization": f"Bearer {key}"} if key else None
        path = self.settings.metrics_path
        r = await self._get(path, hdrs, MAX_EXPOSITION_BYTES)
        loc = r.headers.get("location", "")
        if r.status_code in (301, 302, 307, 308) and loc:
            # LiteLLM redirects /metrics to /metrics/: followed once, on the same origin
            target = loc[len(self.url):] if loc.startswith(self.url) else loc
            if target.startswith("/"):
                r = await self._get(target, hdrs, MAX_EXPOSITION_BYTES)
        return r

    async def scrape(self) -> tuple[Exposition | None, str | None]:
        """The proxy's exposition (only the gateway families), or why not."""
        key = await asyncio.to_thread(self._read_key) if self.settings.key_file else \
            self._read_key()
        try:
            r = await self._metrics(key)
        except HttpError as exc:
            if exc.kind == "too_large":
                return None, (f"/metrics: exposition over {MAX_EXPOSITION_BYTES >> 20} MB "
                              "(refused)")
            return None, f"/metrics: {_describe(exc)}"
        if r.status_code in (401, 403):
            if key is None:
                return None, (f"/metrics needs a key (HTTP {r.status_code}): none in "
                              f"{self._key_where()}; or set the proxy's litellm_settings."
                              "require_auth_for_metrics_endpoint: false")
            return None, (f"/metrics refused the key from {self._key_where()} "
                          f"(HTTP {r.status_code})")
        if r.status_code != 200:
            return None, f"/metrics: HTTP {r.status_code}"
        text = r.text
        self._big = len(text) > INLINE_PARSE_CHARS
        if len(text) <= INLINE_PARSE_CHARS:
            exp = parse(text, FAMILIES, label_memo=self._labels)
        else:
            exp = await asyncio.to_thread(parse, text, FAMILIES, label_memo=self._labels)
        if not any(n.startswith("litellm_") for n in exp.names()) and "# HELP litellm" not in \
                text[:200_000]:
            return exp, ("/metrics has no litellm_ families: is `callbacks: [\"prometheus\"]` "
                         "set in the proxy's litellm_settings?")
        return exp, None

    def _far_end(self, now: float, since: float | None) -> float:
        """Where the window starts: ``window_s`` back, or ``since`` when that is later
        (a run that began after a planned stop counts from its own start: the calls
        that failed while the pod was stopped on purpose are the stop's, not its)."""
        start = now - self.window_s
        return start if since is None else max(start, since)

    async def via_prometheus(self, now: float, since: float | None = None) -> tuple[
            tuple[Exposition, tuple[float, Exposition] | None] | None, str | None]:
        """The gateway's families as Prometheus holds them now and a window ago (its
        latest sample of each series), read by the same maths as a direct scrape."""
        if self.prom is None:
            return None, "gateway.via is prometheus but no prometheus_url is set"
        sel = "{__name__=~\"" + "|".join(sorted(FAMILIES)) + "\"" + self.prom_selector + "}"
        then = self._far_end(now, since)
        # under a second of window (a run that began just now): no earlier sample, so
        # every rate waits for the next poll, as a direct scrape's first one does
        windowed = now - then >= 1.0
        try:
            now_r, then_r = await asyncio.gather(
                self.prom.query(sel, now),
                self.prom.query(sel, then) if windowed else _no_result())
        except PromError as exc:
            return None, f"Prometheus: {exc}"
        later = exposition_of(now_r)
        self._big = len(now_r) > 2000  # many series: read off the event loop
        if not later.names():
            return None, ("Prometheus holds no litellm_ series for the gateway (is it "
                          "scraping the proxy's /metrics/ with a key?)")
        earlier = exposition_of(then_r)
        return (later, (then, earlier) if earlier.names() else None), None

    async def poll(self, now: float, since: float | None = None) -> GatewaySnapshot:
        """One reading of the gateway. ``since`` (same clock as ``now``): the window
        starts no earlier than this (the pod's run after a planned stop)."""
        if self.settings.via == "prometheus":
            live_r, ready_r, prom = await asyncio.gather(
                self._get("/health/liveliness"), self._get("/health/readiness"),
                self.via_prometheus(now, since), return_exceptions=True)
            if isinstance(prom, BaseException):
                scraped: tuple[Exposition | None, str | None] | BaseException = prom
            else:
                got, perr = prom
                scraped = (None, perr) if got is None else (got[0], None)
                self._prom_earlier = got[1] if got is not None else None
        else:
            live_r, ready_r, scraped = await asyncio.gather(
                self._get("/health/liveliness"), self._get("/health/readiness"),
                self.scrape(), return_exceptions=True)
        live_r, ready_r = _status_only(live_r), _status_only(ready_r)
        live = isinstance(live_r, Response) and live_r.status_code == 200
        ready: bool | None
        detail = ""
        if isinstance(ready_r, Response):
            ready = ready_r.status_code == 200
            try:
                body = ready_r.json()
                if isinstance(body, dict):
                    detail = printable(" ".join(f"{k}={body[k]}" for k in ("status", "db")
                                                if k in body), 200)
            except ValueError:
                detail = f"HTTP {ready_r.status_code}"
        else:
            ready, detail = False, _describe(ready_r)
        if not live:
            detail = (_describe(live_r) if isinstance(live_r, BaseException)
                      else f"liveliness HTTP {live_r.status_code}")
        exp: Exposition | None
        err: str | None
        if isinstance(scraped, BaseException):
            exp, err = None, _describe(scraped)
        else:
            exp, err = scraped
        if exp is None:
            return GatewaySnapshot(url=self.shown_url, t=now, live=live, ready=ready,
                                   ready_detail=detail, metrics_error=err)
        earlier, self._prom_earlier = self._prom_earlier, None
        if self._big:  # 20k user series of a 2 MB exposition: ~0.1 s, not on the loop
            snap = await asyncio.to_thread(
                self.read, exp, now, live=live, ready=ready, ready_detail=detail, error=err,
                earlier=earlier, since=since)
        else:
            snap = self.read(exp, now, live=live, ready=ready, ready_detail=detail,
                             error=err, earlier=earlier, since=since)
        return replace(snap, via=self.settings.via)

    def read(self, exp: Exposition, now: float, *, live: bool | None = True,
             ready: bool | None = True, ready_detail: str = "",
             error: str | None = None,
             earlier: tuple[float, Exposition] | None = None,
             since: float | None = None) -> GatewaySnapshot:
        """A new scrape into a snapshot: over the window from ``earlier`` (Prometheus's
        samples a window ago), else from the oldest kept scrape inside the window and
        not before ``since``."""
        self._observe_workers(exp)
        self._reads += 1
        start = self._far_end(now, since)
        if earlier is None:
            for t, e in self.scrapes:
                if t >= start and now - t >= 1.0:
                    earlier = (t, e)
                    break
        # kept sparse, as a slot's (``slot.ScrapeWindow``): the bounded deque then spans
        # the whole window at any poll rate (64 polls 2 s apart held 2m08s, not 5 min)
        if not self.scrapes or now - self.scrapes[-1][0] >= self.window_s / (KEEP_SCRAPES - 2):
            self.scrapes.append((now, exp))
        while self.scrapes and now - self.scrapes[0][0] > self.window_s * 2:
            self.scrapes.popleft()
        # kept scrapes a spacing apart (the newest always): a window's far end needs one
        # scrape near it, not every one in between (64 of a 6 MB exposition held 1 GB)
        if len(self.scrapes) >= 3 and \
                self.scrapes[-2][0] - self.scrapes[-3][0] < self.window_s / KEEP_SPACING:
            del self.scrapes[-2]
        before = earlier[1] if earlier else None
        window = now - earlier[0] if earlier else None
        groups = group_map(exp)
        total = figures_by(exp, before, window, total_key).get("", {})
        per_group = figures_by(exp, before, window, group_key(groups))
        per_dep = figures_by(exp, before, window, deployment_key)
        self._observe_cooldowns(exp, now)
        bases = {}
        for labels in exp.series(GW_STATE):
            mid = deployment_key(labels)
            if mid:
                base = _label(labels, "api_base")
                bases[mid] = None if base is None else redact_url(base)
        ids = sorted(set(per_dep) | set(bases))
        deps = []
        for mid in ids:
            vals = per_dep.get(mid, {})
            fails = vals.get("failures")
            oks = None if vals.get("requests") is None else (
                (vals.get("requests") or 0.0) - (fails or 0.0))
            cooled = self._cooled.get(mid)
            status = deployment_status(vals.get("state"), cooled[1] if cooled else None, now,
                                       self.settings.cooldown_s, fails, oks)
            deps.append(DeploymentRow(mid, groups.get(mid, "?"), bases.get(mid), vals, status,
                                      cooled[1] if cooled and cooled[1] > -math.inf else None))
        return GatewaySnapshot(
            url=self.shown_url, t=now, live=live, ready=ready, ready_detail=ready_detail,
            metrics_error=error, window_s=window, total=total, groups=per_group,
            deployments=tuple(deps), users=self._read_users(exp, now),
            workers_note=(
                "several proxy workers without multiprocess mode: each scrape reads one "
                "worker's counters (set PROMETHEUS_MULTIPROC_DIR for the proxy, or run "
                "one worker)") if self._multi else None)

    def _observe_workers(self, exp: Exposition) -> None:
        """A process start time that changes and comes back (A, B, A) is two processes
        answering in turn: workers, each with its own registry."""
        starts = [v for v in exp.series("process_start_time_seconds").values()]
        if len(starts) != 1:
            return
        s = starts[0]
        if self._starts and self._starts[-1] != s and s in self._starts:
            self._multi = True
        self._starts.append(s)

    def shift(self, by: float) -> None:
        """The wall clock stepped ``by`` seconds: the times kept here (the scrapes a
        window starts from, when a cooldown or a user was last seen) move with it, so
        their ages stay the monotonic ones. A step back would otherwise leave no earlier
        scrape inside the window (every gateway rate undefined) until the clock caught
        up, and make a user idle for the step's length."""
        self.scrapes = deque(((t + by, e) for t, e in self.scrapes),
                             maxlen=self.scrapes.maxlen)
        self._cooled = {k: (v, t + by) for k, (v, t) in self._cooled.items()}
        for st in self._users.values():
            st.since += by
            if st.last_seen is not None:
                st.last_seen += by

    def _observe_cooldowns(self, exp: Exposition, now: float) -> None:
        totals: dict[str, float] = {}
        for labels, v in exp.series(GW_COOLDOWNS).items():
            mid = deployment_key(labels)
            if mid:
                totals[mid] = totals.get(mid, 0.0) + v
        for mid, v in totals.items():
            old = self._cooled.get(mid)
            if old is None:
                # on the first scrape a cooldown counted before this console watched is
                # not known to be recent (the failures in the window still tell
                # "failing"); a series born since the last scrape has just moved
                self._cooled[mid] = (v, -math.inf if self._reads <= 1 else now)
            elif v != old[0]:
                self._cooled[mid] = (v, now)

    def _day(self, t: float) -> tuple[dt.date, float]:
        d = dt.datetime.fromtimestamp(t, self.zone or dt.datetime.now().astimezone().tzinfo)
        start = d.replace(hour=0, minute=0, second=0, microsecond=0)
        return d.date(), start.timestamp()

    def _read_users(self, exp: Exposition, now: float) -> tuple[UserRow, ...]:
        """Usage today per user/key, and when each was last seen making a request."""
        day, day_start = self._day(now)
        sums: dict[str, dict[str, float]] = {}
        seen: dict[str, float] = {}
        since: dict[str, float] = {}
        teams: dict[str, str] = {}
        for fig in GATEWAY_USAGE:
            name = fig.source.names[0] if isinstance(fig.source, Increase) else ""
            created = exp.series(name[:-len("_total")] + "_created") if name else {}
            for labels, v in exp.series(name).items():
                who = user_name(labels)
                if who is None or finite(v) is None:
                    continue
                team = _label(labels, "team_alias") or _label(labels, "team")
                if team:
                    teams.setdefault(who, team)
                k = (name, labels)
                st = self._users.get(k)
                if st is None or st.day != day:
                    born = created.get(labels)
                    fresh = st is None and born is not None and born >= day_start
                    base = 0.0 if fresh or st is not None else v
                    if st is not None:  # a new day: its count starts where yesterday ended
                        base = st.last_value if st.last_value <= v else 0.0
                    start = day_start if base == 0.0 else now
                    last = (min(born, now) if fresh and born is not None and v > 0
                            else st.last_seen if st else None)
                    st = self._users[k] = _UserSeries(day, base, start, v, last)
                elif v != st.last_value:
                    if v < st.last_value:  # the proxy restarted: counted from zero again
                        st.baseline -= st.last_value
                    st.last_seen = now
                    st.last_value = v
                per = sums.setdefault(who, {})
                per[fig.key] = per.get(fig.key, 0.0) + (v - st.baseline)
                if st.last_seen is not None:
                    seen[who] = max(seen.get(who, -math.inf), st.last_seen)
                since[who] = min(since.get(who, math.inf), st.since)
        rows = [UserRow(name=who[:80], requests=v.get("requests"),  # cleaned when parsed
                        tokens=v.get("tokens"), spend=v.get("spend"), last_seen=seen.get(who),
                        since=since.get(who), team=teams.get(who))
                for who, v in sums.items()]
        rows.sort(key=lambda u: (-(u.requests or 0.0), u.name))
        return tuple(rows)
