"""The gateway (LiteLLM) as the console sees it: one reading, what it means, its alerts.

A reading (``GatewaySnapshot``) holds the gateway catalog's figures
(``catalog.GATEWAY``) per deployment, per model group and for the whole gateway, the
users/keys table and the liveliness/readiness probes. ``collect/gateway.py`` makes it;
the session judges it here (``conditions``) and the screens draw it.

LiteLLM's ``litellm_deployment_state`` trap: 2 (outage) is set when a deployment is put
in cooldown and goes back to 0 only on its next *successful* call, so a deployment that
recovered but has not been called since still says 2. ``deployment_status`` reads the
state together with the cooldown counter and the calls in the window.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from msgspec import Struct, field

from console.model import catalog, fmt
from console.model.conditions import Condition

if TYPE_CHECKING:
    from console.config.settings import AlertTiming, GatewaySettings
    from console.model.snapshot import DeploymentSnapshot

Status = Literal["healthy", "partial", "cooldown", "failing", "outage-past", "unknown"]
STATUS_TEXT: dict[Status, str] = {
    "healthy": "healthy", "partial": "partial outage", "cooldown": "COOLDOWN",
    "failing": "failing", "outage-past": "idle since outage", "unknown": "—"}
"""``outage-past``: state 2 kept from a cooldown that is over, no call since (not down)."""


def deployment_status(state: float | None, cooled_at: float | None, now: float,
                      cooldown_s: float, failures: float | None,
                      successes: float | None) -> Status:
    """What a deployment's state means, with the cooldown trap handled: 2 is a cooldown
    only while the cooldown counter moved within ``cooldown_s`` (the router's
    ``cooldown_time``), failing while calls to it fail and none succeed, else the last
    outage kept until its next success."""
    if state is None:
        return "unknown"
    if state < 0.5:
        return "healthy"
    if state < 1.5:
        return "partial"
    if cooled_at is not None and now - cooled_at <= cooldown_s:
        return "cooldown"
    if (failures or 0) > 0 and not (successes or 0) > 0:
        return "failing"
    return "outage-past"


class DeploymentRow(Struct, frozen=True):
    model_id: str
    group: str
    api_base: str | None
    values: dict[str, float | None]
    status: Status
    cooled_at: float | None = None
    """When its cooldown counter was last seen to move (this console's clock)."""

    def figure(self, key: str) -> float | None:
        return self.values.get(key)


class UserRow(Struct, frozen=True):
    """One user or key: its name as LiteLLM labels it (alias, end user, user id; never
    key material), its usage today and when it was last seen making a request."""

    name: str
    requests: float | None
    tokens: float | None
    spend: float | None
    last_seen: float | None
    since: float | None = None
    """When "today" starts for these counts (midnight, or the console's first reading of
    a series older than today: counted from then)."""
    team: str | None = None
    """The team (alias, else id) its key belongs to, when LiteLLM labels one."""


class GatewaySnapshot(Struct, frozen=True):
    url: str
    t: float
    live: bool | None
    """``/health/liveliness`` answered 200 (None: not asked)."""
    ready: bool | None
    ready_detail: str = ""
    metrics_error: str | None = None
    """Why there are no figures (a key the console lacks names the setting)."""
    window_s: float | None = None
    total: dict[str, float | None] = field(default_factory=dict)
    groups: dict[str, dict[str, float | None]] = field(default_factory=dict)
    deployments: tuple[DeploymentRow, ...] = ()
    users: tuple[UserRow, ...] = ()
    workers_note: str | None = None
    """Several workers without multiprocess mode (each scrape reads one of them)."""
    via: str = "direct"

    @property
    def up(self) -> bool:
        return bool(self.live)

    def active_users(self, now: float, within_s: float) -> tuple[UserRow, ...]:
        """Who made a request within ``within_s`` (most recent first)."""
        rows = [u for u in self.users if u.last_seen is not None and
                now - u.last_seen <= within_s]
        return tuple(sorted(rows, key=lambda u: -(u.last_seen or 0.0)))

    def last_request_at(self) -> float | None:
        seen = [u.last_seen for u in self.users if u.last_seen is not None]
        return max(seen) if seen else None

    def headline(self) -> str:
        """The header's and the wall's gateway line."""
        if not self.live:
            return "gateway DOWN"
        parts = ["gateway up", "ready" if self.ready else "NOT READY"]
        rps = self.total.get("requests_per_s")
        if rps is not None:
            parts.append(f"{catalog.GATEWAY_BY_KEY['requests_per_s'].show(rps)} req/s")
        err = self.total.get("error_rate")
        if err is not None:
            parts.append(f"err {err * 100:.1f}%")
        bad = [d.model_id for d in self.deployments if d.status in ("cooldown", "failing")]
        if bad:
            parts.append("cooldown: " + ",".join(bad[:3]))
        if self.metrics_error:
            parts.append("no figures")
        return " · ".join(parts)

    def brief(self) -> str:
        """The header's few columns: ``gw ok 0.9 req/s`` (errors said when there are
        any) while all is well, the whole ``headline`` otherwise."""
        bad = any(d.status in ("cooldown", "failing") for d in self.deployments)
        if not self.live or not self.ready or bad or self.metrics_error:
            return self.headline()
        out = "gw ok"
        rps = self.total.get("requests_per_s")
        if rps is not None:
            out += f" {catalog.GATEWAY_BY_KEY['requests_per_s'].show(rps)} req/s"
        err = self.total.get("error_rate")
        if err:
            out += f" err {err * 100:.1f}%"
        return out

    def short(self) -> str:
        """The header's gateway field on a narrow terminal: its worst state in a word or
        two (``gw COOLDOWN 1``, ``gw DOWN``, ``gw err 31%``, ``gw ok``)."""
        if not self.live:
            return "gw DOWN"
        if not self.ready:
            return "gw NOT READY"
        bad = [d for d in self.deployments if d.status in ("cooldown", "failing")]
        if bad:
            names = ",".join(d.model_id for d in bad[:2])
            return f"gw COOLDOWN {names if len(names) <= 16 else len(bad)}"
        if self.metrics_error:
            return "gw no figures"
        err = self.total.get("error_rate")
        return f"gw err {err * 100:.0f}%" if err else "gw ok"

    def as_json(self) -> dict[str, object]:
        """``status --json``'s ``gateway`` block and ``metrics --gateway --json``."""
        return {
            "url": self.url, "via": self.via, "headline": self.headline(),
            "live": self.live, "ready": self.ready,
            "ready_detail": self.ready_detail, "metrics_error": self.metrics_error,
            "window_s": self.window_s, "workers_note": self.workers_note,
            "total": self.total, "groups": self.groups,
            "deployments": [{"model_id": d.model_id, "group": d.group,
                             "api_base": d.api_base, "status": d.status,
                             "cooled_at": d.cooled_at, **d.values}
                            for d in self.deployments],
            "users": [{"name": u.name, "team": u.team, "requests": u.requests,
                       "tokens": u.tokens, "spend": u.spend, "last_seen": u.last_seen,
                       "since": u.since}
                      for u in self.users],
        }


def who_text(gw: GatewaySnapshot | None, now: float, within_s: float) -> str | None:
    """Who made requests through the gateway within ``within_s`` (the watchdog dialog's
    line when deciding whether to extend); None without a gateway reading."""
    if gw is None or (gw.metrics_error is not None and not gw.users):
        return None
    span = f"{within_s / 3600:g} h" if within_s % 3600 == 0 else f"{within_s / 60:.0f} min"
    active = gw.active_users(now, within_s)
    if not active:
        return f"gateway: no requests in the last {span}"
    parts = [f"{u.name} ({fmt.elapsed(now - (u.last_seen or now))} ago, "
             f"{fmt.num(u.requests)} today)" for u in active[:6]]
    more = f" +{len(active) - 6} more" if len(active) > 6 else ""
    return f"used in the last {span}: " + ", ".join(parts) + more


def idle_for(slots_idle: float | None, gw: GatewaySnapshot | None, source: str,
               now: float) -> float | None:
    """How long the pod has been idle, counting as activity what ``idle_source`` says:
    the slots' requests (the pod agent's figure), the gateway's (since its last request
    seen), or either (the shorter)."""
    last = gw.last_request_at() if gw is not None else None
    gw_idle = None if last is None else max(0.0, now - last)
    if source == "gateway":
        return gw_idle if gw_idle is not None else slots_idle
    if source == "both":
        known = [x for x in (slots_idle, gw_idle) if x is not None]
        return min(known) if known else None
    return slots_idle


_HOST = re.compile(r"^https?://(\[[^\]]+\]|[^/:]+)(?::(\d+))?")


def port_of(url: str | None) -> int | None:
    m = _HOST.match(url or "")
    return int(m.group(2)) if m and m.group(2) else None


def conditions(gw: GatewaySnapshot | None, snap: DeploymentSnapshot | None,
               settings: GatewaySettings, timing: AlertTiming) -> list[Condition]:
    """The gateway's alert conditions true now (each with its ``for:`` and hold)."""
    if gw is None:
        return []
    out: list[Condition] = []
    if not gw.live:
        out.append(Condition("gw-down", "crit", "gateway down", gw.ready_detail or gw.url,
                             timing.down_for_s, timing.hold_s))
        return out
    if gw.ready is False:
        out.append(Condition("gw-ready", "crit", "gateway not ready", gw.ready_detail,
                             timing.down_for_s, timing.hold_s))
    if gw.metrics_error:
        out.append(Condition("gw-metrics", "warn", "gateway figures unreadable",
                             gw.metrics_error, timing.down_for_s, timing.hold_s))
    # a deployment cooling down (or failing) explains the fallbacks and the 5xx it
    # causes: those are shown under it, one alert, not four (issue 43, "Noise")
    cooling: dict[str, str] = {}
    for d in gw.deployments:
        if d.status in ("cooldown", "failing"):
            cooling.setdefault(d.group, f"gw-cooldown:{d.model_id}")
            out.append(Condition(
                f"gw-cooldown:{d.model_id}", "warn",
                f"{d.group}/{d.model_id} {STATUS_TEXT[d.status]} at the gateway",
                f"{d.api_base or ''}: LiteLLM routes around it", timing.down_for_s,
                timing.hold_s))
    fb = sum(v for v in (gw.total.get("fallbacks_ok"), gw.total.get("fallbacks_failed"))
             if v)
    first = next(iter(cooling.values()), None)
    if fb > 0:
        out.append(Condition("gw-fallbacks", "warn", f"gateway fallbacks rising "
                             f"(+{fb:g} in the window)", "requests fail over to another "
                             "model group", timing.for_s, timing.hold_s, parent=first))
    breached: list[tuple[str, catalog.Threshold, float]] = []
    for scope, values in [("the gateway", gw.total), *gw.groups.items()]:
        for fig in catalog.GATEWAY:
            rule = fig.threshold
            value = values.get(fig.key)
            if rule is not None and value is not None and rule.breached(value, settings):
                breached.append((scope, rule, value))
    # the whole gateway's 5xx is the cooldown's while no other group's 5xx is over
    unexplained = {scope for scope, rule, _ in breached if rule.alert == "gw-5xx"
                   and scope != "the gateway" and scope not in cooling}
    for scope, rule, value in breached:
        parent = None
        if rule.alert == "gw-5xx":
            parent = cooling.get(scope) if scope != "the gateway" else (
                None if unexplained else first)
        out.append(Condition(f"{rule.alert}:{scope}", "warn",
                             rule.title(scope, value, settings), "", timing.for_s,
                             timing.hold_s, parent=parent))
    if snap is not None:
        # a slot up and answering on its own while the gateway's calls to it fail: the
        # route (a RunPod HTTPS proxy hop, an api_base, a key) is wrong, not the slot
        by_port = {s.port: s for s in snap.slots if s.health == "up"}
        for d in gw.deployments:
            slot = by_port.get(port_of(d.api_base) or -1)
            failed = d.figure("failures") or 0
            ok = d.figure("requests") or 0
            if slot is not None and failed > 0 and failed >= ok - failed and (
                    slot.probe_ok is not False):
                out.append(Condition(
                    f"gw-route:{d.model_id}", "crit",
                    f"{slot.slot} healthy but the gateway fails for it",
                    f"{d.group}/{d.model_id} → {d.api_base}: {failed:g} of {ok:g} calls "
                    "failed (routing or auth between the gateway and the slot)",
                    timing.for_s, timing.hold_s))
    return out


Level = Literal["ok", "warn", "crit"]


def level(gw: GatewaySnapshot, limits: GatewaySettings | None,
          firing: Iterable[tuple[str, str]] = ()) -> Level:
    """The gateway's worst state now, for its colour in the header: the worst of its
    alert conditions by the configured limits (``limits``; the defaults when None: a
    recording), the gateway alerts that fire (``firing``: (key, severity), so that the
    field is never green beside a gateway WARN), and an error rate over the 5xx limit."""
    from console.config.settings import AlertTiming
    from console.config.settings import GatewaySettings as Limits

    lim = limits if limits is not None else Limits()
    sevs: set[str] = {c.severity for c in conditions(gw, None, lim, AlertTiming())}
    sevs |= {sev for key, sev in firing if key.startswith("gw-")}
    err = gw.total.get("error_rate")
    if err is not None and err > lim.error_5xx_ratio:
        sevs.add("warn")
    return "crit" if "crit" in sevs else "warn" if "warn" in sevs else "ok"


def on_the_pod(conds: list[Condition], gw: GatewaySnapshot | None,
               snap: DeploymentSnapshot | None) -> list[Condition]:
    """The gateway's conditions that follow from the pod's slots alone (issue 42, item 3):
    a deployment routed to one of its slots (the api_base's port is a slot's) cooling
    down or failing its route; a group's rates, or the whole gateway's, when every
    deployment in it is routed to the pod. While the pod is stopped on purpose these are
    its stop, not an outage. The gateway's own health (down, not ready) never is."""
    if gw is None or snap is None:
        return []
    ports = {s.port for s in snap.slots}
    routed = {d.model_id for d in gw.deployments if port_of(d.api_base) in ports}
    groups = {d.group for d in gw.deployments}
    whole = {g for g in groups
             if all(d.model_id in routed for d in gw.deployments if d.group == g)}
    everything = bool(gw.deployments) and len(routed) == len(gw.deployments)
    out = []
    for c in conds:
        kind, _, scope = c.key.partition(":")
        if kind in ("gw-down", "gw-ready", "gw-metrics"):
            continue
        if (kind in ("gw-cooldown", "gw-route") and scope in routed) or (
                scope in whole) or (everything and (kind == "gw-fallbacks"
                                                    or scope == "the gateway")):
            out.append(c)
    return out
