"""The gateway (LiteLLM) polled beside the slots: one room of the session (issue 46).

Its collector is kept here, made by the composition root
(``deployment.gateway_collector``) from the settings in force (a new ``gateway_url``
makes a new one) and given the request timeout of the refresh in force at every poll.
It is read with the pod's run in mind: after a planned stop the gateway's window
starts at the new run's start (:func:`since`), and until that window has passed the
failures in it are the stop's (:func:`counts_the_stop`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec.structs import replace

if TYPE_CHECKING:
    from console.model.gateway import GatewaySnapshot
    from console.model.pod_run import PodRun
    from console.session.view import ConsoleContext
    from console.sources.collect.gateway import GatewayCollector
    from console.sources.collect.http import HttpClient


def wanted(ctx: ConsoleContext | None) -> bool:
    """Whether this session watches a gateway (``gateway_url`` with ``gateway.watch``)."""
    st = ctx.settings if ctx is not None else None
    return bool(st is not None and st.gateway_url and st.gateway.watch)


def since(run: PodRun | None) -> float | None:
    """Where the gateway's window may start: a run that began after a planned stop
    counts from its own start (the stop's failed calls are not the new run's: a
    resumed pod showed ``gw err 88 %`` for the window's 5 minutes), else anywhere."""
    prior = run.previous if run is not None else None
    if run is None or prior is None or not prior.planned or run.began is None:
        return None
    return run.began


def counts_the_stop(run: PodRun | None, gw: GatewaySnapshot | None, now: float,
                    window_s: float) -> bool:
    """Whether the gateway's figures still count the planned stop that ended the last
    run: its rates are over a window (``window_s``), and the calls that failed while the
    pod was stopped on purpose stay in it for that long after the resume."""
    prior = run.previous if run is not None else None
    if run is None or gw is None or prior is None or not prior.planned:
        return False
    began = run.began if run.began is not None else now
    return 0.0 <= now - began < (gw.window_s or window_s)


class GatewayPolling:
    """The session's gateway collector, kept across polls (its earlier scrapes are the
    window's far end)."""

    def __init__(self) -> None:
        self.collector: GatewayCollector | None = None

    async def poll(self, ctx: ConsoleContext, client: HttpClient, now: float,
                   run: PodRun | None, timeout_s: float) -> GatewaySnapshot:
        """One reading, with the slots' client and the request timeout of the refresh in
        force now (``timeout_s``: set again at every poll, never kept from creation)."""
        from console.session.deployment import gateway_collector

        st = ctx.settings
        col = self.collector
        if col is None or col.url != (st.gateway_url or "").rstrip("/"):
            col = self.collector = gateway_collector(st, client, timeout_s, ctx.profile)
        col.timeout_s = timeout_s
        if col.prom is not None and col.prom.timeout != timeout_s:
            col.prom = replace(col.prom, timeout=timeout_s)
        return await col.poll(now, since(run))

    def shift(self, by: float) -> None:
        """The wall clock stepped ``by``: the kept scrapes' times move with it."""
        if self.collector is not None:
            self.collector.shift(by)
