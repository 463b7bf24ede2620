"""A simulated LiteLLM proxy for the demo, in front of the demo's slots.

It serves what the console reads of a real one, in LiteLLM 1.100's families and labels
(``tests/fixtures/litellm_metrics.txt`` is the real proxy's capture): ``/metrics/``
(no key asked: the proxy's ``require_auth_for_metrics_endpoint: false``),
``/health/liveliness`` and ``/health/readiness``. It also routes ``/v1/models`` and
``/v1/chat/completions`` to the slots (model groups by served name, the profile's aliases
too), so the smoke test and the benchmark go through it as through the field's gateway.

Its counters are driven by the demo's traffic: every ``TICK_S`` it reads each slot's
``/metrics`` and counts the requests the slot finished since as calls through the
gateway, spread over a few users (a request routed here counts for the ``user`` its body
names). A slot that stops answering turns the calls routed to it into 5xx failures.

Faults (files in ``--faults``):
  ``gw-cooldown-<slot>``  the router puts that deployment in cooldown for ``COOLDOWN_S``:
                          its calls fail with 500, the cooldown counter moves, requests
                          fall back to another model group (the file is consumed)
  ``gw-down``             the proxy answers nothing (liveliness included) while it exists
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from msgspec import Struct, field

from console.demo.http_serve import Reply, Request, Streamed, start
from console.sources.collect.http import HttpClient, HttpError

if TYPE_CHECKING:
    import httpx

LAT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0,
               120.0, 300.0, 420.0, 600.0)
USERS = (("alice", "research", 0.55), ("bob", "research", 0.30), ("ci-bot", "platform", 0.15))
"""(end user, team, share of the traffic)."""
PRICE_PER_TOKEN = 6e-7
COOLDOWN_S = 30.0
COOLDOWN_EVERY_S = 4.0
"""While a deployment is in cooldown its failures put it back in cooldown this often
(LiteLLM counts each cooldown; the console reads "in cooldown" from the counter moving)."""
TICK_S = 1.0
HASHED_KEY = hashlib.sha256(b"demo-virtual-key").hexdigest()


def _num(x: float) -> str:
    return "+Inf" if math.isinf(x) else repr(float(x))


def _labels(pairs: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in sorted(pairs.items()))


class Hist(Struct):
    counts: list[float] = field(default_factory=lambda: [0.0] * (len(LAT_BUCKETS) + 1))
    total: float = 0.0
    n: float = 0.0

    def observe(self, v: float) -> None:
        for i, b in enumerate(LAT_BUCKETS):
            if v <= b:
                self.counts[i] += 1
                break
        else:
            self.counts[-1] += 1
        self.total += v
        self.n += 1


class Deployment(Struct):
    model_id: str
    """The slot's name (LiteLLM's ``model_info.id``)."""
    group: str
    port: int
    api_base: str = ""
    requests: float = 0.0
    failures: dict[str, float] = field(default_factory=dict)
    cooldowns: float = 0.0
    state: float = 0.0
    cooled_until: float = 0.0
    last_cooldown: float = 0.0
    seen: dict[str, float] | None = None
    """The slot's counters at the last reading (None: not read yet or unreachable)."""
    answered: bool = False
    """The slot answered once: before that it is starting, not failing."""

    def __post_init__(self) -> None:
        self.api_base = f"http://127.0.0.1:{self.port}/v1"


class Gateway:
    def __init__(self, deployments: list[Deployment], aliases: dict[str, str],
                 faults: Path | None, seed: int, rate: float) -> None:
        self.deps = {d.model_id: d for d in deployments}
        self.by_group = {d.group: d for d in deployments}
        self.aliases = aliases
        self.faults = faults
        self.rng = random.Random(seed)
        self.rate = rate
        self.created = time.time()
        # (model_id, user) → counters; histograms per (model_id, user)
        self.user_requests: dict[tuple[str, str], float] = {}
        self.user_tokens: dict[tuple[str, str], float] = {}
        self.user_spend: dict[tuple[str, str], float] = {}
        self.user_created: dict[tuple[str, str], float] = {}
        self.api_lat: dict[tuple[str, str], Hist] = {}
        self.total_lat: dict[tuple[str, str], Hist] = {}
        self.overhead: dict[str, Hist] = {}
        self.fallbacks: dict[tuple[str, str], float] = {}
        self.routed: dict[str, list[str]] = {}
        """model_id → users of requests routed here not yet seen in the slot's counters."""
        self.client = HttpClient(relay=None)
        """Reads the slots' counters (the console's own client: h11, a deadline each)."""

    # -- faults ------------------------------------------------------------------
    def down(self) -> bool:
        return self.faults is not None and (self.faults / "gw-down").exists()

    def _faults(self, now: float) -> None:
        if self.faults is None:
            return
        for d in self.deps.values():
            f = self.faults / f"gw-cooldown-{d.model_id}"
            if f.exists():
                f.unlink(missing_ok=True)
                d.cooled_until = now + COOLDOWN_S

    # -- traffic -----------------------------------------------------------------
    def _user(self) -> str:
        x, acc = self.rng.random(), 0.0
        for name, _team, share in USERS:
            acc += share
            if x < acc:
                return name
        return USERS[-1][0]

    def _team(self, user: str) -> str:
        return next((t for n, t, _ in USERS if n == user), "None")

    def _count(self, d: Deployment, user: str, tokens: float, latency: float) -> None:
        k = (d.model_id, user)
        self.user_created.setdefault(k, time.time())
        self.user_requests[k] = self.user_requests.get(k, 0.0) + 1
        self.user_tokens[k] = self.user_tokens.get(k, 0.0) + tokens
        self.user_spend[k] = self.user_spend.get(k, 0.0) + tokens * PRICE_PER_TOKEN
        over = self.rng.uniform(0.004, 0.03)
        self.api_lat.setdefault(k, Hist()).observe(latency)
        self.total_lat.setdefault(k, Hist()).observe(latency + over)
        self.overhead.setdefault(d.model_id, Hist()).observe(over)
        d.requests += 1

    def _fail(self, d: Deployment, user: str, status: str, now: float) -> None:
        d.requests += 1
        d.failures[status] = d.failures.get(status, 0.0) + 1
        self.user_created.setdefault((d.model_id, user), time.time())
        self.user_requests[(d.model_id, user)] = self.user_requests.get(
            (d.model_id, user), 0.0) + 1
        d.state = 2.0
        if now >= d.cooled_until:
            return
        if now - d.last_cooldown >= COOLDOWN_EVERY_S:
            d.cooldowns += 1
            d.last_cooldown = now
        other = next((g for g in self.by_group if g != d.group), None)
        if other is not None:  # the router retries on the fallback model group
            k = (d.group, other)
            self.fallbacks[k] = self.fallbacks.get(k, 0.0) + 1

    async def _slot_counters(self, port: int) -> dict[str, float] | None:
        try:
            answer = await self.client.get(f"http://127.0.0.1:{port}/metrics", timeout=2.0)
        except HttpError:
            return None
        if answer.status_code != 200:
            return None
        body = answer.text
        want = {"vllm:request_success_total": "n", "vllm:prompt_tokens_total": "tok",
                "vllm:generation_tokens_total": "tok",
                "vllm:e2e_request_latency_seconds_sum": "lat",
                "vllm:e2e_request_latency_seconds_count": "lat_n"}
        out = dict.fromkeys(want.values(), 0.0)
        for text in body.splitlines():
            name = text.split("{", 1)[0].split(" ", 1)[0]
            if name in want:
                try:
                    out[want[name]] += float(text.rsplit(" ", 1)[1])
                except ValueError:
                    continue
        return out

    async def tick(self, dt: float) -> None:
        now = time.time()
        self._faults(now)
        quiet = self.faults is not None and (self.faults / "quiet").exists()
        for d in self.deps.values():
            cur = await self._slot_counters(d.port)
            prev, d.seen = d.seen, cur
            d.answered = d.answered or cur is not None
            if cur is None and d.answered:
                # the slot is gone: what the router sends it fails
                lam = 0.0 if quiet else self.rate * dt
                for _ in range(self._poisson(lam)):
                    self._fail(d, self._user(), "500", now)
                continue
            if prev is None or cur is None:
                continue
            n = max(0, round(cur["n"] - prev["n"]))
            if n == 0:
                continue
            tokens = max(0.0, cur["tok"] - prev["tok"]) / n
            dn = cur["lat_n"] - prev["lat_n"]
            mean = (cur["lat"] - prev["lat"]) / dn if dn > 0 else 1.0
            pending = self.routed.get(d.model_id, [])
            for i in range(n):
                user = pending.pop(0) if pending else self._user()
                if now < d.cooled_until and i % 2 == 0:
                    self._fail(d, user, "500", now)  # half its calls fail while cooled
                    continue
                self._count(d, user, round(tokens), max(0.01, mean * self.rng.uniform(0.6, 1.4)))
                if now >= d.cooled_until:
                    d.state = 0.0  # a success clears the outage (LiteLLM's rule)

    def _poisson(self, lam: float) -> int:
        k, p, limit = 0, 1.0, math.exp(-lam)
        while True:
            p *= self.rng.random()
            if p <= limit:
                return k
            k += 1

    # -- exposition --------------------------------------------------------------
    def exposition(self) -> str:
        out: list[str] = []

        def fam(name: str, kind: str, help_: str) -> None:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} {kind}")

        def hist(name: str, help_: str, series: list[tuple[dict[str, str], Hist]]) -> None:
            fam(name, "histogram", help_)
            for labels, h in series:
                cum = 0.0
                for b, c in zip((*LAT_BUCKETS, math.inf), h.counts, strict=True):
                    cum += c
                    out.append(f"{name}_bucket{{{_labels({**labels, 'le': _num(b)})}}} "
                               f"{_num(cum)}")
                out.append(f"{name}_count{{{_labels(labels)}}} {_num(h.n)}")
                out.append(f"{name}_sum{{{_labels(labels)}}} {_num(h.total)}")

        key = {"api_key_alias": "None", "hashed_api_key": HASHED_KEY, "team": "None",
               "team_alias": "None"}
        fam("process_start_time_seconds", "gauge", "Start time of the process since unix "
            "epoch in seconds.")
        out.append(f"process_start_time_seconds {_num(self.created)}")

        def user_labels(mid: str, user: str, model: bool = True,
                        email: bool = True) -> dict[str, str]:
            """A user's series as LiteLLM 1.100 labels each family: the request counter
            has no ``model``, the latency histograms no ``user_email``."""
            d = self.deps[mid]
            out = {**key, "api_provider": "openai", "end_user": user, "model": d.group,
                   "model_id": mid, "org_alias": "None", "org_id": "None",
                   "requested_model": d.group, "team_alias": self._team(user),
                   "user": "default_user_id", "user_email": "None"}
            if not model:
                del out["model"]
            if not email:
                del out["user_email"]
            return out

        for base, help_, values, model in (
                ("litellm_proxy_total_requests_metric", "Total number of requests made to "
                 "the proxy server - track number of client side requests", self.user_requests,
                 False),
                ("litellm_total_tokens_metric", "Total number of input + output tokens from "
                 "LLM requests", self.user_tokens, True),
                ("litellm_spend_metric", "Total spend on LLM requests", self.user_spend, True)):
            fam(f"{base}_total", "counter", help_)
            for (mid, user), v in sorted(values.items()):
                sel = _labels(user_labels(mid, user, model))
                out.append(f"{base}_total{{{sel}}} {_num(v)}")
            fam(f"{base}_created", "gauge", help_)
            for (mid, user) in sorted(values):
                sel = _labels(user_labels(mid, user, model))
                out.append(f"{base}_created{{{sel}}} {_num(self.user_created[(mid, user)])}")
        hist("litellm_request_total_latency_metric", "End-to-end latency (seconds) for a "
             "request to LiteLLM Proxy Server",
             [(user_labels(m, u, email=False), h)
              for (m, u), h in sorted(self.total_lat.items())])
        hist("litellm_llm_api_latency_metric", "Total latency (seconds) for a models LLM API "
             "call", [(user_labels(m, u, email=False), h)
                      for (m, u), h in sorted(self.api_lat.items())])

        def dep_labels(d: Deployment, **extra: str) -> dict[str, str]:
            return {"api_base": d.api_base, "api_provider": "openai",
                    "litellm_model_name": d.group, "model_id": d.model_id, **extra}

        deps = sorted(self.deps.values(), key=lambda d: d.model_id)
        fam("litellm_deployment_state", "gauge", "LLM Deployment Analytics - The state of "
            "the deployment: 0 = healthy, 1 = partial outage, 2 = complete outage")
        for d in deps:
            out.append(f"litellm_deployment_state{{{_labels(dep_labels(d))}}} {_num(d.state)}")
        fam("litellm_deployment_total_requests_total", "counter", "LLM Deployment Analytics - "
            "Total number of LLM API calls via litellm - success + failure")
        for d in deps:
            lab = dep_labels(d, requested_model=d.group, **key)
            out.append(f"litellm_deployment_total_requests_total{{{_labels(lab)}}} "
                       f"{_num(d.requests)}")
        fam("litellm_deployment_failure_responses_total", "counter", "LLM Deployment "
            "Analytics - Total number of failed LLM API calls for a specific LLM deployment")
        for d in deps:
            for status, v in sorted(d.failures.items()):
                lab = dep_labels(d, requested_model=d.group, exception_status=status,
                                 exception_class="Openai.InternalServerError", **key)
                out.append(f"litellm_deployment_failure_responses_total{{{_labels(lab)}}} "
                           f"{_num(v)}")
        fam("litellm_deployment_cooled_down_total", "counter", "LLM Deployment Analytics - "
            "Number of times a deployment has been cooled down by LiteLLM load balancing "
            "logic.")
        for d in deps:
            if d.cooldowns:
                lab = dep_labels(d, exception_status="500")
                out.append(f"litellm_deployment_cooled_down_total{{{_labels(lab)}}} "
                           f"{_num(d.cooldowns)}")
        fam("litellm_deployment_successful_fallbacks_total", "counter", "LLM Deployment "
            "Analytics - Number of successful fallback requests from primary model -> "
            "fallback model")
        for (src, dst), v in sorted(self.fallbacks.items()):
            lab = {**key, "exception_class": "Openai.InternalServerError",
                   "exception_status": "500", "fallback_model": dst, "model_id": "None",
                   "requested_model": src}
            out.append(f"litellm_deployment_successful_fallbacks_total{{{_labels(lab)}}} "
                       f"{_num(v)}")
        hist("litellm_overhead_latency_metric", "Latency overhead (milliseconds) added by "
             "LiteLLM processing", [({"api_key_alias": "None", "hashed_api_key": HASHED_KEY,
                                      "api_base": self.deps[m].api_base,
                                      "api_provider": "openai",
                                      "litellm_model_name": self.deps[m].group,
                                      "model_group": self.deps[m].group, "model_id": m}, h)
                                     for m, h in sorted(self.overhead.items())])
        return "\n".join(out) + "\n"

    # -- routing -----------------------------------------------------------------
    def models(self) -> bytes:
        names = sorted({*self.by_group, *self.aliases})
        return json.dumps({"object": "list", "data": [
            {"id": n, "object": "model", "owned_by": "openai"} for n in names]}).encode()

    def route(self, model: object) -> Deployment | None:
        if not isinstance(model, str):
            return None
        return self.by_group.get(self.aliases.get(model, model))


def _error(status: int, message: str, **more: str) -> Reply:
    return Reply(status, json.dumps({"error": {"message": message, **more}}).encode())


async def _relay(gw: Gateway, req: dict, upstream: httpx.AsyncClient) -> Reply | Streamed:
    """One chat completion to the deployment of its model group, its answer passed back
    as the slot sends it, chunk by chunk (a stream's events as they are decoded)."""
    import httpx

    d = gw.route(req.get("model"))
    if d is None:
        return _error(400, f"Invalid model name passed in model={req.get('model')}",
                      type="invalid_request_error", param="model", code="400")
    user = req.get("user")
    gw.routed.setdefault(d.model_id, []).append(
        user if isinstance(user, str) and user else gw._user())
    try:
        answer = await upstream.send(upstream.build_request(
            "POST", f"http://127.0.0.1:{d.port}/v1/chat/completions",
            json={**req, "model": d.group}), stream=True)
    except httpx.TransportError:
        gw._fail(d, gw.routed[d.model_id].pop(), "500", time.time())
        return _error(500, f"litellm.InternalServerError: cannot reach {d.api_base}",
                      code="500")

    async def chunks() -> AsyncIterator[bytes]:
        try:
            async for part in answer.aiter_raw():
                yield part
        finally:
            await answer.aclose()
    return Streamed(answer.status_code, chunks(),
                    answer.headers.get("content-type", "application/json"))


async def serve(gw: Gateway, port: int) -> None:
    import httpx  # the relay's client: imported by the process that serves, not by tests

    # a slot's first token can take a while (a long prefill); reaching it may not
    upstream = httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=5.0), trust_env=False)

    async def handle(request: Request) -> Reply | Streamed | None:
        if gw.down():
            return None  # no answer at all: the connection closes
        path = request.path
        if path == "/metrics":  # LiteLLM's mount: the console follows the redirect
            return Reply(307, headers=(("location", "/metrics/"),))
        if path == "/metrics/":
            return Reply(200, gw.exposition().encode(),
                         "text/plain; version=0.0.4; charset=utf-8")
        if path == "/health/liveliness":
            return Reply(200, b'"I\'m alive!"')
        if path == "/health/readiness":
            return Reply(200, json.dumps({"status": "healthy", "db": "Not connected",
                                          "litellm_version": "1.100.0 (simulated)"}).encode())
        if path == "/v1/models":
            return Reply(200, gw.models())
        if path == "/v1/chat/completions":
            try:
                req = json.loads(request.body or b"{}")
            except ValueError:
                req = None
            if not isinstance(req, dict):
                return Reply(400, b'{"error":"bad body"}')
            return await _relay(gw, req, upstream)
        return Reply(404, b'{"detail":"Not Found"}')

    server = await start(handle, port)
    print(f"LiteLLM (simulated) on http://127.0.0.1:{port}", flush=True)
    last = time.time()
    try:
        async with server:
            while True:
                await asyncio.sleep(TICK_S)
                now = time.time()
                await gw.tick(now - last)
                last = now
    finally:
        await upstream.aclose()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fake_litellm")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--routes", required=True,
                    help='JSON: [[model_id, model group, port], ...]')
    ap.add_argument("--aliases", default="{}", help="JSON: alias → model group")
    ap.add_argument("--faults", default=None)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rate", type=float, default=0.6)
    args = ap.parse_args(argv)
    deps = [Deployment(str(m), str(g), int(p)) for m, g, p in json.loads(args.routes)]
    gw = Gateway(deps, json.loads(args.aliases), Path(args.faults) if args.faults else None,
                 args.seed, args.rate)
    try:
        asyncio.run(serve(gw, args.port))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
