"""A RunPod REST v2 emulator for the demo and the tests (RunPod cannot be reached from here).

It answers with the documented shapes, status codes and error texts
(problem+json bodies; 400 "There are no longer any instances available…" when
sold out; 409 "Action not valid for current pod status"; 429 with
``Retry-After``; 401 without the right bearer key). Scenarios are scripted
through :class:`EmulatorState`. A created pod can be backed by a real host
(``host_factory``): in tests, an SSH server on loopback running the real agent.
"""

from __future__ import annotations

import datetime as dt
import itertools
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from msgspec import Struct, field
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

SOLD_OUT = ("There are no longer any instances available with the requested specifications. "
            "Please refresh and try again.")
NO_FREE_GPUS = "There are not enough free GPUs on the host machine to start this pod."
ALLOWED = {"RUNNING": ["stop", "restart", "terminate"], "EXITED": ["start", "terminate"],
           "ERROR": ["start", "terminate"], "PROVISIONING": ["stop", "terminate"],
           "STARTING": ["stop", "terminate"], "TERMINATED": []}
PRICES = {"NVIDIA RTX PRO 6000 Blackwell Server Edition": 2.09,
          "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": 2.09,
          "NVIDIA H100 80GB HBM3": 3.29, "NVIDIA H100 NVL": 3.07, "NVIDIA H100 PCIe": 2.39,
          "NVIDIA A100-SXM4-80GB": 1.74, "NVIDIA A100 80GB PCIe": 1.64}


class HostInfo(Struct):
    """Where an emulated pod's SSH answers, and a handle to stop that host."""

    ssh_host: str
    ssh_port: int
    cuda: str
    ports: dict[int, int] = field(default_factory=dict)
    stop: Callable[[], None] | None = None


class EmulatorState(Struct):
    api_key: str = "rp-test-key"
    stock: dict[str, int] = field(default_factory=dict)
    """GPU type id → GPUs free; a create takes ``count`` of them."""
    restock_after_creates: int | None = None
    """After this many sold-out answers, every type gets ``restock`` GPUs."""
    restock: int = 8
    host_cudas: deque[str] = field(default_factory=lambda: deque(["13.0"]))
    """CUDA version of each new host, in order (the last one repeats)."""
    resume_capacity: bool = True
    fail_terminate: int = 0
    """The next N terminate calls answer 500 (and do nothing)."""
    create_5xx_after_create: int = 0
    """The next N creates make the pod and then answer 500 (RunPod's known bug)."""
    create_garbage_after_create: int = 0
    """The next N creates make the pod and then answer 201 with a proxy's HTML page."""
    create_truncated_after_create: int = 0
    """The next N creates make the pod and answer 201 with the JSON cut in half."""
    create_hang_after_create_s: float = 0.0
    """Creates make the pod, then answer only after this many seconds (a hang)."""
    start_5xx_after_start: int = 0
    """The next N starts start the pod and then answer 500."""
    outage: set[str] = field(default_factory=set)
    """``"METHOD /v2/path-prefix"`` entries answered 500 before anything is done."""
    rate_limit_next: int = 0
    retry_after_s: int = 2
    hang: dict[str, float] = field(default_factory=dict)
    """``"METHOD /v2/path-prefix"`` → seconds such a request waits before anything is done
    (an API that hangs: a client's timeout, or a signal, ends the wait first)."""
    cost_text: str | None = None
    """When set, the JSON text every pod's ``cost`` is given as in GET answers (``NaN``,
    ``-3``, ``1e400``: a broken answer the client must refuse)."""
    host_factory: Callable[[dict[str, Any]], HostInfo] | None = None
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    hosts: dict[str, HostInfo] = field(default_factory=dict)
    log: list[tuple[str, str, int]] = field(default_factory=list)
    sold_out_answers: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock)
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    def running_pods(self) -> list[dict[str, Any]]:
        """Pods that bill: anything not stopped or terminated."""
        return [p for p in self.pods.values()
                if p["status"] in ("RUNNING", "STARTING", "PROVISIONING")]

    def add_stopped_pod(self, name: str, gpu_type: str, count: int = 2,
                        cuda: str = "13.0") -> str:
        with self.lock:
            pid = self._new_id()
            self.pods[pid] = self._pod(pid, name, "vllm/vllm-openai:latest", gpu_type, count,
                                       cuda, status="EXITED")
            return pid

    def _new_id(self) -> str:
        return f"emu{next(self._ids):04d}x{int(time.time()) % 10000:04d}"

    def _pod(self, pid: str, name: str, image: str, gpu: str, count: int, cuda: str,
             status: str = "RUNNING") -> dict[str, Any]:
        now = dt.datetime.now(dt.UTC).isoformat()
        return {"id": pid, "name": name, "status": status, "actions": ALLOWED[status],
                "image": image, "gpu": {"id": gpu, "count": count}, "cloud": "SECURE",
                "dataCenterId": "EU-RO-1", "cudaVersion": cuda,
                "cost": round(PRICES.get(gpu, 2.0) * count, 2) if status == "RUNNING" else 0.0,
                "createdAt": now, "startedAt": now if status == "RUNNING" else None,
                "ssh": None, "runtime": None, "env": {}, "ports": ["22/tcp"]}

    def set_status(self, pod: dict[str, Any], status: str) -> None:
        pod["status"] = status
        pod["actions"] = ALLOWED[status]
        if status != "RUNNING":
            pod["cost"] = 0.0
            pod["runtime"] = None
        else:
            pod["cost"] = round(PRICES.get(pod["gpu"]["id"], 2.0) * pod["gpu"]["count"], 2)


def _problem(status: int, title: str, detail: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"title": title, "status": status, "detail": detail, **extra},
                        status_code=status, media_type="application/problem+json")


def make_app(state: EmulatorState) -> Starlette:
    async def stall(request: Request) -> None:
        for entry, wait_s in list(state.hang.items()):
            method, _, prefix = entry.partition(" ")
            if request.method == method and request.url.path.startswith(prefix):
                import asyncio

                await asyncio.sleep(wait_s)
                return

    def pods_json(body: Any, status: int = 200) -> Response:
        if state.cost_text is None:
            return JSONResponse(body, status_code=status)
        import json as _json

        def marked(p: dict[str, Any]) -> dict[str, Any]:
            return {**p, "cost": "@@COST@@"}

        data = ({"pods": [marked(p) for p in body["pods"]]} if "pods" in body
                else marked(body))
        text = _json.dumps(data).replace('"@@COST@@"', state.cost_text)
        return Response(text, status_code=status, media_type="application/json")

    def guard(request: Request) -> Response | None:
        auth = request.headers.get("authorization", "")
        if not auth.startswith("Bearer "):
            return _problem(401, "Unauthorized", "missing bearer token")
        if auth[len("Bearer "):] != state.api_key:
            return _problem(401, "Unauthorized", "invalid api key")
        for entry in state.outage:
            method, _, prefix = entry.partition(" ")
            if request.method == method and request.url.path.startswith(prefix):
                state.log.append((request.method, request.url.path, 500))
                return _problem(500, "Internal Server Error", "Something went wrong. Please "
                                "try again later or contact support.")
        if state.rate_limit_next > 0:
            state.rate_limit_next -= 1
            r = _problem(429, "Too Many Requests", "rate limit exceeded for the minute window")
            r.headers["Retry-After"] = str(state.retry_after_s)
            return r
        return None

    def record(request: Request, status: int) -> None:
        state.log.append((request.method, request.url.path, status))

    def attach_host(pod: dict[str, Any]) -> None:
        if state.host_factory is None:
            return
        host = state.host_factory(pod)
        state.hosts[pod["id"]] = host
        pod["cudaVersion"] = host.cuda
        pod["ssh"] = {"direct": {"host": host.ssh_host, "port": host.ssh_port,
                                 "username": "root"}}
        pod["runtime"] = {"uptime": 0, "ports": [
            {"private": 22, "public": host.ssh_port, "type": "tcp", "ip": host.ssh_host},
            *({"private": k, "public": v, "type": "tcp", "ip": host.ssh_host}
              for k, v in host.ports.items())]}

    def detach_host(pid: str) -> None:
        host = state.hosts.pop(pid, None)
        if host and host.stop:
            # The host goes down after we answer, as on RunPod: the caller may be the
            # pod's own agent, waiting for this very response.
            threading.Thread(target=host.stop, daemon=True).start()

    async def list_pods(request: Request) -> Response:
        if (g := guard(request)) is not None:
            return g
        with state.lock:
            pods = [p for p in state.pods.values() if p["status"] != "TERMINATED"]
        record(request, 200)
        return pods_json({"pods": pods})

    async def get_pod(request: Request) -> Response:
        if (g := guard(request)) is not None:
            return g
        pod = state.pods.get(request.path_params["id"])
        if pod is None or pod["status"] == "TERMINATED":
            record(request, 404)
            return _problem(404, "Not Found", "resource not found")
        record(request, 200)
        return pods_json(pod)

    async def create_pod(request: Request) -> Response:
        if (g := guard(request)) is not None:
            return g
        try:
            body = await request.json()
        except ValueError:
            return _problem(400, "Bad Request", "invalid JSON")
        allowed_keys = {"name", "image", "gpu", "cloud", "disk", "ports", "env", "startSsh",
                        "mounts", "dataCenterIds", "args", "templateId", "globalNetworking"}
        stray = sorted(set(body) - allowed_keys)
        if stray:
            record(request, 422)
            return _problem(422, "Unprocessable Entity", "Request validation failed.",
                            errors=[f"$.{k}: unevaluated property" for k in stray])
        gpu = body.get("gpu") or {}
        if "allowedCudaVersions" in gpu and "minCudaVersion" in gpu:
            return _problem(400, "Bad Request", "allowedCudaVersions and minCudaVersion are "
                                                "mutually exclusive")
        if not body.get("name") or not body.get("image") or not gpu.get("id"):
            record(request, 422)
            return _problem(422, "Unprocessable Entity", "Request validation failed.",
                            errors=["$.name, $.image and $.gpu.id are required"])
        with state.lock:
            gid, count = str(gpu["id"]), int(gpu.get("count", 1))
            if state.stock.get(gid, 0) < count:
                state.sold_out_answers += 1
                if (state.restock_after_creates is not None
                        and state.sold_out_answers >= state.restock_after_creates):
                    state.stock = dict.fromkeys(state.stock, state.restock)
                record(request, 400)
                return _problem(400, "Bad Request", SOLD_OUT)
            state.stock[gid] -= count
            pid = state._new_id()
            cuda = state.host_cudas[0]
            if len(state.host_cudas) > 1:
                state.host_cudas.popleft()
            pod = state._pod(pid, str(body["name"]), str(body["image"]), gid, count, cuda)
            state.pods[pid] = pod
        attach_host(pod)
        if state.create_hang_after_create_s > 0:
            import asyncio

            await asyncio.sleep(state.create_hang_after_create_s)
        if state.create_garbage_after_create > 0:
            state.create_garbage_after_create -= 1
            record(request, 201)
            return Response("<html><body><h1>502 Bad Gateway</h1>cloudflare</body></html>",
                            status_code=201, media_type="text/html")
        if state.create_truncated_after_create > 0:
            state.create_truncated_after_create -= 1
            record(request, 201)
            import json as _json

            text = _json.dumps(pod)
            return Response(text[:len(text) // 2], status_code=201,
                            media_type="application/json")
        if state.create_5xx_after_create > 0:
            state.create_5xx_after_create -= 1
            record(request, 500)
            return _problem(500, "Internal Server Error",
                            "Something went wrong. Please try again later or contact support.")
        record(request, 201)
        return JSONResponse(pod, status_code=201)

    async def pod_action(request: Request) -> Response:
        if (g := guard(request)) is not None:
            return g
        pid = request.path_params["id"]
        try:
            body = await request.json()
        except ValueError:
            body = {}
        action = body.get("action") if isinstance(body, dict) else None
        if action not in ("start", "stop", "restart", "terminate"):
            record(request, 422)
            return _problem(422, "Unprocessable Entity", "Request validation failed.",
                            errors=["$.action: value must be one of 'start', 'stop', "
                                    "'restart', 'terminate'"])
        with state.lock:
            pod = state.pods.get(pid)
            if pod is None or pod["status"] == "TERMINATED":
                record(request, 404)
                return _problem(404, "Not Found", "resource not found")
            if action not in pod["actions"]:
                record(request, 409)
                return _problem(409, "Conflict", "Action not valid for current pod status")
            if action == "start":
                if not state.resume_capacity:
                    record(request, 400)
                    return _problem(400, "Bad Request", NO_FREE_GPUS)
                state.set_status(pod, "RUNNING")
                pod["startedAt"] = dt.datetime.now(dt.UTC).isoformat()
            elif action == "stop":
                state.set_status(pod, "EXITED")
            elif action == "terminate":
                return _terminate(request, pod)
        if action == "start":
            attach_host(pod)
            if state.start_5xx_after_start > 0:
                state.start_5xx_after_start -= 1
                record(request, 500)
                return _problem(500, "Internal Server Error", "Something went wrong. Please "
                                "try again later or contact support.")
        elif action == "stop":
            detach_host(pid)
        record(request, 200)
        return JSONResponse(pod)

    def _terminate(request: Request, pod: dict[str, Any]) -> Response:
        if state.fail_terminate > 0:
            state.fail_terminate -= 1
            record(request, 500)
            return _problem(500, "Internal Server Error",
                            "Something went wrong. Please try again later or contact support.")
        state.set_status(pod, "TERMINATED")
        detach_host(pod["id"])
        record(request, 204)
        return Response(status_code=204)

    async def delete_pod(request: Request) -> Response:
        if (g := guard(request)) is not None:
            return g
        with state.lock:
            pod = state.pods.get(request.path_params["id"])
            if pod is None or pod["status"] == "TERMINATED":
                record(request, 404)
                return _problem(404, "Not Found", "resource not found")
            return _terminate(request, pod)

    async def catalog(request: Request) -> Response:
        if (g := guard(request)) is not None:
            return g
        def level(n: int) -> str:
            return "HIGH" if n >= 8 else "MEDIUM" if n >= 4 else "LOW" if n > 0 else "NONE"
        return JSONResponse({"gpus": [{"id": k, "availability": level(v)}
                                      for k, v in sorted(state.stock.items())]})

    def stalled(handler: Callable[[Request], Awaitable[Response]]
                ) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            await stall(request)
            return await handler(request)
        return run

    return Starlette(routes=[
        Route("/v2/pods", stalled(list_pods), methods=["GET"]),
        Route("/v2/pods", stalled(create_pod), methods=["POST"]),
        Route("/v2/pods/{id}", stalled(get_pod), methods=["GET"]),
        Route("/v2/pods/{id}", stalled(delete_pod), methods=["DELETE"]),
        Route("/v2/pods/{id}/action", stalled(pod_action), methods=["POST"]),
        Route("/v2/catalog/gpus", stalled(catalog), methods=["GET"]),
    ])


class EmulatorServer:
    """Runs the emulator with uvicorn on a loopback port in a background thread."""

    def __init__(self, state: EmulatorState, port: int = 0) -> None:
        import socket

        self.state = state
        if port == 0:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        self.port = port
        self._thread: threading.Thread | None = None
        self._server: Any = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v2"

    def start(self) -> None:
        import uvicorn

        # a request held by an injected hang (``state.hang``, a create that never
        # answers) is cancelled 1 s into the shutdown: stop() would otherwise wait out
        # its join for a sleep of minutes that nobody is waiting on any more
        config = uvicorn.Config(make_app(self.state), host="127.0.0.1", port=self.port,
                                log_level="error", lifespan="off",
                                timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.time() + 10
        while not self._server.started and time.time() < deadline:
            time.sleep(0.02)

    def stop(self, wait_s: float | None = None) -> None:
        """The server, then every host still up, all at once (a pod's host stop may
        wait on its agent: pods one after another added those waits up); ``wait_s``
        bounds the wait for them (None: until each is done, as before)."""
        if self._server is not None:
            self._server.should_exit = True
        stops = []
        for pid in list(self.state.hosts):
            host = self.state.hosts.pop(pid)
            if host.stop:
                t = threading.Thread(target=host.stop, name=f"stop-host-{pid}", daemon=True)
                t.start()
                stops.append(t)
        if self._thread is not None:
            self._thread.join(5)
        deadline = None if wait_s is None else time.monotonic() + wait_s
        for t in stops:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
