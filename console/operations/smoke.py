"""The smoke test: does the deployment answer the way its users reach it?

The field's eight checks, through the gateway when one is configured (``gateway_url``:
the LiteLLM proxy users call), else straight to each slot:

1. ``models listed``     every served name is in ``/v1/models``;
2. ``aliases listed``    every alias is too (aliases live in the gateway);
3. ``chat``              a chat completion for each served name answers with content;
4. ``streaming``         a streamed one does too: SSE chunks with content, then ``[DONE]``;
5. ``aliases answer``    a chat completion through each alias answers;
6. ``unknown model``     a model that does not exist is refused with a 4xx — not a 5xx,
                         not a hang;
7. ``targets up``        each slot's Prometheus target is UP (``up`` of its pod and slot);
8. ``trace sink``        the request reached the trace sink (Langfuse, fed by the gateway:
                         a trace whose user id is this run's marker appears in its public
                         API within ``trace_wait_s``) — skipped, and said so, when none
                         is configured.

Each check gives pass, fail or skipped, its evidence and its duration. No Textual here:
the CLI (``pod-console smoke``), the ``t`` key and ``up``'s last step run the same
:func:`run_smoke` and render its immutable :class:`SmokeReport`.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from msgspec import Struct, field, to_builtins

from console.sources.collect.http import HttpClient, HttpError
from console.sources.collect.promql import PromClient, PromError

PROMPT = "Reply with the single word OK."
UNKNOWN_MODEL = "pod-console-smoke-no-such-model"


class CheckResult(Struct, frozen=True):
    name: str
    ok: bool | None
    """True pass, False fail, None skipped (``evidence`` says why)."""
    evidence: str
    duration_s: float

    @property
    def verdict(self) -> str:
        return {True: "pass", False: "FAIL", None: "skipped"}[self.ok]


class SmokeReport(Struct, frozen=True):
    via: str
    """``gateway URL`` or ``direct`` (each slot's own URL)."""
    checks: tuple[CheckResult, ...]
    started_at: float
    duration_s: float

    @property
    def ok(self) -> bool:
        return all(c.ok is not False for c in self.checks)

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if c.ok is False)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "via": self.via, "started_at": self.started_at,
                "duration_s": round(self.duration_s, 3),
                "checks": [{**to_builtins(c), "duration_s": round(c.duration_s, 3),
                            "verdict": c.verdict} for c in self.checks]}

    def lines(self) -> list[str]:
        """The report as a person reads it (CLI, the ``t`` dialog, ``up``'s log)."""
        out = [f"smoke test via {self.via}: "
               f"{'all passed' if self.ok else f'{len(self.failed)} FAILED'} "
               f"({self.duration_s:.1f} s)"]
        for c in self.checks:
            out.append(f"  {c.verdict:<7} {c.name:<15} {c.evidence} ({c.duration_s:.2f} s)")
        return out


class SmokePlan(Struct, frozen=True):
    """What to check, from the profile and the settings."""

    served: Mapping[str, str]
    """Served model name → the base URL that serves it (the gateway's for every name when
    there is a gateway)."""
    slots: Mapping[str, str]
    """Slot name → its served model name (for the Prometheus targets)."""
    aliases: Mapping[str, str] = field(default_factory=dict)
    """Alias → served model name (the gateway's ``model_group_alias``)."""
    gateway_url: str | None = None
    api_key: str | None = None
    """The gateway's key (``LITELLM_MASTER_KEY``) or, direct, the slots' (``VLLM_API_KEY``)."""
    prometheus_url: str | None = None
    pod_id: str | None = None
    trace_check: Callable[[str], Awaitable[tuple[bool, str]]] | None = None
    """Given the smoke request's marker, whether the trace sink received it."""
    timeout_s: float = 60.0


def _squash(text: str) -> str:
    """A body as one line of evidence (servers answer with indented JSON or HTML)."""
    return " ".join(text.split())


def _content(body: Any) -> str | None:
    try:
        return body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None


async def _again_if_empty(once: Callable[[str, str], Awaitable[tuple[bool, str, bool]]],
                          model: str, base: str) -> tuple[bool, str]:
    """One request, and a second only when the first answered 200 with no content.

    The server samples (see ``Smoke._body``), and sampling may draw the end-of-sequence
    token first: about once in the vocabulary's size for a model with flat logits (1 in
    600 chats against the test suite's random-weight model). One empty answer says
    nothing about the path; two in a row say the model answers nothing."""
    ok, evidence, empty = await once(model, base)
    if not empty:
        return ok, evidence
    ok, evidence, empty = await once(model, base)
    return ok, evidence + (" (twice)" if empty else " (asked again: the first was empty)")


async def _timed(name: str, fn: Callable[[], Awaitable[tuple[bool | None, str]]]
                 ) -> CheckResult:
    t0 = time.monotonic()
    try:
        ok, evidence = await fn()
    except HttpError as exc:  # a check that cannot reach its server fails, it never raises
        ok, evidence = False, exc.describe()[:200]
    return CheckResult(name, ok, evidence, time.monotonic() - t0)


class Smoke:
    def __init__(self, plan: SmokePlan, client: HttpClient) -> None:
        self.plan = plan
        self.client = client
        self.marker = f"pod-console-smoke-{uuid.uuid4().hex[:12]}"
        self.headers = {"Authorization": f"Bearer {plan.api_key}"} if plan.api_key else {}
        self.refused: dict[str, str] = {}
        """base URL → the 401/403 it gave: checks whose premise is an accepted key are
        then "not run", never passed on the refusal's 4xx."""

    def _body(self, model: str, stream: bool = False) -> dict[str, Any]:
        # ``user`` carries the marker the trace check looks for (LiteLLM also reads
        # ``metadata.trace_user_id``, a field of its own that a bare vLLM would not
        # know). The server's own sampling (no temperature): greedy decoding of a small
        # or broken model can pick only special tokens, an empty answer that says
        # nothing about the path tested
        body: dict[str, Any] = {"model": model, "max_tokens": 16, "stream": stream,
                                "user": self.marker,
                                "messages": [{"role": "user", "content": PROMPT}]}
        if self.plan.gateway_url:
            body["metadata"] = {"trace_user_id": self.marker,
                                "trace_name": "pod-console-smoke"}
        return body

    def _who(self, model: str) -> str:
        """How evidence names a model: with its slot when the check went straight to it
        (direct mode: two slots, two servers, and the reader must know which failed)."""
        if self.plan.gateway_url:
            return model
        slot = next((s for s, m in self.plan.slots.items() if m == model), None)
        return f"{slot} ({model})" if slot else model

    def _base_name(self, base: str) -> str:
        if base == self.plan.gateway_url:
            return "gateway"
        names = sorted(self._who(m) for m, b in self.plan.served.items() if b == base)
        return ", ".join(names) or base

    def _note_refusal(self, base: str, status: int, text: str) -> None:
        if status in (401, 403):
            self.refused.setdefault(base, f"HTTP {status} {_squash(text)[:120]}".rstrip())

    async def _listed(self) -> dict[str, set[str] | str]:
        """base URL → the model ids its ``/v1/models`` lists, or why it listed none (the
        status and body the server gave, or why it could not be reached)."""
        out: dict[str, set[str] | str] = {}
        for base in sorted(set(self.plan.served.values())):
            try:
                r = await self.client.get(base + "/v1/models", timeout=self.plan.timeout_s,
                                          headers=self.headers)
            except HttpError as exc:
                out[base] = exc.describe()[:160]
                continue
            if r.status_code != 200:
                self._note_refusal(base, r.status_code, r.text)
                out[base] = f"HTTP {r.status_code} {_squash(r.text)[:120]}".rstrip()
                continue
            try:
                out[base] = {str(m.get("id")) for m in r.json().get("data") or ()
                             if isinstance(m, dict)}
            except (ValueError, AttributeError):
                out[base] = "HTTP 200 but not a models list"
        return out

    def _missing(self, listed: dict[str, set[str] | str], wanted: Mapping[str, str]
                 ) -> list[str]:
        problems = []
        for base in sorted(set(wanted.values())):
            got = listed.get(base, set())
            names = sorted(n for n, b in wanted.items() if b == base)
            if isinstance(got, str):
                problems.append(f"{self._base_name(base)}: /v1/models answered {got}")
                continue
            gone = [self._who(n) for n in names if n not in got]
            if gone:
                problems.append(f"missing from /v1/models: {', '.join(gone)}")
        return problems

    async def models_listed(self) -> tuple[bool, str]:
        problems = self._missing(await self._listed(), self.plan.served)
        if problems:
            return False, "; ".join(problems)
        return True, (f"{len(self.plan.served)} listed: "
                      f"{', '.join(self._who(n) for n in sorted(self.plan.served))}")

    async def aliases_listed(self) -> tuple[bool | None, str]:
        if not self.plan.aliases:
            return None, "the profile has no aliases"
        if not self.plan.gateway_url:
            return None, "aliases live in the gateway; no gateway_url is configured"
        gw = self.plan.gateway_url
        listed = (await self._listed()).get(gw, set())
        if isinstance(listed, str):
            return False, f"gateway: /v1/models answered {listed}"
        missing = sorted(a for a in self.plan.aliases if a not in listed)
        if missing:
            return False, f"missing from /v1/models: {', '.join(missing)}"
        return True, f"{len(self.plan.aliases)} listed: {', '.join(sorted(self.plan.aliases))}"

    async def _chat_once(self, model: str, base: str) -> tuple[bool, str, bool]:
        """(passed, evidence, answered empty)."""
        who = self._who(model)
        r = await self.client.post_json(base + "/v1/chat/completions", self._body(model),
                                        timeout=self.plan.timeout_s, headers=self.headers)
        if r.status_code != 200:
            self._note_refusal(base, r.status_code, r.text)
            return False, f"{who}: HTTP {r.status_code} {_squash(r.text)[:120]}".rstrip(), False
        try:
            content = _content(r.json())
        except ValueError:
            return False, f"{who}: HTTP 200 but not JSON", False
        if not content:
            return False, f"{who}: no content in choices[0].message", True
        return True, f"{who}: {content.strip()[:30]!r}", False

    async def _chat(self, model: str, base: str) -> tuple[bool, str]:
        return await _again_if_empty(self._chat_once, model, base)

    async def _each(self, check: Callable[[str, str], Awaitable[tuple[bool, str]]],
                    models: list[tuple[str, str]]) -> tuple[bool, str]:
        """One check per (model, base URL), in order; passes when every one does. A
        server that cannot be reached fails its own model's check, named, and the others
        are still checked (one dead slot must not hide the state of the live one)."""
        results = []
        for m, b in models:
            try:
                results.append(await check(m, b))
            except HttpError as exc:
                results.append((False, f"{self._who(m)}: {exc.describe()[:160]}"))
        return all(ok for ok, _ in results), "; ".join(e for _, e in results)

    async def chat(self) -> tuple[bool, str]:
        return await self._each(self._chat, sorted(self.plan.served.items()))

    async def _stream_once(self, model: str, base: str) -> tuple[bool, str, bool]:
        """(passed, evidence, answered empty)."""
        r = await self.client.post_json(base + "/v1/chat/completions",
                                        self._body(model, stream=True),
                                        timeout=self.plan.timeout_s, headers=self.headers)
        who = self._who(model)
        if r.status_code != 200:
            self._note_refusal(base, r.status_code, r.text)
            return False, f"{who}: HTTP {r.status_code} {_squash(r.text)[:120]}".rstrip(), False
        if "text/event-stream" not in r.headers.get("content-type", ""):
            return False, f"{who}: not a stream ({r.headers.get('content-type', '?')})", False
        text, chunks, done = [], 0, False
        for line in r.text.splitlines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                continue
            try:
                delta = json.loads(data)["choices"][0].get("delta") or {}
            except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                continue
            chunks += 1
            text.append(delta.get("content") or "")
        joined = "".join(text).strip()
        if not done:
            return False, f"{who}: the stream never said [DONE] ({chunks} chunks)", False
        if not joined:
            return False, f"{who}: {chunks} chunks, no content", True
        return True, f"{who}: {chunks} chunks, {joined[:30]!r}", False

    async def _stream(self, model: str, base: str) -> tuple[bool, str]:
        return await _again_if_empty(self._stream_once, model, base)

    async def streaming(self) -> tuple[bool, str]:
        return await self._each(self._stream, sorted(self.plan.served.items()))

    async def aliases_answer(self) -> tuple[bool | None, str]:
        if not self.plan.aliases:
            return None, "the profile has no aliases"
        if not self.plan.gateway_url:
            return None, "aliases live in the gateway; no gateway_url is configured"
        gw = self.plan.gateway_url
        return await self._each(self._chat, [(a, gw) for a in sorted(self.plan.aliases)])

    async def unknown_model(self) -> tuple[bool | None, str]:
        bases = ([self.plan.gateway_url] if self.plan.gateway_url
                 else sorted(set(self.plan.served.values())))
        results = [await self._unknown_at(b) for b in bases]
        if all(ok is None for ok, _ in results):
            return None, "; ".join(e for _, e in results)
        return (all(ok is not False for ok, _ in results),
                "; ".join(e for _, e in results))

    async def _unknown_at(self, base: str) -> tuple[bool | None, str]:
        name = self._base_name(base)
        if base in self.refused:
            return None, (f"{name}: not run: the key was refused ({self.refused[base]}), so "
                          "a refusal would say nothing about the model")
        try:
            r = await self.client.post_json(base + "/v1/chat/completions",
                                            self._body(UNKNOWN_MODEL),
                                            timeout=min(30.0, self.plan.timeout_s),
                                            headers=self.headers)
        except HttpError as exc:
            if exc.kind == "timeout":
                return False, f"{name}: no answer: a request for an unknown model hangs"
            return False, f"{name}: {exc.describe()[:160]}"
        body = _squash(r.text)[:120]
        if r.status_code in (401, 403):
            self._note_refusal(base, r.status_code, r.text)
            return None, (f"{name}: not run: the key was refused (HTTP {r.status_code} "
                          f"{body}), so a refusal would say nothing about the model")
        if 400 <= r.status_code < 500:
            return True, f"{name}: HTTP {r.status_code}"
        return False, f"{name}: HTTP {r.status_code} (want a 4xx) {body}".rstrip()

    async def targets_up(self) -> tuple[bool | None, str]:
        if not self.plan.prometheus_url:
            return None, "no prometheus_url configured"
        prom = PromClient(self.plan.prometheus_url, self.client, min(10.0, self.plan.timeout_s))
        sel = f',pod="{self.plan.pod_id}"' if self.plan.pod_id else ""
        try:
            res = await prom.query(f'up{{slot!=""{sel}}}')
        except PromError as exc:
            return False, f"Prometheus: {exc}"
        up: dict[str, float] = {}
        for item in res:
            slot = (item.get("metric") or {}).get("slot")
            try:
                up[str(slot)] = max(up.get(str(slot), 0.0), float(item["value"][1]))
            except (KeyError, IndexError, TypeError, ValueError):
                continue
        bad = [f"{s} {'DOWN' if s in up else 'no target'}"
               for s in sorted(self.plan.slots) if up.get(s) != 1.0]
        if bad:
            return False, "; ".join(bad)
        return True, f"{len(self.plan.slots)} UP: {', '.join(sorted(self.plan.slots))}"

    async def trace_sink(self) -> tuple[bool | None, str]:
        if self.plan.trace_check is None:
            return None, "no trace sink configured"
        if not self.plan.gateway_url:
            return None, "the trace sink is fed by the gateway; no gateway_url is configured"
        return await self.plan.trace_check(self.marker)


CHECKS: tuple[tuple[str, str], ...] = (
    ("models listed", "models_listed"), ("aliases listed", "aliases_listed"),
    ("chat", "chat"), ("streaming", "streaming"), ("aliases answer", "aliases_answer"),
    ("unknown model", "unknown_model"), ("targets up", "targets_up"),
    ("trace sink", "trace_sink"))


async def run_smoke(plan: SmokePlan, client: HttpClient,
                    on_check: Callable[[CheckResult], None] | None = None) -> SmokeReport:
    """Every check in order, each bounded by the plan's timeout; never raises for a
    server's behaviour (a refused connection, garbage, a hang are failed checks)."""
    smoke = Smoke(plan, client)
    t0, wall = time.monotonic(), time.time()
    results = []
    for name, attr in CHECKS:
        res = await _timed(name, getattr(smoke, attr))
        results.append(res)
        if on_check is not None:
            on_check(res)
    return SmokeReport(f"gateway {plan.gateway_url}" if plan.gateway_url else "direct",
                       tuple(results), wall, time.monotonic() - t0)


def langfuse_check(url: str, public_key: str, secret_key: str, client: HttpClient,
                   wait_s: float = 30.0, every_s: float = 2.0
                   ) -> Callable[[str], Awaitable[tuple[bool, str]]]:
    """Whether Langfuse holds a trace of the marked requests: its public API
    (``GET /api/public/traces?userId=…``, basic auth with the project's key pair),
    polled until ``wait_s`` — the gateway sends traces in batches and Langfuse ingests
    them asynchronously, so seconds pass before one is listed."""
    import base64

    auth = base64.b64encode(f"{public_key}:{secret_key}".encode()).decode()
    headers = {"Authorization": f"Basic {auth}"}
    base = url.rstrip("/")

    async def check(marker: str) -> tuple[bool, str]:
        import asyncio

        t0 = time.monotonic()
        last = "no answer"
        while True:
            try:
                r = await client.get(base + "/api/public/traces", timeout=10.0,
                                     headers=headers, params={"userId": marker, "limit": 1})
                if r.status_code in (401, 403):
                    return False, (f"Langfuse refused the key pair (HTTP {r.status_code}): "
                                   "LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY")
                if r.status_code == 200:
                    data = r.json().get("data")
                    if isinstance(data, list) and data:
                        tid = data[0].get("id") if isinstance(data[0], dict) else None
                        return True, (f"trace {tid} for {marker} after "
                                      f"{time.monotonic() - t0:.0f} s")
                    last = "no trace yet"
                else:
                    last = f"HTTP {r.status_code}"
            except HttpError as exc:
                last = exc.describe()
            except (ValueError, AttributeError):
                last = "an answer that is not the traces list"
            if time.monotonic() - t0 + every_s > wait_s:
                return False, (f"no trace with userId {marker} after {wait_s:.0f} s "
                               f"({last}): is the gateway's langfuse callback on?")
            await asyncio.sleep(every_s)

    return check


def plan_for(profile: Any, targets: Any, settings: Any,
             client: HttpClient | None = None) -> SmokePlan:
    """The plan for a profile's slots (``targets``: their ``SlotTarget``\\s) and the
    settings' gateway, keys and Prometheus."""
    gateway = settings.gateway_url.rstrip("/") if settings.gateway_url else None
    served = {t.served_model_name: gateway or t.base_url for t in targets}
    key = settings.gateway_key if gateway else settings.vllm_api_key
    trace = None
    if getattr(settings, "trace_url", None) and client is not None:  # tests pass bare namespaces
        pub, sec = settings.trace_public_key, settings.trace_secret_key
        trace = langfuse_check(settings.trace_url,
                               pub.get_secret_value() if pub else "",
                               sec.get_secret_value() if sec else "", client,
                               settings.trace_wait_s)
    return SmokePlan(served=served, slots={t.slot: t.served_model_name for t in targets},
                     aliases=dict(profile.alias_targets()), gateway_url=gateway,
                     api_key=key.get_secret_value() if key else None,
                     prometheus_url=settings.prometheus_url, pod_id=settings.pod.machine_id,
                     trace_check=trace, timeout_s=settings.smoke_timeout_s)
