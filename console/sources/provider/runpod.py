"""RunPod REST v2 client (httpx) with the error taxonomy provisioning decides on.

Taxonomy (from RunPod's own retry table and the field's experience):

* ``CapacityError`` — sold out on create (HTTP 400 "no longer any instances
  available…"), or "not enough free GPUs on the host machine" on resume: try
  elsewhere;
* ``TransientError`` — 5xx, 429 (honouring ``Retry-After``), timeouts and
  connection errors: retried here with backoff before surfacing;
* ``FatalError`` — 401/402/403 and 400/422 request errors: stop at once;
* ``ConflictError`` — 409, the action is not valid for the pod's state.

The API key is sent as a bearer header and never appears in messages, logs or
``repr``. ``allowedCudaVersions`` is deliberately never sent: it is an
exact-match list and silently excludes newer hosts; the driver is checked on
the host instead.
"""

from __future__ import annotations

import asyncio
import builtins
import os
import random
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from console.sources.provider.base import (
    CapacityError,
    ConflictError,
    FatalError,
    Machine,
    MachineSpec,
    NotFoundError,
    ProviderError,
    TransientError,
    UnknownOutcomeError,
    sane_cost,
)

__all__ = ["CapacityError", "ConflictError", "CreateSpec", "FatalError", "NotFoundError",
           "Pod", "RunPodClient", "RunPodError", "TransientError", "UnknownOutcomeError"]

DEFAULT_BASE = "https://api.runpod.io/v2"
CAPACITY_MARKERS = ("no longer any instances", "not enough free gpus",
                    "does not have the resources", "no instances currently available")


RunPodError = ProviderError
"""RunPod's failures are the neutral taxonomy (``provider/base.py``)."""


class PortMapping(BaseModel):
    model_config = ConfigDict(extra="ignore")
    private: int
    public: int | None = None
    type: str = "tcp"
    ip: str | None = None


class Runtime(BaseModel):
    model_config = ConfigDict(extra="ignore")
    uptime: float | None = None
    ports: list[PortMapping] = Field(default_factory=list)


class SshDirect(BaseModel):
    model_config = ConfigDict(extra="ignore")
    host: str | None = None
    port: int | None = None
    username: str | None = None


class Ssh(BaseModel):
    model_config = ConfigDict(extra="ignore")
    direct: SshDirect | None = None


class GpuSpec(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str | None = None
    count: int = 0


class Pod(BaseModel):
    """What we read of a v2 pod; unknown fields are ignored, missing ones defaulted."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    id: str
    name: str = ""
    status: str = "UNKNOWN"
    actions: list[str] = Field(default_factory=list)
    image: str | None = None
    gpu: GpuSpec | None = None
    dataCenterId: str | None = None
    cudaVersion: str | None = None
    cost: float | None = None
    createdAt: str | None = None
    startedAt: str | None = None
    ssh: Ssh | None = None
    runtime: Runtime | None = None

    @field_validator("cost", mode="before")
    @classmethod
    def _price(cls, v: Any) -> float | None:
        """NaN, a negative or an absurd $/h is no price: unknown (``base.sane_cost``)."""
        return sane_cost(v)

    @property
    def ssh_endpoint(self) -> tuple[str, int] | None:
        d = self.ssh.direct if self.ssh else None
        if d and d.host and d.port:
            return d.host, d.port
        if self.runtime:
            for p in self.runtime.ports:
                if p.private == 22 and p.public and p.ip:
                    return p.ip, p.public
        return None

    def public_port(self, private: int) -> int | None:
        if self.runtime:
            for p in self.runtime.ports:
                if p.private == private and p.public:
                    return p.public
        return None

    def machine(self) -> Machine:
        """The neutral record provisioning works with."""
        ports = {p.private: p.public for p in (self.runtime.ports if self.runtime else [])
                 if p.public and p.private != 22}
        return Machine(id=self.id, name=self.name, status=self.status,
                       gpu_type=self.gpu.id if self.gpu else None,
                       gpu_count=self.gpu.count if self.gpu else 0, cost_per_hr=self.cost,
                       cuda=self.cudaVersion, started_at=self.startedAt,
                       ssh_endpoint=self.ssh_endpoint, ports=ports)


class CreateSpec(MachineSpec, frozen=True):
    """A :class:`MachineSpec` as RunPod's v2 create body."""

    @staticmethod
    def body_of(spec: MachineSpec) -> dict[str, Any]:
        # no allowedCudaVersions / minCudaVersion on purpose: see the module docstring
        return {"name": spec.name, "image": spec.image,
                "gpu": {"id": spec.gpu_type_id, "count": spec.gpu_count},
                "cloud": spec.cloud, "disk": spec.disk_gb, "ports": list(spec.ports),
                "env": dict(spec.env), "startSsh": True,
                "mounts": {"persistent": {"size": spec.volume_gb, "path": "/workspace"}}}

    def body(self) -> dict[str, Any]:
        return self.body_of(self)


def _detail(r: httpx.Response) -> str:
    try:
        body = r.json()
    except ValueError:
        return (r.text or r.reason_phrase or "")[:300]
    if isinstance(body, dict):
        parts = [str(body.get(k)) for k in ("detail", "message", "error") if body.get(k)]
        errs = body.get("errors")
        if isinstance(errs, list):
            parts += [str(e) for e in errs[:3]]
        return "; ".join(parts)[:300] or str(body)[:300]
    return str(body)[:300]


def retry_after_s(value: str | None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    import email.utils
    from datetime import UTC, datetime

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def classify(r: httpx.Response, on_resume: bool = False) -> RunPodError:
    detail = _detail(r)
    low = detail.lower()
    s = r.status_code
    if any(m in low for m in CAPACITY_MARKERS):
        return CapacityError(detail, s)
    if s == 429:
        return TransientError(f"rate limited: {detail}", s)
    if s >= 500 or "something went wrong" in low:
        return TransientError(f"HTTP {s}: {detail}", s)
    if s == 409:
        return ConflictError(detail or "action not valid for the pod's state", s)
    if s == 404:
        return NotFoundError(detail or "not found", s)
    return FatalError(f"HTTP {s}: {detail}", s)


Sleeper = Callable[[float], Awaitable[None]]

RETRIES = 4
"""Transient failures retried before one surfaces (backoff 2, 4, 8, 16 s: ~30 s)."""
MAX_RETRIES = 10


def retries_from_env() -> int:
    """``RUNPOD_API_RETRIES`` (beside ``RUNPOD_API_BASE``), else ``RETRIES``. 0 surfaces the
    first transient failure at once: what a test that does not test retries wants, and a
    script that does its own. ValueError says what is accepted."""
    raw = os.environ.get("RUNPOD_API_RETRIES", "").strip()
    if not raw:
        return RETRIES
    if not raw.isdigit() or int(raw) > MAX_RETRIES:
        raise ValueError(f"RUNPOD_API_RETRIES must be a whole number from 0 to {MAX_RETRIES}, "
                         f"got {raw[:20]!r}")
    return int(raw)


class RunPodClient:
    """Async REST v2 client, and the RunPod :class:`~console.sources.provider.base.Provider`.

    ``get_pod``/``create_pod``/… answer RunPod's own :class:`Pod`; ``get``/``create``/…
    (the protocol) answer neutral :class:`Machine` records. ``sleep`` is injectable so
    tests skip real waiting."""

    name = "runpod"

    def __init__(self, api_key: SecretStr | str, base_url: str | None = None, *,
                 timeout_s: float = 20.0, retries: int | None = None,
                 sleep: Sleeper = asyncio.sleep,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        key = api_key if isinstance(api_key, SecretStr) else SecretStr(api_key)
        self._key = key
        self.base_url = (base_url or os.environ.get("RUNPOD_API_BASE") or DEFAULT_BASE).rstrip("/")
        self.retries = retries_from_env() if retries is None else retries
        """Transient failures retried before one surfaces (None: ``retries_from_env``)."""
        self.sleep = sleep
        self._client = httpx.AsyncClient(timeout=timeout_s, transport=transport,
                                         trust_env=False)

    def __repr__(self) -> str:
        return f"RunPodClient(base_url={self.base_url!r}, key=**********)"

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _request(self, method: str, path: str, *, json: Any = None,
                       retry: bool = True, on_resume: bool = False) -> httpx.Response:
        attempt = 0
        while True:
            try:
                r = await self._client.request(
                    method, self.base_url + path, json=json,
                    headers={"Authorization": f"Bearer {self._key.get_secret_value()}"})
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                # a refused connection never reached RunPod; anything later might have
                sent = not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
                err: RunPodError = TransientError(f"{type(exc).__name__}: {exc}"[:200],
                                                  sent=sent)
                wait = None
            else:
                if r.status_code < 400:
                    return r
                err = classify(r, on_resume)
                wait = None
                if r.status_code == 429:
                    wait = retry_after_s(r.headers.get("Retry-After"))
                    if wait is not None:
                        wait = min(wait, 300.0)
            # 429 means "not processed": always safe to repeat after Retry-After. A 5xx or
            # a timeout may hide a success, so callers can ask not to repeat those.
            rate_limited = err.status == 429
            if (not isinstance(err, TransientError) or attempt >= self.retries
                    or not (retry or rate_limited)):
                raise err
            attempt += 1
            delay = wait if wait is not None else min(30.0, 2 ** attempt) * (
                0.75 + random.random() / 2)
            await self.sleep(delay)

    @staticmethod
    def _body(r: httpx.Response) -> Any:
        """The JSON of a 2xx reply; an HTML page from a proxy or a cut body is transient."""
        try:
            return r.json()
        except ValueError:
            raise TransientError(f"unreadable reply (HTTP {r.status_code}, "
                                 f"{len(r.content)} bytes)", r.status_code) from None

    @classmethod
    def _pod(cls, r: httpx.Response) -> Pod:
        try:
            return Pod.model_validate(cls._body(r))
        except ValidationError:
            raise TransientError(f"reply is not a pod (HTTP {r.status_code})",
                                 r.status_code) from None

    async def get_pod(self, pod_id: str) -> Pod:
        return self._pod(await self._request("GET", f"/pods/{pod_id}"))

    async def list_pods(self) -> list[Pod]:
        body = self._body(await self._request("GET", "/pods"))
        items = body.get("pods", []) if isinstance(body, dict) else body
        if not isinstance(items, list):
            raise TransientError("pod list reply is not a list")
        out = []
        for p in items:
            try:
                out.append(Pod.model_validate(p))
            except ValidationError:
                raise TransientError("pod list holds an entry that is not a pod") from None
        return out

    async def find_pods_by_name(self, name: str) -> list[Pod]:
        return [p for p in await self.list_pods() if p.name == name]

    async def create_pod(self, spec: MachineSpec) -> Pod:
        """Create once, never twice. A create can succeed behind a 5xx, a timeout or an
        unreadable reply: then the pod is looked up by its (unique) name; if that lookup
        fails too the outcome is unknown and :class:`UnknownOutcomeError` says so."""
        try:
            r = await self._request("POST", "/pods", json=CreateSpec.body_of(spec),
                                    retry=False)
        except TransientError as exc:
            if not exc.sent:
                raise  # never reached RunPod: nothing was created
            return await self._resolve_create(spec.name, exc.message)
        try:
            return self._pod(r)
        except TransientError as exc:
            return await self._resolve_create(spec.name, exc.message)

    async def _resolve_create(self, name: str, why: str) -> Pod:
        try:
            found = [p for p in await self.find_pods_by_name(name)
                     if p.status != "TERMINATED"]
        except RunPodError as exc:
            raise UnknownOutcomeError(
                f"a create of pod {name!r} may have succeeded ({why}) and looking it up "
                f"failed ({exc.message})", name) from None
        if found:
            return found[0]
        raise TransientError(f"{why}; no pod named {name!r} exists: none was created",
                             sent=False)

    async def action(self, pod_id: str, action: str, retry: bool = True) -> Pod | None:
        r = await self._request("POST", f"/pods/{pod_id}/action", json={"action": action},
                                on_resume=action == "start", retry=retry)
        if r.status_code == 204 or not r.content:
            return None
        try:
            return self._pod(r)
        except TransientError:
            return None  # the action was accepted; the caller reads the pod again

    async def start(self, pod_id: str) -> Machine | None:
        """Sent once: a start that 5xx'd may have started the pod (the caller stops it)."""
        pod = await self.action(pod_id, "start", retry=False)
        return pod.machine() if pod else None

    async def stop(self, pod_id: str) -> Machine | None:
        pod = await self.action(pod_id, "stop")
        return pod.machine() if pod else None

    async def terminate(self, pod_id: str) -> None:
        try:
            await self._request("DELETE", f"/pods/{pod_id}")
        except NotFoundError:
            return  # already gone: what we wanted

    async def gpu_availability(self) -> dict[str, str]:
        """GPU type id → ``HIGH``/``MEDIUM``/``LOW``/``NONE`` (a hint, not a reservation)."""
        body = self._body(await self._request(
            "GET", "/catalog/gpus?include=AVAILABILITY&product=POD"))
        items = body.get("gpus", body) if isinstance(body, dict) else body
        out = {}
        for g in items if isinstance(items, list) else []:
            if isinstance(g, dict) and g.get("id"):
                out[str(g["id"])] = str(g.get("availability", "UNKNOWN"))
        return out

    # -- the Provider protocol ------------------------------------------------------
    async def get(self, machine_id: str) -> Machine:
        return (await self.get_pod(machine_id)).machine()

    async def list(self) -> list[Machine]:
        return [p.machine() for p in await self.list_pods()]

    # builtins.list: inside this class, ``list`` names the method above
    async def find_by_name(self, name: str) -> builtins.list[Machine]:
        return [p.machine() for p in await self.list_pods() if p.name == name]

    async def create(self, spec: MachineSpec) -> Machine:
        return (await self.create_pod(spec)).machine()

    async def availability(self) -> dict[str, str]:
        return await self.gpu_availability()
