"""An operation's own effects are not alerts (issue 42, item 3).

A restart by ``R``, a rebalance by ``b`` (its slots restart), a resume, a fallback's
bring-up: each takes slots down on purpose and brings them back. What follows from that
— the slot down, its probe failing while it warms up, the gateway cooling its route down,
requests failing at the gateway — is what the operator asked for, not news. Found: after
"✓ Q27 restarted (up after 5 s)" a CRIT "Q27 up but completions fail — timed out" fired
with two gateway WARNs for ~12 s.

So while an operation runs, and after it until each of its slots is up (``/health`` up,
no failed probe) or ``SETTLE_S`` has passed, the WARNs and CRITs of its slots are held:
one INFO says so instead. A condition that became true while held is the operation's
consequence: it stays held as long as it stays true, up to the deadline (the gateway's
cooldown outlasts the slot's return). A condition that appears after release is news.
An operation that failed holds nothing from its end on: what it left is real.

Pure bookkeeping on the session's clock (monotonic seconds as the caller gives them):
conditions in, conditions out; no Textual.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from msgspec import Struct, field
from msgspec.structs import replace

from console.model.conditions import Condition
from console.model.gateway import GatewaySnapshot, port_of
from console.model.snapshot import DeploymentSnapshot

SETTLE_S = 90.0
"""After an operation ends well, its slots' alerts are held at most this much longer
(until each is up): a slot that is not up by then is an outage, said."""
RUN_CAP_S = 3600.0
"""An operation still running after this long holds nothing more (its own timeouts end
it well before; this only bounds a hold whose end was never heard)."""
POD_KEYS = ("agent",)
"""Alerts about the pod that a pod-wide operation (a resume, a fallback) brings about."""
ALL_GATEWAY = "the gateway"
"""The gateway's totals' scope (``gateway.conditions``): every slot's requests."""


class Intent(Struct, frozen=True):
    """An operation that takes ``slots`` down on purpose (``pod``: the whole pod)."""

    op: str
    slots: frozenset[str]
    pod: bool
    started: float
    ended: float | None = None
    ok: bool | None = None
    up: frozenset[str] = frozenset()
    """Its slots seen up since it ended: released."""

    def deadline(self) -> float:
        if self.ended is None:
            return self.started + RUN_CAP_S
        return self.ended + SETTLE_S

    @property
    def waiting(self) -> frozenset[str]:
        return self.slots - self.up


def _gateway_scopes(gw: GatewaySnapshot | None, snap: DeploymentSnapshot | None
                    ) -> dict[str, frozenset[str]]:
    """A gateway alert's scope (what follows ``gw-…:`` or a rule's ``…:``: a deployment's
    model id, a model group) → the slots its requests go to (by the api_base's port)."""
    if gw is None or snap is None:
        return {}
    by_port = {s.port: s.slot for s in snap.slots}
    out: dict[str, set[str]] = {}
    for d in gw.deployments:
        slot = by_port.get(port_of(d.api_base) or -1)
        if slot is None:
            continue
        out.setdefault(d.model_id, set()).add(slot)
        out.setdefault(d.group, set()).add(slot)
    return {k: frozenset(v) for k, v in out.items()}


def _slots_of(key: str, slots: frozenset[str], scopes: Mapping[str, frozenset[str]]
              ) -> frozenset[str] | None:
    """The slots an alert key is about; None: not about particular slots."""
    _, sep, scope = key.partition(":")
    if not sep:
        return None
    if scope in slots:
        return frozenset({scope})
    if scope == ALL_GATEWAY:
        return slots
    return scopes.get(scope)


class InhibitBook(Struct):
    """The operations that hold their slots' alerts now, and what they hold."""

    intents: list[Intent] = field(default_factory=list)
    _caused: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Alert key → the operation whose effect it is, as (op, started): true since it was
    held. Held while that operation is still in the book (to its deadline)."""

    def begin(self, op: str, slots: Iterable[str], pod: bool, now: float) -> Intent:
        intent = Intent(op, frozenset(slots), pod, now)
        self.intents.append(intent)
        return intent

    def end(self, intent: Intent, ok: bool, now: float) -> None:
        """The operation is over; a failed one holds nothing more."""
        for i, x in enumerate(self.intents):
            if x is intent:
                self.intents[i] = replace(x, ended=now, ok=ok)
        if not ok:
            self.intents = [x for x in self.intents if x.ok is not False]

    def _settle(self, snap: DeploymentSnapshot | None, now: float) -> None:
        """Release the slots seen up since their operation ended; forget operations past
        their deadline (a released one is kept to it: the gateway's view lags)."""
        up = {s.slot for s in snap.slots if s.health == "up" and s.probe_ok is not False} \
            if snap is not None else set()
        kept = []
        for x in self.intents:
            if now >= x.deadline():
                continue
            if x.ended is not None:
                x = replace(x, up=x.up | (x.slots & up))
            kept.append(x)
        self.intents = kept

    def apply(self, conditions: Iterable[Condition], snap: DeploymentSnapshot | None,
              gw: GatewaySnapshot | None, now: float) -> list[Condition]:
        """The conditions to judge: those the operations' own effects raise held, one
        INFO per operation that holds something (or still waits for a slot)."""
        self._settle(snap, now)
        live = self.intents
        known = frozenset(s.slot for s in snap.slots) if snap is not None else frozenset()
        known = known.union(*(x.slots for x in live)) if live else known
        scopes = _gateway_scopes(gw, snap)
        out: list[Condition] = []
        held: dict[int, list[str]] = {}
        seen: set[str] = set()
        for c in conditions:
            seen.add(c.key)
            by = self._holder(c.key, known, scopes, now) if c.severity != "info" else None
            if by is None:
                out.append(c)
                continue
            self._caused.setdefault(c.key, (by.op, by.started))
            held.setdefault(id(by), []).append(c.title)
        ids = {(x.op, x.started) for x in live}
        self._caused = {k: v for k, v in self._caused.items() if k in seen and v in ids}
        for x in live:
            if x.waiting or held.get(id(x)):
                out.append(self._event(x, held.get(id(x), [])))
        return out

    def _holder(self, key: str, known: frozenset[str], scopes: Mapping[str, frozenset[str]],
                now: float) -> Intent | None:
        """The operation whose effect this alert is, if any: one of its slots is not up
        again yet; or it is the gateway's view of its slots (the gateway cools a route
        down and counts failures over a window: it lags the slot's return); or it became
        true while held and has stayed true."""
        slots = _slots_of(key, known, scopes)
        for x in self.intents:
            waiting = x.waiting if x.ended is not None else x.slots
            if x.pod and waiting and key in POD_KEYS:
                return x
            if slots is not None and slots & waiting:
                return x
            if key.startswith("gw-") and (
                    (slots is None and (x.pod or key == "gw-fallbacks"))
                    or (slots is not None and slots & x.slots)):
                return x
        caused = self._caused.get(key)
        return next((x for x in self.intents if (x.op, x.started) == caused), None)

    def restarting(self) -> dict[str, str]:
        """Slot → the operation taking it down on purpose now (running, or ended well
        and the slot not up again yet): Alertmanager is told (``SlotRestarting``), so
        that the rendered inhibit rule mutes Prometheus's own alerts of that slot too."""
        out: dict[str, str] = {}
        for x in self.intents:
            for slot in sorted(x.waiting if x.ended is not None else x.slots):
                out.setdefault(slot, x.op)
        return out

    @staticmethod
    def _event(x: Intent, titles: list[str]) -> Condition:
        waiting = x.waiting if x.ended is not None else x.slots
        what = ", ".join(sorted(waiting or x.slots))
        if x.ended is None:
            title = f"{x.op} running: alerts of {what} held until up"
        elif waiting:
            title = f"{x.op} done: alerts of {what} held until up (at most {SETTLE_S:.0f} s)"
        else:
            title = f"{x.op} done: {what} up; the gateway's view of it catching up"
        detail = ("held: " + "; ".join(titles[:4]) + (f" (+{len(titles) - 4})"
                                                      if len(titles) > 4 else "")
                  if titles else "its own effects (a slot down, a probe failing, the "
                  "gateway routing around it) are not outages")
        return Condition(f"operation:{x.op}:{x.started:.3f}", "info", title, detail)
