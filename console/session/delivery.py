"""Where the alerts a session judged go: the shared book every session on the state dir
keeps, the webhook's outbox, Alertmanager (issue 43), and the audit log for hardware
faults. One room of the session (issue 46): its state — what is being sent, what waits
for a silence, what failed last — lives here, not on the :class:`Session`.

Everything here runs beside the poll, never inside it (``spawn``): neither a slow disk
nor a slow receiver may hold the figures. The session tells this room what changed
(:meth:`AlertDelivery.tell`, :meth:`AlertDelivery.acknowledged`); the room reads the
session back only through :class:`DeliveryHost`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from console.model.alerts import Alert, AlertBook
from console.session.pacing import webhook_timeout_s

if TYPE_CHECKING:
    from console.model.snapshot import PodSnapshot
    from console.session.alertmanager import Alertmanager, Where
    from console.session.intents import OperationIntents
    from console.session.outbox import Outbox
    from console.session.shared_alerts import SharedAlerts
    from console.session.view import ConsoleContext, ConsoleView

AM_RESEND_FLOOR_S = 15.0
"""A firing alert sent to Alertmanager ends 4 x max(refresh, this) ahead: a console that
stops sending lets it resolve there within a minute, a slow poll does not."""
WATCHDOG_SAVE_S = 30.0
"""How often the heartbeat's last send is written for ``status --json``."""
ACKS_READ_S = 10.0
"""How often the silences made elsewhere are read back as acknowledgements."""
GPU_FAULTS = ("xid:", "ecc:", "remapfail:")
"""Alert keys of hardware faults: facts about the pod that the audit log keeps."""

RunBlocking = Callable[..., Awaitable[Any]]
Spawn = Callable[[Coroutine[Any, Any, Any], str], None]
Note = Callable[[str, str], None]


class DeliveryHost(Protocol):
    """What delivery reads of its session: the context, the clocks, the alert book,
    the last pod reading and the refresh its timeouts are derived from."""

    ctx: ConsoleContext | None
    wall: bool
    alerts: AlertBook
    intents: OperationIntents
    """The operations that take slots down on purpose (``SlotRestarting`` is sent)."""

    def now(self) -> float: ...

    def mono(self) -> float: ...

    @property
    def view(self) -> ConsoleView: ...

    @property
    def pod(self) -> PodSnapshot | None: ...

    @property
    def refresh_s(self) -> float: ...


class AlertDelivery:
    """One session's sending of alerts (see the module docstring)."""

    def __init__(self, host: DeliveryHost, *, run_blocking: RunBlocking, spawn: Spawn,
                 note: Note, on_change: Callable[[str], None]) -> None:
        self.host = host
        self._run_blocking = run_blocking
        self._spawn = spawn
        self._note = note
        self._on_change = on_change
        self._shared: SharedAlerts | None = None
        self._share_lock: asyncio.Lock | None = None
        self._share_failed = False
        self.acked: list[Alert] = []
        """Acknowledged here, not yet in the shared book."""
        self._unposted: set[str] = set()
        """Alerts whose post this session claimed and could not deliver."""
        self._outbox: Outbox | None = None
        self._draining = False
        self._drain_error: str | None = None
        self._am: Alertmanager | None = None
        self.am_busy = False
        self._am_error: str | None = None
        self.am_resolved: list[tuple[Alert, float]] = []
        """Cleared here, not yet told to Alertmanager: (alert, when it cleared)."""
        self._am_restarting: dict[str, tuple[str, float]] = {}
        """Slot → (operation, since): the ``SlotRestarting`` alerts Alertmanager has."""
        self.am_silence: list[tuple[Alert, str]] = []
        """Acknowledged here, no silence made yet: (alert, who)."""
        self._am_acks_at = -math.inf
        self._am_started = time.time()
        self.watchdog_sent_at: float | None = None
        """When this session's heartbeat last reached Alertmanager (None: never)."""
        self._watchdog_saved_at = -math.inf

    def tell(self, raised: list[Alert], cleared: list[Alert]) -> None:
        """A poll's alert changes, out to everything that hears of them."""
        host = self.host
        faults = [a for a in raised if a.key.startswith(GPU_FAULTS)]
        if faults and not host.wall:
            self._spawn(self.audit_faults(faults), "audit-gpu")
        if host.ctx is not None and (raised or cleared or self.acked or host.alerts.firing()):
            self._spawn(self.share(raised, cleared), "alerts")
        elif host.ctx is not None and host.ctx.settings.webhook_url and not self._draining:
            # entries left by a failed POST, a killed session or a webhook-less one
            self._spawn(self.drain(), "webhook")
        if host.ctx is not None and host.ctx.settings.alertmanager_url:
            now = host.now()
            self.am_resolved += [(a, now) for a in cleared]
            if not self.am_busy:  # (one in flight sends these at its end)
                self._spawn(self.to_alertmanager(), "alertmanager")

    def acknowledged(self, done: list[Alert], who: str) -> None:
        """Alerts acknowledged here: into the shared book, and a silence each where
        Alertmanager knows them (a group's consequences are not sent)."""
        ctx = self.host.ctx
        if not done or ctx is None:
            return
        self.acked.extend(done)
        self._spawn(self.share([], []), "alerts")
        if ctx.settings.alertmanager_url:
            self.am_silence += [(a, who) for a in done if a.told]
            if not self.am_busy:
                self._spawn(self.to_alertmanager(), "alertmanager")

    async def aclose(self) -> None:
        if self._am is not None:
            await self._am.aclose()

    async def share(self, raised: list[Alert], cleared: list[Alert]) -> None:
        """This session's alert changes into the book every session on the state dir
        shares (``shared_alerts.py``); post to the webhook what no other session has, and
        show the acknowledgements made elsewhere. In the order the polls made them."""
        from console.session.outbox import Outbox
        from console.session.shared_alerts import SharedAlerts, SharedAlertsError, Synced

        assert self.host.ctx is not None
        url = self.host.ctx.settings.webhook_url
        if self._share_lock is None:  # made on the loop that uses it
            self._share_lock = asyncio.Lock()
        async with self._share_lock:
            if self._shared is None:
                self._shared = SharedAlerts(self.host.ctx.settings.state_dir)
                self._outbox = Outbox(self.host.ctx.settings.state_dir)
            acked, self.acked = self.acked, []
            unposted, self._unposted = self._unposted, set()
            try:
                # every session, webhook or not, hands what it judged to the outbox
                # (``outbox.py``); only those with a webhook deliver it
                synced = await self._run_blocking(
                    self._shared.sync, self.host.now(), raised=raised, cleared=cleared,
                    firing=self.host.alerts.told(), acked=acked, unposted=unposted,
                    webhook=url is not None, outbox=self._outbox,
                    source=f"pod-console {self.host.view.profile_name}")
                self._share_failed = False
            except SharedAlertsError as exc:  # this session then posts on its own
                if not self._share_failed:
                    self._note(f"shared alert book not usable ({exc}): this session posts "
                               "its own alerts", "warn")
                self._share_failed = True
                synced = Synced(tuple(raised), tuple(cleared))
                if url and (raised or cleared):  # no outbox either: at most once
                    self._spawn(self._send(url.get_secret_value(), raised, cleared),
                                "webhook")
            if synced.warning:
                self._note(synced.warning, "warn")
            adopted = [a for key, (who, at) in synced.acks.items()
                       if (a := self.host.alerts.adopt_ack(key, who, at)) is not None]
        if adopted:
            self._on_change("alerts")
        if url and not self._share_failed and not self._draining:
            self._spawn(self.drain(), "webhook")

    async def drain(self) -> None:
        """The outbox to the webhook: what this or any session judged and nobody
        delivered yet (one drainer at a time across sessions, ``outbox.py``)."""
        from console.session.outbox import Outbox, drain

        ctx = self.host.ctx
        if ctx is None or ctx.settings.webhook_url is None or self._draining:
            return
        if self._outbox is None:
            self._outbox = Outbox(ctx.settings.state_dir)
        self._draining = True
        errors: list[str] = []
        try:
            await drain(self._outbox, ctx.settings.webhook_url.get_secret_value(),
                        webhook_timeout_s(self.host.refresh_s), self._run_blocking,
                        errors.append, now=self.host.now())
        except Exception as exc:  # an unusable outbox: said once, the next poll tries again
            errors.append(f"webhook outbox not usable: {type(exc).__name__}: {exc}"[:200])
        finally:
            self._draining = False
        # said when it starts failing and when the reason changes, not at every retry
        err = errors[-1].split(": tried again")[0] if errors else None
        if err is not None and err != self._drain_error:
            self._note(f"{errors[-1]} (kept in the outbox)", "crit.text")
        self._drain_error = err

    # -- Alertmanager (``alertmanager.py``) ----------------------------------------------
    def where(self) -> Where:
        from console.session.alertmanager import DEFAULT_CONTEXT, Where

        assert self.host.ctx is not None
        st = self.host.ctx.settings
        pod = self.host.pod.pod_id if self.host.pod is not None else None
        return Where(self.host.view.profile_name, pod or st.pod.machine_id or "local",
                     st.context or DEFAULT_CONTEXT)

    async def to_alertmanager(self) -> None:
        """Every firing alert again (``endsAt`` a few polls ahead), the cleared ones with
        ``endsAt`` now, the heartbeat; then the silences asked for and those to expire,
        and every ``ACKS_READ_S`` the silences made elsewhere, shown as acknowledgements."""
        from console.session.alertmanager import (
            Alertmanager,
            AlertmanagerError,
            api_alert,
            labels_of,
            restarting,
            watchdog,
        )

        ctx = self.host.ctx
        url = ctx.settings.alertmanager_url if ctx is not None else None
        if ctx is None or not url or self.am_busy:
            return
        st = ctx.settings
        if self._am is None:
            self._am = Alertmanager(url, webhook_timeout_s(self.host.refresh_s))
        am = self._am
        am.timeout_s = webhook_timeout_s(self.host.refresh_s)  # derived from the refresh now
        self.am_busy = True
        try:
            while True:
                now = self.host.now()
                where = self.where()
                # as Prometheus: 4 x the resend interval, so one late poll resolves nothing
                ends = now + 4 * max(self.host.refresh_s, AM_RESEND_FLOOR_S)
                resolved, self.am_resolved = self.am_resolved, []
                batch = [api_alert(a, where, now, ends_at=ends, runbook_url=st.runbook_url)
                         for a in self.host.alerts.told()]  # not what a parent explains
                # two alerts of one label set (two Xid 79 of a GPU): one ending while
                # the other fires resolves nothing there
                live = [x["labels"] for x in batch]
                batch += [x for a, at in resolved if (x := api_alert(
                    a, where, now, ends_at=at, runbook_url=st.runbook_url))["labels"]
                    not in live]
                # a slot taken down on purpose, while it is: an inhibit source there
                was = self._am_restarting
                held = {slot: was.get(slot, (op, now))
                        for slot, op in self.host.intents.inhibits.restarting().items()}
                batch += [restarting(slot, op, where, since, now, ends_at=ends)
                          for slot, (op, since) in held.items()]
                batch += [restarting(slot, op, where, since, now, ends_at=now)
                          for slot, (op, since) in was.items() if slot not in held]
                batch.append(watchdog(where, now, ends, self._am_started))
                try:
                    await am.post_alerts(batch)
                    self._am_restarting = held
                    self.watchdog_sent_at = now
                    await self._silences(am, where, now, [
                        a for a, _ in resolved if labels_of(a, where) not in live])
                    self._said(None)
                except AlertmanagerError as exc:
                    # a resolve not told is told at the next try; once its firing
                    # endsAt has passed, Alertmanager has resolved it on its own
                    self.am_resolved = [(a, at) for a, at in resolved
                                         if now - at < 4 * max(self.host.refresh_s,
                                                               AM_RESEND_FLOOR_S)
                                         ] + self.am_resolved
                    self._said(str(exc))
                    return
                if not self.am_resolved and not self.am_silence:
                    break  # nothing arrived while this one was on its way
        finally:
            self.am_busy = False
        if self.host.mono() - self._watchdog_saved_at >= WATCHDOG_SAVE_S and not self.host.wall:
            self._watchdog_saved_at = self.host.mono()  # a cadence: monotonic
            from console.session.alertmanager import save_watchdog

            # a full disk costs status --json its "last sent", not the alert
            with contextlib.suppress(OSError):
                await self._run_blocking(save_watchdog, st.state_dir, now)

    async def _silences(self, am: Alertmanager, where: Where, now: float,
                           cleared: list[Alert]) -> None:
        from console.session.alertmanager import (
            ACK_COMMENT,
            acked_here,
            exact,
            labels_of,
            silence,
        )

        assert self.host.ctx is not None
        asked, self.am_silence = self.am_silence, []
        until = now + self.host.ctx.settings.alertmanager_ack_max_s
        made = []
        for i, (a, who) in enumerate(asked):
            try:
                await am.create_silence(silence(labels_of(a, where), who, now, until))
            except Exception:
                self.am_silence = asked[i:] + self.am_silence  # made at the next try
                raise
            made.append(a.key)
        if made:
            self._note(f"silenced in Alertmanager: {len(made)} alert(s)", "dim")
        fresh = bool(made) or self.host.mono() - self._am_acks_at >= ACKS_READ_S
        if not cleared and not fresh:
            return
        silences = await am.silences()
        # an acknowledgement never outlives its run: its silence ends with the alert
        gone = [labels_of(a, where) for a in cleared]
        for s in silences:
            if ((s.get("status") or {}).get("state") == "active"
                    and str(s.get("comment", "")).startswith(ACK_COMMENT)
                    and exact(s.get("matchers") or []) in gone and isinstance(s.get("id"), str)):
                await am.expire_silence(s["id"])
        if fresh:
            self._am_acks_at = self.host.mono()
            ours = {a.key: labels_of(a, where) for a in self.host.alerts.told()}
            acks = acked_here(await am.alerts(), silences, ours)
            adopted = [key for key, (who, at) in acks.items()
                       if self.host.alerts.adopt_ack(key, who, at) is not None]
            if adopted:
                self._on_change("alerts")

    def _said(self, err: str | None) -> None:
        """Said when Alertmanager starts failing, when the reason changes, and when it
        answers again: not at every poll."""
        if err is not None and err != self._am_error:
            self._note(f"{err} (sent again at the next poll)", "crit.text")
        elif err is None and self._am_error is not None:
            self._note("Alertmanager answers again", "ok")
        self._am_error = err

    async def audit_faults(self, faults: list[Alert]) -> None:
        """Hardware faults outlive the screen: audited (the agent's own audit log on the
        pod has each Xid too)."""
        assert self.host.ctx is not None
        audit = self.host.ctx.registry.audit
        for a in faults:
            try:
                await self._run_blocking(audit.append, "gpu_fault", {
                    "alert": a.key, "title": a.title, "advice": a.detail}, "observed")
            except Exception as exc:  # a full disk: said, the alert still stands
                self._note(f"AUDIT RECORD LOST for {a.title}: {exc}", "crit")

    async def _send(self, url: str, raised: list[Alert], cleared: list[Alert]) -> bool:
        from console.model.alerts import notify

        err = await notify(url, raised, cleared, f"pod-console {self.host.view.profile_name}",
                           timeout_s=webhook_timeout_s(self.host.refresh_s))
        if err:
            self._note(err, "crit.text")
            self._unposted.update(a.key for a in raised)  # another session may post them
        return err is None
