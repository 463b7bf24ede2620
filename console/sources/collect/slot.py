"""Direct slot polling: ``/health``, ``/v1/models`` and ``/metrics`` of each slot's server,
whatever its engine (vLLM, SGLang: ``console/model/engines``; both answer the three).

All requests of one poll run concurrently with per-request timeouts shorter
than the refresh interval. Earlier scrapes are kept (bounded) so figures can
be computed over a window from two scrapes when no Prometheus is available.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque

from msgspec import Struct

from console.model.catalog import exposition_families
from console.model.engines import DEFAULT, ENGINES, Engine, OverTime, engine
from console.model.history import quantile_over_time
from console.model.model_figures import ModelFigures
from console.model.printable import printable
from console.model.snapshot import Health
from console.sources.collect.exposition import Exposition, ParseMemo, parse
from console.sources.collect.figures import compute
from console.sources.collect.http import HttpClient, HttpError, Response
from console.sources.collect.targets import SlotTarget

MIN_WINDOW_S = 1.0
"""The shortest span between two scrapes that figures are computed over (the console
polls at least a second apart; ``status --json`` without ``--sample`` polls twice at once)."""
MAX_EXPOSITION_BYTES = 8 * 1024 * 1024
"""vLLM's exposition is ~55 KB; anything near this is a misconfigured target."""
FAMILIES = exposition_families()
"""What a vLLM slot's poll parses of its exposition (``parse`` skips the rest unread);
another engine's slot parses its own (``Engine.families``)."""
_FAMILIES = {name: e.families() for name, e in ENGINES.items()}
ALL_FAMILIES = frozenset().union(*_FAMILIES.values())
"""Every engine's: for a reader that does not know the slot's engine (the benchmark)."""
INLINE_PARSE_CHARS = 128 * 1024
"""An exposition this small parses on the event loop: vLLM's (~55 KB) takes about half
a millisecond once the slot's memo knows its lines, less than a hand-off to a thread and
back costs the loop (and a thread parses under the same GIL anyway). Anything larger, up
to 8 MB from a misconfigured target, goes to a thread, so keys and paints go on."""


class SlotProbe(Struct, frozen=True):
    """Raw result of polling one slot once."""

    target: SlotTarget
    t: float
    health: Health
    health_detail: str
    served_models: tuple[str, ...]
    exposition: Exposition | None
    error: str | None
    m: float | None = None
    """The monotonic clock at ``t``: what the scrape window counts its seconds on."""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, HttpError):
        return printable(exc.describe(), 200)
    return printable(f"{type(exc).__name__}: {exc}", 200)


async def probe_slot(client: HttpClient, target: SlotTarget, timeout: float,
                     api_key: str | None = None, metrics: bool = True,
                     memo: ParseMemo | None = None) -> SlotProbe:
    """Poll one slot; never raises (failures are data). ``memo``: the slot's own, kept
    from one poll to the next (its lines are read from what they meant last time)."""
    t, m = time.time(), time.monotonic()
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def get(path: str, hdrs: dict[str, str] | None = None,
                  max_bytes: int = 1024 * 1024) -> Response:
        return await client.get(target.base_url + path, timeout=timeout, headers=hdrs,
                                max_bytes=max_bytes)

    calls = [get("/health"), get("/v1/models", headers)]
    if metrics:
        calls.append(get("/metrics", max_bytes=MAX_EXPOSITION_BYTES))
    results = await asyncio.gather(*calls, return_exceptions=True)
    health_r, models_r = results[0], results[1]
    metrics_r = results[2] if metrics else None
    errors: list[str] = []
    health: Health
    if isinstance(health_r, BaseException):
        health, detail = "down", _describe(health_r)
    elif health_r.status_code == 200:
        health, detail = "up", "200"
    elif health_r.status_code == 503:
        health, detail = "down", "503 engine dead"
    else:
        health, detail = "down", f"HTTP {health_r.status_code}"
    served: tuple[str, ...] = ()
    if isinstance(models_r, Response) and models_r.status_code == 200:
        try:
            # a server's words: drawn on every screen, so no control character
            served = tuple(sorted(printable(m.get("id"), 200)
                                  for m in models_r.json().get("data", [])
                                  if isinstance(m, dict)))
        except (ValueError, AttributeError):
            errors.append("/v1/models: unreadable JSON")
    elif isinstance(models_r, Response) and models_r.status_code == 401:
        errors.append("/v1/models: 401 (API key?)")
    exp = None
    if metrics:
        if isinstance(metrics_r, HttpError) and metrics_r.kind == "too_large":
            errors.append("/metrics: exposition too large")
        elif isinstance(metrics_r, BaseException):
            errors.append(f"/metrics: {_describe(metrics_r)}")
        elif metrics_r is not None and metrics_r.status_code != 200:
            errors.append(f"/metrics: HTTP {metrics_r.status_code}")
        elif metrics_r is not None:
            text = metrics_r.text
            fams = _FAMILIES.get(target.engine) or engine(target.engine).families()
            if len(text) <= INLINE_PARSE_CHARS:
                exp = parse(text, fams, target.served_model_name, memo)
            else:  # up to 8 MB: parsed off the event loop so keys and paints go on
                exp = await asyncio.to_thread(parse, text, fams,
                                              target.served_model_name, memo)
            if exp.error_count:
                errors.append(f"/metrics: {exp.error_count} unreadable lines")
    if health == "down" and not errors:
        errors.append(detail)
    return SlotProbe(target=target, t=t, health=health, health_detail=printable(detail),
                     served_models=served, exposition=exp,
                     error=printable("; ".join(errors)) if errors else None, m=m)


STEP_S = 1.0
"""Wall and monotonic gaps between two scrapes this far apart: the wall clock stepped
(the two clocks read microseconds apart; NTP's slew moves them alike)."""


class ScrapeWindow:
    """Earlier scrapes of one slot, kept sparse and bounded, for windowed figures."""

    def __init__(self, window_s: float, keep: int = 32, engine_name: str = "vllm") -> None:
        self.engine = engine(engine_name)
        self.window_s = window_s
        self.min_gap = window_s / (keep - 2)
        self.scrapes: deque[tuple[float, Exposition]] = deque(maxlen=keep)
        self.kv: deque[tuple[float, float]] = deque(maxlen=4096)
        self.memo = ParseMemo()
        self._offset: float | None = None
        """Wall minus monotonic clock at the last scrape (``add``'s ``m``)."""

    def add(self, t: float, exp: Exposition, model: str, m: float | None = None) -> None:
        """One scrape at wall time ``t``; ``m``: the monotonic clock then. A step of the
        wall clock between two scrapes (their wall and monotonic gaps differ) moves the
        kept scrapes' times with it: a window's seconds are the monotonic clock's, and
        an hour's step back does not leave the window empty (rates undefined) for the
        hour."""
        if m is not None:
            off = t - m
            if self._offset is not None and abs(off - self._offset) > STEP_S:
                by = off - self._offset
                self.scrapes = deque(((t0 + by, e) for t0, e in self.scrapes),
                                     maxlen=self.scrapes.maxlen)
                self.kv = deque(((t0 + by, v) for t0, v in self.kv), maxlen=self.kv.maxlen)
            self._offset = off
        if not self.scrapes or t - self.scrapes[-1][0] >= self.min_gap:
            self.scrapes.append((t, exp))
        kv = kv_usage(exp, model, self.engine)
        if kv is not None:
            self.kv.append((t, kv))
        while self.scrapes and self.scrapes[0][0] < t - self.window_s:
            self.scrapes.popleft()
        while self.kv and self.kv[0][0] < t - self.window_s:
            self.kv.popleft()

    def earlier(self, t: float) -> tuple[float, Exposition] | None:
        """The scrape a window ending at ``t`` starts from (None: none far enough back)."""
        for t0, e0 in self.scrapes:
            # two scrapes milliseconds apart are not a window: a rate over 9 ms reads
            # 0 tok/s on a busy server. Lifetime figures (rates undefined) until one is.
            if t - t0 >= MIN_WINDOW_S:
                return t0, e0
        return None

    def figures(self, t: float, exp: Exposition, model: str) -> ModelFigures | None:
        return window_figures(t, exp, self.earlier(t), model, self.engine)

    def kv_p99(self) -> float | None:
        return quantile_over_time(0.99, [v for _, v in self.kv])

    @property
    def kv_from(self) -> float | None:
        """When the oldest KV reading the p99 counts was scraped (None: none)."""
        return self.kv[0][0] if self.kv else None


def kv_usage(exp: Exposition, model: str, eng: Engine = DEFAULT) -> float | None:
    """The KV cache usage of ``model`` in one scrape (None: not there, or not finite):
    the fullest of vLLM's engines and of SGLang's ranks (the source's ``across``)."""
    kv_src = eng.sources.get("kv_p99")
    if not isinstance(kv_src, OverTime):
        return None
    for name in kv_src.of.names:
        vals = [v for _, v in exp.by_label(name, "model_name").get(model, ())]
        if vals:
            kv = max(vals) if kv_src.of.across == "max" else sum(vals)
            return kv if math.isfinite(kv) else None
    return None


def window_figures(t: float, exp: Exposition, earlier: tuple[float, Exposition] | None,
                   model: str, eng: Engine | None = None) -> ModelFigures | None:
    """A slot's figures from its scrape at ``t`` and the earlier one its window starts
    from (lifetime figures without one): the live poll and a replay both call this.
    ``eng``: the slot's engine (told by the scrape's families when not given)."""
    if earlier is None:
        return compute(exp, None, None, only=model, engine=eng).get(model)
    t0, e0 = earlier
    return compute(exp, e0, t - t0, only=model, engine=eng).get(model)


async def probe_completion(client: HttpClient, target: SlotTarget, timeout: float,
                           api_key: str | None = None) -> tuple[bool, str]:
    """POST one tiny chat completion: catches "process up, inference broken"."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    body = {"model": target.served_model_name, "max_tokens": 4, "temperature": 0,
            "messages": [{"role": "user", "content": "Reply with the single word OK."}]}
    try:
        r = await client.post_json(target.base_url + "/v1/chat/completions", body,
                                   headers=headers, timeout=timeout)
    except HttpError as exc:
        return False, _describe(exc)
    if r.status_code != 200:
        return False, f"HTTP {r.status_code}"
    try:
        content = r.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return False, "answer without choices[0].message.content"
    return content is not None, "ok" if content is not None else "empty content"
