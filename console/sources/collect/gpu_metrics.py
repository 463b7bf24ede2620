"""The GPUs without the agent: from ``pod-agent exporter``'s dcgm-exporter-named metrics,
scraped directly or read back through Prometheus (the wall has no SSH key) — and, from
the same endpoint, the pod's stop plan (``pod_agent_*`` gauges).

Both paths end in the same :func:`report`, so a figure reads the same whichever way it
came. Prometheus is asked once per poll for every ``DCGM_FI_DEV_*`` series of the pod
(one query, grouped by the ``gpu`` label here)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from msgspec.structs import replace

from console.model.gpu_state import Gpu, GpuReport, XidRecord
from console.model.snapshot import StopPlan
from console.sources.collect.exposition import parse
from console.sources.collect.http import HttpClient, HttpError
from console.sources.collect.promql import PromClient, PromError
from pod_agent.gpus import BENIGN_THROTTLE, THROTTLE_REASONS

MIB = 1 << 20
FIELDS: dict[str, tuple[str, Any]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("util_pct", float),
    "DCGM_FI_DEV_FB_USED": ("mem_used", lambda v: int(v * MIB)),
    "DCGM_FI_DEV_FB_TOTAL": ("mem_total", lambda v: int(v * MIB)),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", float),
    "DCGM_FI_DEV_SLOWDOWN_TEMP": ("temp_slowdown_c", float),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", float),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_w", float),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", int),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("throttled", lambda v: tuple(
        n for b, n in THROTTLE_REASONS.items() if int(v) & b & ~BENIGN_THROTTLE)),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("ecc_sbe_volatile", int),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("ecc_dbe_volatile", int),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("remapped_uncorrectable", int),
    "DCGM_FI_DEV_ROW_REMAP_PENDING": ("remap_pending", bool),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("remap_failed", bool),
    "DCGM_FI_DEV_RETIRED_PENDING": ("retired_pending", bool),
    "DCGM_FI_DEV_NVLINK_LINKS_UP": ("nvlink_up", int),
    # GPM figures: dcgm-exporter's ratios back to the agent's percent
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active_pct", lambda v: round(v * 100, 3)),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("sm_occupancy_pct", lambda v: round(v * 100, 3)),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active_pct", lambda v: round(v * 100, 3)),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active_pct", lambda v: round(v * 100, 3)),
    "pod_agent_gpm_supported": ("gpm_supported", bool),
}


NO_GPU_READINGS = ("Prometheus has no GPU readings for this pod (is its DCGM exporter "
                   "scraped?)")

XidSeen = dict[tuple[str, int, int], float]
"""(GPU UUID, index, Xid code) → when this source first read that code as the GPU's last
Xid (the console's clock)."""
XID_SEEN_KEPT = 256
"""At most this many kept (a long-lived wall across many pods' GPUs)."""


def report(samples: Iterable[tuple[str, Mapping[str, str], float]], source: str,
           t: float, seen: XidSeen | None = None) -> GpuReport:
    """(metric name, labels, value) of the DCGM-named series → the GPUs.

    ``DCGM_FI_DEV_XID_ERRORS`` is a gauge of the last Xid, read again at every poll and
    holding its code for as long as the exporter runs: it is not an event per read. With
    ``seen`` (kept by the caller from one read to the next) the Xid is dated when the
    code first appeared on that GPU, so every later read of it is the same event (one
    alert, one log line) and it ages out after ``gpu_state.XID_RECENT_S`` as an event
    the agent reports does; a new code, or the same after the gauge went back to 0, is a
    new one. Without ``seen``, the read's time."""
    from pod_agent.gpus import xid_meaning

    by_gpu: dict[int, dict[str, Any]] = {}
    xids: list[XidRecord] = []
    gauges: dict[tuple[str, int], int] = {}
    for name, labels, value in samples:
        try:
            gpu = int(labels.get("gpu", ""))
        except ValueError:
            continue
        g = by_gpu.setdefault(gpu, {"index": gpu, "name": labels.get("modelName", ""),
                                    "uuid": labels.get("UUID", "")})
        if name == "DCGM_FI_DEV_XID_ERRORS":
            code = int(value) if value == value else 0
            gauges[(labels.get("UUID", ""), gpu)] = code
            if code:  # the last Xid seen since the exporter started (DCGM's meaning)
                sev, meaning, advice = xid_meaning(code)
                key = (labels.get("UUID", ""), gpu, code)
                at = seen.setdefault(key, t) if seen is not None else t
                xids.append(XidRecord(at, gpu, code, sev, meaning, advice))
            continue
        field = FIELDS.get(name)
        if field is not None and value == value:  # NaN: not reported
            g[field[0]] = field[1](value)
    if seen is not None:
        # a GPU read with another code (or none) now: its old one is over
        for key in [k for k in seen if k[:2] in gauges and gauges[k[:2]] != k[2]]:
            del seen[key]
        for key in sorted(seen, key=seen.__getitem__)[:max(0, len(seen) - XID_SEEN_KEPT)]:
            del seen[key]
    gpus = tuple(Gpu(**g) for _, g in sorted(by_gpu.items()))
    return GpuReport(gpus, source, None if gpus else NO_GPU_READINGS, t,
                     tuple(xids))


def stop_plan(samples: Iterable[tuple[str, Mapping[str, str], float]], read_at: float
              ) -> tuple[StopPlan | None, bool | None]:
    """The exporter's ``pod_agent_*`` gauges → the stop plan and whether the watchdog is
    armed; (None, None) from an exporter that does not say (run by hand, or older)."""
    wd: dict[str, Any] = {}
    armed: bool | None = None
    for name, labels, value in samples:
        if value != value:  # NaN
            continue
        if name == "pod_agent_watchdog_armed":
            armed = value == 1.0
        elif name == "pod_agent_stop_in_seconds":
            wd["stop_in_s"], wd["next_stop_reason"] = value, labels.get("reason") or None
        elif name == "pod_agent_stop_warning":
            wd["warning"] = value == 1.0
        elif name == "pod_agent_idle_seconds":
            wd["idle_s"] = value
        elif name == "pod_agent_idle_stop_after_seconds":
            wd["idle_stop_after_s"] = value
        elif name == "pod_agent_extension_seconds" and value > 0:
            ends = {"true": True, "false": False}.get(labels.get("stops_at_end") or "")
            wd["extension"] = {"until_iso": labels.get("until"), "by": labels.get("by"),
                               "stops_at_end": ends}
        elif name == "pod_agent_clock_speed":
            wd["clock_speed"] = value
        elif name == "pod_agent_clock_seconds":
            wd["now"] = value
        elif name == "pod_agent_watchdog_failing_ticks" and value > 0:
            wd["failing"] = {"ticks": int(value), "since_iso": labels.get("since") or None,
                             "last_error": labels.get("error")}
    if armed is None:
        return None, None
    # the pod's clock as last scraped (Prometheus: up to a scrape interval old, more
    # while the target is down): enough to read its working hours on, not to say how
    # far it is from ours — a skew is measured on the agent's own answer only
    return replace(StopPlan.parse(wd, read_at), skew_s=None), armed


class GpuMetrics:
    """Where the console reads GPUs when the agent cannot tell it: the exporter's URL
    (``gpu_metrics_url``, with its bearer token) or Prometheus."""

    def __init__(self, client: HttpClient, timeout_s: float, url: str | None = None,
                 token: str | None = None, prometheus_url: str | None = None,
                 selector: str | Callable[[], str] = "",
                 clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.timeout_s = timeout_s
        self.url = url
        self.token = token
        self.prometheus_url = prometheus_url
        self._selector = selector if callable(selector) else (lambda: selector)
        self._clock = clock
        """The wall clock a read is dated on (a test's own)."""
        self._xid_seen: XidSeen = {}
        """When each GPU's last-Xid gauge first read its code (``report``'s ``seen``)."""

    @property
    def selector(self) -> str:
        """The pod's PromQL selector as its deployment says now: read at every query, so
        a pod switch is followed without telling this source."""
        return self._selector()

    @property
    def configured(self) -> bool:
        return bool(self.url or self.prometheus_url)

    async def fetch(self) -> GpuReport:
        return (await self.fetch_pod())[0]

    async def fetch_pod(self) -> tuple[GpuReport, StopPlan | None, bool | None]:
        """The GPUs, the stop plan and whether the watchdog is armed, from one read."""
        now = self._clock()
        none = (None, None)
        if self.url:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
            try:
                r = await self.client.get(self.url, timeout=self.timeout_s, headers=headers)
            except HttpError as exc:
                return (GpuReport(source="exporter", error=exc.describe()[:200],
                                  sampled_at=now), *none)
            if r.status_code != 200:
                return (GpuReport(source="exporter", error=f"HTTP {r.status_code}",
                                  sampled_at=now), *none)
            exp = parse(r.text)
            out = [(n, dict(lbl), v) for n in exp.samples
                   if n.startswith(("DCGM_", "pod_agent_"))
                   for lbl, v in exp.samples[n].items()]
            return (report(out, "exporter", now, self._xid_seen), *stop_plan(out, now))
        assert self.prometheus_url
        prom = PromClient(self.prometheus_url, self.client, self.timeout_s)
        sel = self.selector.strip("{}")
        expr = ('{__name__=~"DCGM_FI_DEV_.*|DCGM_FI_PROF_.*|pod_agent_.*"'
                + (f",{sel}" if sel else "") + "}")
        try:
            res = await prom.query(expr)
        except PromError as exc:
            return GpuReport(source="prometheus", error=str(exc), sampled_at=now), *none
        out = []
        for item in res:
            m = item.get("metric") or {}
            try:
                out.append((m.get("__name__", ""), m, float(item["value"][1])))
            except (KeyError, IndexError, TypeError, ValueError):
                continue
        return (report(out, "prometheus", now, self._xid_seen), *stop_plan(out, now))


def from_settings(settings: Any, client: HttpClient,
                  selector: Callable[[], str] | None = None) -> GpuMetrics | None:
    """The GPU metrics source the settings name, if any (``gpu_metrics_url`` first).
    ``selector``: where the pod's selector is read (default: the settings' machine id,
    read at every query)."""
    from console.config.defaults import prom_selector

    url, prom = settings.gpu_metrics_url, settings.prometheus_url
    if not url and not prom:
        return None
    token = settings.gpu_metrics_token.get_secret_value() if settings.gpu_metrics_token else None
    return GpuMetrics(client, max(2.0, settings.request_timeout_s * 2), url=url, token=token,
                      prometheus_url=prom,
                      selector=selector or (lambda: prom_selector(settings.pod.machine_id)))
