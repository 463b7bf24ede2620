"""Immutable snapshots handed from collectors to widgets. Nothing here does I/O."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any, Literal

from msgspec import Struct, field

from console.model import slo
from console.model.gpu_state import GpuReport
from console.model.model_figures import ModelFigures
from console.model.printable import printable

Health = Literal["up", "down", "starting", "unknown"]
Source = Literal["prometheus", "direct", "none"]
"""Where a slot's figures came from (``none``: nowhere this poll)."""


class StopPlan(Struct, frozen=True):
    """The pod agent's stop policy as it last reported it (``status`` → ``watchdog``).
    Durations are the pod's own (its clock decides when it stops); ``read_at`` is when
    the console received them, ``skew_s`` how far the pod's clock is from ours."""

    next_reason: str | None = None
    """``schedule``, ``idle``, ``extension ends`` (or, held by running requests, the
    reason of the stop they hold back)."""
    in_s: float | None = None
    idle_s: float | None = None
    idle_after_s: float | None = None
    idle_in_hours: bool = True
    warning: bool = False
    grace_until: str | None = None
    extension_until: str | None = None
    extension_by: str | None = None
    extension_reason: str | None = None
    last_stop_reason: str | None = None
    last_stop_at: float | None = None
    """When the last stop was made, on the pod's clock (``last_stop.at``)."""
    last_stop_by: str | None = None
    last_stop_ok: bool | None = None
    """None while it is being made (or when the console said it was about to)."""
    extension_stops_at_end: bool | None = None
    """Whether the extension's end stops the pod (its end is then a stop like any other)."""
    warn_before_s: float | None = None
    pod_now: float | None = None
    """The pod's clock when it answered (``now``): pod instants are put on ours with it."""
    memory_warning: str | None = None
    clock_speed: float = 1.0
    skew_s: float | None = None
    read_at: float = 0.0
    busy: bool = False
    """Requests ran at the agent's last look: idle stays 0 until a report says otherwise
    (counted on from the report, at ×60 a poll's 10 s read "idle 10m" while requests ran)."""
    failing_since: str | None = None
    """The watchdog's ticks fail since then (ISO, the pod's zone; ``watchdog.failing``)."""
    failing_error: str | None = None
    failing_ticks: int = 0

    @classmethod
    def parse(cls, wd: dict[str, Any], read_at: float) -> StopPlan:
        def num(k: str) -> float | None:
            v = wd.get(k)
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) \
                else None

        raw_ext = wd.get("extension")
        ext: dict[str, Any] = raw_ext if isinstance(raw_ext, dict) else {}
        speed = num("clock_speed") or 1.0
        now = num("now")
        raw_last = wd.get("last_stop")
        last: dict[str, Any] = raw_last if isinstance(raw_last, dict) else {}
        last_at = last.get("at")
        raw_fail = wd.get("failing")
        fail: dict[str, Any] = raw_fail if isinstance(raw_fail, dict) else {}
        ticks = fail.get("ticks")
        return cls(
            next_reason=wd.get("next_stop_reason") if isinstance(
                wd.get("next_stop_reason"), str) else None,
            in_s=num("stop_in_s"), idle_s=num("idle_s"), idle_after_s=num("idle_stop_after_s"),
            idle_in_hours=wd.get("idle_stop_in_hours") is not False,
            warning=wd.get("warning") is True,
            grace_until=wd.get("grace_until") if isinstance(wd.get("grace_until"), str)
            else None,
            extension_until=str(ext.get("until_iso")) if ext.get("until_iso") else None,
            extension_by=str(ext.get("by")) if ext.get("by") else None,
            extension_reason=str(ext.get("reason")) if ext.get("reason") else None,
            last_stop_reason=wd.get("last_stop_reason") if isinstance(
                wd.get("last_stop_reason"), str) else None,
            last_stop_at=float(last_at) if isinstance(last_at, (int, float))
            and not isinstance(last_at, bool) else None,
            last_stop_by=str(last["by"]) if last.get("by") else None,
            last_stop_ok=last.get("ok") if isinstance(last.get("ok"), bool) else None,
            extension_stops_at_end=ext.get("stops_at_end") if isinstance(
                ext.get("stops_at_end"), bool) else None,
            warn_before_s=num("warn_before_s"), pod_now=now,
            memory_warning=wd.get("memory_warning") if isinstance(
                wd.get("memory_warning"), str) else None,
            clock_speed=speed, busy=wd.get("busy") is True,
            # the pod's words: printable, bounded (a traceback's text is the agent's log's)
            failing_since=printable(fail["since_iso"], 40) if isinstance(
                fail.get("since_iso"), str) else None,
            failing_error=printable(fail["last_error"], 300) if isinstance(
                fail.get("last_error"), str) else None,
            failing_ticks=ticks if isinstance(ticks, int) and not isinstance(ticks, bool)
            else 0,
            # a simulated pod clock (the demo's, the tests') has no meaningful skew
            skew_s=None if now is None or speed != 1.0 or wd.get("clock_simulated") is True
            else now - read_at,
            read_at=read_at)

    def elapsed(self, now: float) -> float:
        """Pod-clock seconds since the report."""
        return max(0.0, now - self.read_at) * self.clock_speed

    def stop_in(self, now: float) -> float | None:
        return None if self.in_s is None else self.in_s - self.elapsed(now)

    def idle(self, now: float) -> float | None:
        if self.idle_s is None:
            return None
        return self.idle_s if self.busy else self.idle_s + self.elapsed(now)

    def pod_clock(self, now: float) -> float | None:
        """The pod's clock at ``now`` (ours), None when the pod did not say its time."""
        return None if self.pod_now is None else self.pod_now + self.elapsed(now)

    def ours(self, pod_t: float) -> float:
        """A pod instant on our clock (the same instant, as our clock reads it)."""
        if self.pod_now is None:
            return pod_t
        return self.read_at + (pod_t - self.pod_now) / (self.clock_speed or 1.0)

    def extension_left(self, now: float) -> float | None:
        """Pod seconds until the extension ends (None: none, or the pod's time unknown)."""
        pod_now = self.pod_clock(now)
        if not self.extension_until or pod_now is None:
            return None
        try:
            end = dt.datetime.fromisoformat(self.extension_until).timestamp()
        except ValueError:
            return None
        return end - pod_now


class AgentHeartbeat(Struct, frozen=True):
    """The pod agent's own ``Watchdog`` alert to Alertmanager, as its ``status`` says
    (``heartbeat``; ``pod_agent/heartbeat.py``). Times are the pod's wall clock."""

    configured: bool = False
    """Whether the agent has an Alertmanager URL (``POD_AGENT_ALERTMANAGER_URL``)."""
    to: str | None = None
    """Its scheme, host and port (never the credentials)."""
    interval_s: float | None = None
    sent_at: float | None = None
    """The last send Alertmanager accepted."""
    last_error: str | None = None
    last_error_at: float | None = None
    failing_since: float | None = None
    failures: int = 0

    @classmethod
    def parse(cls, raw: Any) -> AgentHeartbeat | None:
        """None from an agent that does not say (older than the heartbeat)."""
        if not isinstance(raw, dict):
            return None

        def num(k: str) -> float | None:
            v = raw.get(k)
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) \
                else None

        def text(k: str, n: int) -> str | None:
            v = raw.get(k)
            return printable(v, n) if isinstance(v, str) else None

        fails = raw.get("failures")
        return cls(configured=raw.get("configured") is True, to=text("to", 200),
                   interval_s=num("interval_s"), sent_at=num("sent_at"),
                   last_error=text("last_error", 200), last_error_at=num("last_error_at"),
                   failing_since=num("failing_since"),
                   failures=fails if isinstance(fails, int) and not isinstance(fails, bool)
                   else 0)

    def to_json(self) -> dict[str, object]:
        return {"configured": self.configured, "to": self.to, "interval_s": self.interval_s,
                "sent_at": self.sent_at, "last_error": self.last_error,
                "last_error_at": self.last_error_at, "failing_since": self.failing_since,
                "failures": self.failures}


class SlotSnapshot(Struct, frozen=True):
    """One slot as last seen."""

    slot: str
    served_model_name: str
    port: int
    url: str
    health: Health = "unknown"
    health_detail: str = ""
    served_models: tuple[str, ...] = ()
    figures: ModelFigures | None = None
    kv_p99: float | None = None
    """KV usage p99 over the window (quantile_over_time semantics)."""
    probe_ok: bool | None = None
    """Last real chat completion probe: True, False, or None when not probed yet."""
    probe_detail: str = ""
    probe_at: float | None = None
    source: Source = "none"
    fetched_at: float = 0.0
    error: str | None = None
    stale_since: float | None = None
    """When the last good data was fetched, if this snapshot failed."""
    engine: str = "vllm"
    """The slot's serving engine (the profile's ``engine:``)."""

    def figure(self, key: str, thresholds: Any = None) -> float | None:
        """A catalog figure of this slot: its model's, or its own (KV p99; SLO
        attainment against ``thresholds``, the slot's targets)."""
        if key == "kv_p99":
            return self.kv_p99
        if key == "slo_attainment":
            return slo.attainment(self.figures, thresholds)
        return self.figures.value(key) if self.figures is not None else None

    def to_json(self) -> dict[str, object]:
        return {
            "slot": self.slot, "served_model_name": self.served_model_name, "port": self.port,
            "url": self.url, "health": self.health, "health_detail": self.health_detail,
            "served_models": list(self.served_models), "kv_p99": self.kv_p99,
            "source": self.source, "fetched_at": self.fetched_at, "error": self.error,
            "probe_ok": self.probe_ok, "probe_detail": self.probe_detail,
            "probe_at": self.probe_at,
            "stale_since": self.stale_since,
            "figures": self.figures.contract_dict() if self.figures else None,
            "rates": None if self.figures is None else {
                "window_s": self.figures.window_s,
                "evaluated_at": self.figures.at,
                "prompt_tps": self.figures.prompt_tps,
                "generation_tps": self.figures.generation_tps,
                "preemptions_per_s": self.figures.preemption_rate,
                "requests_per_s": self.figures.request_rate,
                # per second, as every entry here (the counts are the window's figures)
                "requests_by_reason": {
                    k: v / self.figures.window_s for k, v in
                    self.figures.requests_by_reason.items()} if self.figures.window_s
                else None,
            },
        }


class DeploymentSnapshot(Struct, frozen=True):
    """All slots of today's profile, stamped with when and how they were fetched."""

    profile: str
    slots: tuple[SlotSnapshot, ...]
    fetched_at: float = field(default_factory=time.time)
    prometheus_url: str | None = None
    prometheus_error: str | None = None
    cycle_s: float = 0.0
    """How long the poll took (to spot a slow source)."""

    def slot(self, name: str) -> SlotSnapshot | None:
        for s in self.slots:
            if s.slot == name:
                return s
        return None

    def to_json(self) -> dict[str, object]:
        return {"profile": self.profile, "fetched_at": self.fetched_at,
                "prometheus_url": self.prometheus_url,
                "prometheus_error": self.prometheus_error, "cycle_s": self.cycle_s,
                "slots": [s.to_json() for s in self.slots]}


class PodSnapshot(Struct, frozen=True):
    """The pod as RunPod and the agent last described it (header, alerts)."""

    pod_id: str | None = None
    status: str | None = None
    gpu_name: str | None = None
    gpu_count: int | None = None
    cost_per_hr: float | None = None
    started_at: float | None = None
    host_cuda: str | None = None
    p2p_disabled: bool | None = None
    watchdog_armed: bool | None = None
    next_stop: str | None = None
    agent_slots: dict[str, dict[str, Any]] = field(default_factory=dict)
    agent_actions: tuple[dict[str, Any], ...] = ()
    last_watchdog_result: str | None = None
    provider_error: str | None = None
    agent_error: str | None = None
    fetched_at: float = 0.0
    spent_earlier_today: float | None = None
    """$ of today's earlier runs of this pod (``console.session.spend``), None when not known."""
    day_zone: dt.tzinfo | None = None
    """Whose midnight starts "today" for the spend (the profile's schedule zone), set with
    ``spent_earlier_today``; None: this machine's."""
    gpus: GpuReport | None = None
    """The GPUs as the agent sampled them (NVML), None from an agent that does not say."""
    stop_plan: StopPlan | None = None
    """The agent's stop policy (None: no agent, or one that does not say)."""
    agent_heartbeat: AgentHeartbeat | None = None
    """The agent's own heartbeat to Alertmanager (None: no agent answer, or one that
    does not say)."""

    def uptime_s(self, now: float) -> float | None:
        return None if self.started_at is None else max(0.0, now - self.started_at)

    def spend_today(self, now: float, tz: dt.tzinfo | None = None) -> float | None:
        """$ since local midnight: the current run's part (since midnight or since it
        started, whichever is later) plus today's earlier runs, when those are known."""
        tz = tz if tz is not None else self.day_zone
        rate, started = self.cost_per_hr, self.started_at
        if rate is None or started is None or self.status != "RUNNING":
            return self.spent_earlier_today
        local_now = dt.datetime.fromtimestamp(now, tz)
        midnight = local_now.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
        hours = max(0.0, now - max(midnight, started)) / 3600
        return hours * rate + (self.spent_earlier_today or 0.0)

    def projected_today(self, now: float, tz: dt.tzinfo | None = None) -> float | None:
        """Today's spend if the pod runs until its next stop (or midnight, if that is
        first or nothing will stop it: a disarmed watchdog): an extension moves it. With
        no stop known (no agent, or one that does not say) there is nothing to project
        to: today's spend so far."""
        tz = tz if tz is not None else self.day_zone
        spent = self.spend_today(now, tz)
        if spent is None or self.status != "RUNNING" or self.cost_per_hr is None:
            return spent
        if self.watchdog_armed is not False and self.stop_in_s(now) is None:
            return spent
        local_now = dt.datetime.fromtimestamp(now, tz)
        midnight = (local_now.replace(hour=0, minute=0, second=0, microsecond=0)
                    + dt.timedelta(days=1)).timestamp()
        left = self.stop_in_s(now)
        until = midnight if left is None or self.watchdog_armed is False else \
            min(midnight, now + max(0.0, left))
        return spent + (until - now) / 3600 * self.cost_per_hr

    def stop_clock(self, now: float) -> float:
        """``now`` on the clock ``next_stop`` is written in (the pod's, which may run
        fast or apart from ours): what a countdown to ``next_stop`` counts from, so a
        dialog and the header count the same seconds (issue 30, finding 6)."""
        left = self.stop_in_s(now)
        if left is None or not self.next_stop:
            return now
        try:
            return dt.datetime.fromisoformat(self.next_stop).timestamp() - left
        except ValueError:
            return now

    def stop_in_s(self, now: float) -> float | None:
        if self.stop_plan is not None and self.stop_plan.in_s is not None:
            return self.stop_plan.stop_in(now)  # the pod's clock decides
        if not self.next_stop:
            return None
        try:
            return dt.datetime.fromisoformat(self.next_stop).timestamp() - now
        except ValueError:
            return None
