"""``pod-agent exporter``: GPU metrics for Prometheus under dcgm-exporter's names.

Pods have no DCGM, but Grafana's DCGM dashboards are what teams already have: this
serves the same metric names and labels (``DCGM_FI_DEV_GPU_UTIL{gpu, UUID, device,
modelName, pci_bus_id, Hostname}`` …) from NVML, so those dashboards work unchanged.

Metrics only: one path, ``GET /metrics``; nothing here changes anything (control stays on
the agent's Unix socket, reached over SSH), and it is its own process, so the agent
itself still opens no port. An optional bearer token (``--token-file``) is compared in
constant time. The port is the pod's public one: a connection has ``HEADER_TIMEOUT_S``
to send its request, and at most ``MAX_CONNECTIONS`` are served at once (see
``BoundedServer``), so idle or slow connections cannot hold threads without bound.

Memory is NVML's v2 figures (``used`` without the driver's reservation, ``reserved``
apart), in whole MiB rounded down: what dcgm-exporter serves under the same names.

A scrape reads the last sample (taken every ``--interval`` seconds by one thread), so
scrapes cost the same whatever their rate and never touch the GPU.

Where the samples come from: run by ``serve`` it asks the supervisor (``--from-agent``,
the agent's Unix socket) for the sample the supervisor takes anyway, so one process on
the pod holds NVML (the driver library alone costs ~27 MiB of memory per process that
loads it) and the GPUs are read once, not twice. Run by hand, it reads NVML itself.

dcgm-exporter types its error and energy totals ``counter`` although their names do not
end in ``_total``; they are ``untyped`` here so the exposition passes ``promtool check
metrics`` — a type is a hint, ``rate()`` and the dashboards read them the same.
"""

from __future__ import annotations

import contextlib
import hmac
import http.server
import socket
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Tuple

from .gpus import GpuReading, GpuTelemetry, Sampler, Telemetry, XidWatcher

XidLookup = Callable[[int], "int | None"]
"""GPU index → the code of its last Xid (None: none seen)."""

MIB = 1 << 20


def _mib(n: int | None) -> int | None:
    """Bytes as DCGM gives its FB fields: whole MiB, rounded down (DCGM divides NVML's
    v2 figures by 1024 * 1024 in integers; with v1 only, ``reserved`` is unknown and the
    field is left out, as DCGM says "not supported")."""
    return None if n is None else n // MIB


def _ratio(pct: float | None) -> float | None:
    return None if pct is None else round(pct / 100, 6)

# (name, type, help, value from a reading); None values are left out (not supported)
FIELDS: List[Tuple[str, str, str, Callable[[GpuReading], float | None]]] = [
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda r: r.util_gpu_pct),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).",
     lambda r: r.util_mem_pct),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
     lambda r: _mib(r.mem_used_bytes)),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
     lambda r: _mib(r.mem_free_bytes)),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).",
     lambda r: _mib(r.mem_reserved_bytes)),
    ("DCGM_FI_DEV_FB_TOTAL", "gauge", "Framebuffer memory total (in MiB).",
     lambda r: _mib(r.mem_total_bytes)),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda r: r.temp_c),
    ("DCGM_FI_DEV_SLOWDOWN_TEMP", "gauge", "Slowdown temperature threshold (in C).",
     lambda r: r.temp_slowdown_c),
    ("DCGM_FI_DEV_SHUTDOWN_TEMP", "gauge", "Shutdown temperature threshold (in C).",
     lambda r: r.temp_shutdown_c),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda r: r.power_w),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "Power management limit (in W).",
     lambda r: r.power_limit_w),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "untyped",
     "Total energy consumption since boot (in mJ); a counter.", lambda r: r.energy_mj),
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).",
     lambda r: r.sm_clock_mhz),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).",
     lambda r: r.mem_clock_mhz),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge",
     "Current clock throttle reasons (NVML bitmask).", lambda r: r.throttle_mask),
    ("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "PCIe link generation.", lambda r: r.pcie_gen),
    ("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "PCIe link width (lanes).",
     lambda r: r.pcie_width),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "untyped", "PCIe replay counter; a counter.",
     lambda r: r.pcie_replays),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "untyped",
     "Single-bit volatile ECC errors; a counter.", lambda r: r.ecc_sbe_volatile),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "untyped",
     "Double-bit volatile ECC errors; a counter.", lambda r: r.ecc_dbe_volatile),
    ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "untyped",
     "Single-bit persistent ECC errors; a counter.", lambda r: r.ecc_sbe_aggregate),
    ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "untyped",
     "Double-bit persistent ECC errors; a counter.", lambda r: r.ecc_dbe_aggregate),
    ("DCGM_FI_DEV_RETIRED_SBE", "untyped",
     "Pages retired for single-bit errors; a counter.", lambda r: r.retired_sbe),
    ("DCGM_FI_DEV_RETIRED_DBE", "untyped",
     "Pages retired for double-bit errors; a counter.", lambda r: r.retired_dbe),
    ("DCGM_FI_DEV_RETIRED_PENDING", "gauge", "Page retirements pending (1/0).",
     lambda r: None if r.retired_pending is None else float(r.retired_pending)),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "untyped",
     "Rows remapped for correctable errors; a counter.", lambda r: r.remapped_correctable),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "untyped",
     "Rows remapped for uncorrectable errors; a counter.",
     lambda r: r.remapped_uncorrectable),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Row remapping pending (1/0).",
     lambda r: None if r.remap_pending is None else float(r.remap_pending)),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Row remapping failed (1/0).",
     lambda r: None if r.remap_failed is None else float(r.remap_failed)),
    ("DCGM_FI_DEV_NVLINK_LINKS_UP", "gauge", "NVLink links up (not a DCGM field).",
     lambda r: r.nvlink_up),
    # NVML's GPM figures (percent) as dcgm-exporter serves its profiling fields: ratios
    # 0..1; a GPU without GPM has none (left out, as DCGM leaves out what it cannot read)
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge",
     "The ratio of cycles an SM has at least 1 warp assigned.",
     lambda r: _ratio(r.sm_active_pct)),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "gauge",
     "The ratio of number of warps resident on an SM.", lambda r: _ratio(r.sm_occupancy_pct)),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge",
     "Ratio of cycles any tensor pipe is active.", lambda r: _ratio(r.tensor_active_pct)),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
     "Ratio of cycles the device memory interface is active sending or receiving data.",
     lambda r: _ratio(r.dram_active_pct)),
    ("pod_agent_gpm_supported", "gauge",
     "1 when the GPU has NVML's GPM metrics (Hopper on), 0 when not (not a DCGM field).",
     lambda r: None if r.gpm_supported is None else float(r.gpm_supported)),
]


def labels(r: GpuReading, host: str) -> Dict[str, str]:
    return {"gpu": str(r.index), "UUID": r.uuid, "device": f"nvidia{r.index}",
            "modelName": r.name, "pci_bus_id": r.pci_bus_id, "Hostname": host}


class Collector:
    """A prometheus_client collector over the latest telemetry (and Xid events)."""

    def __init__(self, latest: Callable[[], GpuTelemetry], last_xid: XidLookup | None,
                 host: str, watchdog: Callable[[], Dict[str, Any] | None] | None = None
                 ) -> None:
        self.latest = latest
        self.last_xid = last_xid
        self.host = host
        self.watchdog = watchdog

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily, Metric

        tel = self.latest()
        for name, kind, doc, value in FIELDS:
            fam = GaugeMetricFamily(name, doc) if kind == "gauge" else Metric(name, doc,
                                                                             "unknown")
            for r in tel.readings:
                v = value(r)
                if v is not None:
                    fam.add_sample(name, labels(r, self.host), float(v))
            if fam.samples:
                yield fam
        if self.last_xid is not None and tel.readings:
            fam = GaugeMetricFamily("DCGM_FI_DEV_XID_ERRORS",
                                    "Value of the last XID error encountered.")
            for r in tel.readings:
                fam.add_sample("DCGM_FI_DEV_XID_ERRORS", labels(r, self.host),
                               float(self.last_xid(r.index) or 0))
            yield fam
        wd = self.watchdog() if self.watchdog is not None else None
        if wd:
            yield from watchdog_families(wd)
        up = GaugeMetricFamily("pod_agent_gpu_telemetry_up",
                               "1 when the last GPU sample succeeded (source: nvml or "
                               "nvidia-smi).", labels=["source"])
        up.add_metric([tel.source], 0.0 if tel.error else 1.0)
        yield up


def watchdog_families(wd: Dict[str, Any]) -> Iterator[Any]:
    """The pod's stop plan as gauges, for the wall (no SSH) through this endpoint or
    Prometheus: what stops the pod next and in how many seconds (the pod's clock), the
    idle countdown, the extension (who, until when; its reason stays on the pod), and the
    pod's clock (its working hours are read on it)."""
    from prometheus_client.core import GaugeMetricFamily

    def gauge(name: str, doc: str, value: Any, **labels: str) -> Any:
        fam = GaugeMetricFamily(name, doc, labels=list(labels))
        fam.add_metric(list(labels.values()), float(value))
        return fam

    yield gauge("pod_agent_watchdog_armed", "1 when the pod's watchdog may stop the pod.",
                bool(wd.get("armed")))
    if isinstance(wd.get("stop_in_s"), (int, float)):
        yield gauge("pod_agent_stop_in_seconds", "Seconds to the next stop, and why.",
                    wd["stop_in_s"], reason=str(wd.get("next_stop_reason") or ""))
    yield gauge("pod_agent_stop_warning", "1 within warn_before of a stop.",
                bool(wd.get("warning")))
    if isinstance(wd.get("idle_s"), (int, float)):
        yield gauge("pod_agent_idle_seconds", "Seconds since a slot last served a request.",
                    wd["idle_s"])
    if isinstance(wd.get("idle_stop_after_s"), (int, float)):
        yield gauge("pod_agent_idle_stop_after_seconds", "The idle stop's limit.",
                    wd["idle_stop_after_s"])
    ext = wd.get("extension")
    if isinstance(ext, dict) and isinstance(wd.get("now"), (int, float)):
        ends = ext.get("stops_at_end")
        yield gauge("pod_agent_extension_seconds", "Seconds the extension has left.",
                    float(ext.get("until", 0)) - float(wd["now"]),
                    by=str(ext.get("by") or ""), until=str(ext.get("until_iso") or ""),
                    # whether its end stops the pod or the schedule applies again
                    stops_at_end="" if not isinstance(ends, bool) else str(ends).lower())
    yield gauge("pod_agent_clock_speed", "The pod clock's speed (1 but in the demo).",
                wd.get("clock_speed") or 1.0)
    if isinstance(wd.get("now"), (int, float)) and not isinstance(wd.get("now"), bool):
        # the pod's time, which its working hours and stops follow: a wall (no SSH)
        # judges the hours on it, not on the clock of the machine it runs on
        yield gauge("pod_agent_clock_seconds", "The pod's clock (Unix seconds) at this "
                    "reading of its watchdog.", wd["now"])
    fail = wd.get("failing")
    if isinstance(fail, dict) and isinstance(fail.get("ticks"), int):
        # a wall (no SSH) says a failing watchdog too (issue 42): since when, and why
        yield gauge("pod_agent_watchdog_failing_ticks", "Watchdog ticks failing in a row.",
                    fail["ticks"], since=str(fail.get("since_iso") or ""),
                    error=str(fail.get("last_error") or "")[:200])


HEADER_TIMEOUT_S = 5.0
"""A connection has this long, from its accept, to send its request line and headers: a
scraper sends them at once; a slow sender (slowloris) is cut off here."""
IO_TIMEOUT_S = 10.0
"""The longest one read or write may block (a reader that stops reading the answer)."""
MAX_CONNECTIONS = 32
"""Connections served at once. The port is public: past this, the oldest connection
still waiting for its headers is closed to make room, and with none to close a new
connection is closed at once, so idle connections can neither grow the threads without
bound nor lock a scraper out."""


class BoundedServer(http.server.ThreadingHTTPServer):
    """A thread per connection, but bounded: at most ``max_connections`` at once (twice
    that while evicted ones finish), each waiting for its headers at most
    ``header_timeout_s``. The deadlines are enforced by the serving loop itself
    (``service_actions``, every poll interval): no thread of its own."""

    daemon_threads = True
    block_on_close = False  # closing never waits on a client
    request_queue_size = 128

    def __init__(self, address: Tuple[str, int], handler: Any, *,
                 max_connections: int = MAX_CONNECTIONS,
                 header_timeout_s: float = HEADER_TIMEOUT_S) -> None:
        self.max_connections = max_connections
        self.header_timeout_s = header_timeout_s
        self._conn_lock = threading.Lock()
        self._active = 0
        self._waiting: Dict[socket.socket, float] = {}  # accepted, no headers yet: deadline
        self.evicted = 0
        self.refused = 0
        super().__init__(address, handler)

    @property
    def active(self) -> int:
        with self._conn_lock:
            return self._active

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conn_lock:
            refuse = False
            if self._active >= self.max_connections:
                if self._waiting:  # room for it: the oldest one still without headers goes
                    self._cut(min(self._waiting, key=self._waiting.__getitem__))
                    self.evicted += 1
                else:  # every one is being answered: this one waits for none of them
                    refuse = True
            # an evicted connection's thread counts until it has ended: a hard bound
            refuse = refuse or self._active >= 2 * self.max_connections
            if refuse:
                self.refused += 1
            else:
                self._active += 1
                self._waiting[request] = time.monotonic() + self.header_timeout_s
        if refuse:
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:  # no thread could be started: the slot is given back
            self._done(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._done(request)

    def _done(self, request: Any) -> None:
        with self._conn_lock:
            self._active -= 1
            self._waiting.pop(request, None)

    def headers_read(self, request: Any) -> None:
        """The request's headers arrived in time: no longer a waiting connection."""
        with self._conn_lock:
            self._waiting.pop(request, None)

    def _cut(self, request: Any) -> None:
        """End a waiting connection from outside its thread: shut down, not closed (its
        thread still owns the descriptor); its blocked read returns and the thread ends."""
        self._waiting.pop(request, None)
        with contextlib.suppress(OSError):
            request.shutdown(socket.SHUT_RDWR)

    def service_actions(self) -> None:
        now = time.monotonic()
        with self._conn_lock:
            for request in [r for r, due in self._waiting.items() if due <= now]:
                self._cut(request)


def make_handler(render: Callable[[], bytes], token: str | None
                 ) -> type[http.server.BaseHTTPRequestHandler]:
    from prometheus_client.exposition import CONTENT_TYPE_LATEST

    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "pod-agent-exporter"
        sys_version = ""
        timeout = IO_TIMEOUT_S  # every read and write of the connection

        def parse_request(self) -> bool:
            ok = super().parse_request()
            headers_read = getattr(self.server, "headers_read", None)
            if headers_read is not None:
                headers_read(self.request)
            return ok

        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self._plain(404, "only /metrics is served here\n")
                return
            if token is not None:
                given = self.headers.get("Authorization", "")
                want = f"Bearer {token}"
                if not hmac.compare_digest(given.encode(), want.encode()):
                    self._plain(401, "bearer token required\n",
                                {"WWW-Authenticate": 'Bearer realm="pod-agent"'})
                    return
            body = render()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _refuse(self) -> None:
            self._plain(405, "metrics only: GET /metrics\n", {"Allow": "GET"})

        do_POST = do_PUT = do_DELETE = do_PATCH = _refuse

        def _plain(self, code: int, text: str, headers: Dict[str, str] | None = None
                   ) -> None:
            body = text.encode()
            self.send_response(code)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Nothing: the stdlib logs every request to stderr, and a scrape every few
            seconds is not news (errors still reach the scraper as HTTP statuses)."""

    return Handler


class AgentFeed:
    """The supervisor's own GPU sample, asked for over its Unix socket every
    ``interval_s`` by one thread. When the supervisor does not answer, the feed has no
    readings and says why (``pod_agent_gpu_telemetry_up`` 0): an old sample is never
    served as a new one."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._latest = GpuTelemetry(source="agent", error="no answer from the agent yet")
        self._xids: Dict[int, int] = {}
        self._watchdog: Dict[str, Any] | None = None
        self.polls = 0
        self.events_seen = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agent-feed", daemon=True)
        self.poll()

    def poll(self) -> None:
        from .client import NotRunning, request
        from .requests import GpusRequest

        try:
            doc: Dict[str, Any] | None = None
            # shorter than the interval, so polls never overlap or pile up
            for ev in request(GpusRequest(), timeout=max(0.2, 0.8 * self.interval_s)):
                if ev.get("kind") == "result":
                    doc = ev
            if doc is None:
                raise ValueError("the agent sent no sample")
            tel = GpuTelemetry.from_json(doc)
            xids = {int(x["gpu"]): int(x["xid"]) for x in doc.get("xid_events") or ()
                    if isinstance(x, dict)}  # oldest first: the last one per GPU wins
            seen = len(doc.get("xid_events") or ())
            wd = doc.get("watchdog") if isinstance(doc.get("watchdog"), dict) else None
        except (NotRunning, OSError, ValueError, KeyError, TypeError) as exc:
            tel = GpuTelemetry(source="agent", error=f"the pod agent did not answer: {exc}")
            xids, seen, wd = {}, self.events_seen, None
        with self._lock:
            self._latest, self._xids, self.events_seen = tel, xids, seen
            self._watchdog = wd
            self.polls += 1  # a new answer: the next scrape renders it

    def watchdog(self) -> Dict[str, Any] | None:
        with self._lock:
            return self._watchdog

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll()

    def latest(self) -> GpuTelemetry:
        with self._lock:
            return self._latest

    def last_xid(self, gpu: int) -> int | None:
        with self._lock:
            return self._xids.get(gpu)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2 * self.interval_s + 1)


class Exporter:
    """The sample source (NVML here, or the agent), the Xid events and the HTTP server,
    started and stopped together."""

    def __init__(self, host: str, port: int, interval_s: float = 1.0,
                 token: str | None = None, nvml: Any = None,
                 from_agent: bool = False, max_connections: int = MAX_CONNECTIONS,
                 header_timeout_s: float = HEADER_TIMEOUT_S) -> None:
        from prometheus_client import CollectorRegistry
        from prometheus_client.exposition import generate_latest

        self.telemetry: Telemetry | None = None
        self.xids: XidWatcher | None = None
        self.feed: AgentFeed | None = None
        self.sampler: Sampler | None = None
        last_xid: XidLookup | None = None
        if from_agent:
            self.feed = AgentFeed(interval_s)
            latest: Callable[[], GpuTelemetry] = self.feed.latest
            last_xid = self.feed.last_xid
        else:
            self.telemetry = Telemetry(nvml)
            self.sampler = Sampler(self.telemetry, interval_s)
            latest = self.sampler.latest
            if self.telemetry.source is not None:
                src = self.telemetry.source
                xids = self.xids = XidWatcher(src.nvml, [s["uuid"] for s in src.static])

                def last_xid(gpu: int) -> int | None:
                    ev = xids.last(gpu)
                    return ev.xid if ev else None
        self.latest = latest
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(Collector(
            latest, last_xid, socket.gethostname(),
            self.feed.watchdog if self.feed is not None else None))
        self._cache: tuple[Any, bytes] = (None, b"")
        self._cache_lock = threading.Lock()

        def render() -> bytes:
            # a scrape renders the newest sample once; scrapes between two samples
            # (several Prometheus servers, a dashboard's refresh) reuse that text
            tel = latest()
            key = (tel.t, tel.error, self.feed.polls if self.feed is not None else
                   sum(self.xids.counts.values()) if self.xids is not None else 0)
            with self._cache_lock:
                if self._cache[0] != key:
                    self._cache = (key, generate_latest(self.registry))
                return self._cache[1]

        self.render = render
        family = socket.AF_INET6 if ":" in host else socket.AF_INET

        class Server(BoundedServer):
            address_family = family

        self.httpd = Server((host, port), make_handler(self.render, token),
                            max_connections=max_connections,
                            header_timeout_s=header_timeout_s)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def source(self) -> str:
        if self.feed is not None:
            return "agent"
        assert self.telemetry is not None
        return "nvml" if self.telemetry.source is not None else "nvidia-smi"

    def start(self) -> None:
        for part in (self.sampler, self.xids, self.feed):
            if part is not None:
                part.start()

    def close(self) -> None:
        self.httpd.server_close()
        for part in (self.sampler, self.xids, self.feed):
            if part is not None:
                part.stop()


def parse_listen(text: str) -> Tuple[str, int]:
    host, _, port = text.rpartition(":")
    return (host.strip("[]") or "127.0.0.1"), int(port)


def main_loop(exporter: Exporter, stop: threading.Event) -> None:
    """Serve until ``stop`` is set (a signal handler sets it)."""
    t = threading.Thread(target=exporter.httpd.serve_forever, kwargs={"poll_interval": 0.5},
                         daemon=True)
    exporter.start()
    t.start()
    try:
        while not stop.wait(0.5):
            pass
    finally:
        exporter.httpd.shutdown()
        t.join(5)
        exporter.close()
