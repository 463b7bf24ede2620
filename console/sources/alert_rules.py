"""The console's alert rules as Prometheus rules, and the Alertmanager config that routes
them (issue 43, item 4): ``pod-console profile render`` writes ``prometheus/rules.yml``
and ``alertmanager.yml`` next to the scrape config, so the team's Prometheus pages with
no console open.

The rules use the config's thresholds (per slot), ``for`` and ``keep_firing_for`` (the
console's ``alerts.down_for_s``/``for_s``/``hold_s``), the same PromQL the console reads
its figures with (``promql.py``) and the same ``alertname`` and labels the console sends
Alertmanager (``console/session/alertmanager.py``), so one slot down is one alert there
whether the console, Prometheus or both say it. Annotations carry no ``$value``: the
alert's identity and text stay the same from one evaluation to the next.

Here (sources), not in ``config/render.py``: the PromQL comes from the engines' tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

from console.model import catalog, slo
from console.model.engines import DEFAULT, ENGINES
from console.sources.collect.promql import _w, engines_query, slo_share_query
from pod_agent.engines.base import with_edge

if TYPE_CHECKING:
    from console.config.settings import Settings
    from pod_agent.profile import Profile

BY = ("pod", "profile", "slot")
"""The labels ``profile render``'s targets give each slot's series."""
SLOT_NAMES = {"kv": "SlotKvCacheHigh", "ttft": "SlotTtftHigh",
              "slo": "SlotSloAttainmentLow"}
"""Threshold rules rendered (their ``alertname`` as the console sends it)."""
SLOT_TROUBLE = ("SlotDown|SlotStalled|SlotCompletionsFailing|SlotKvCacheHigh|SlotTtftHigh|"
                "SlotPreempting|SlotAcceptanceLow")
"""A slot's alerts that are trouble (not the info ones that say why it is down)."""
SCRAPE_S = 15.0
"""The rendered ``prometheus.yml``'s scrape interval."""
GATEWAY_JOB = "litellm"
"""The rendered scrape job of the gateway's ``/metrics``."""
RULES_FILE = "prometheus/rules.yml"
ALERTMANAGER_FILE = "alertmanager.yml"
SLACK_URL_FILE = "/etc/alertmanager/slack_api_url"
"""Where the rendered Alertmanager reads the Slack webhook URL from (a secret: never in
the config, and Alertmanager 0.25 does not expand environment variables)."""


def _dur(seconds: float) -> str:
    return _w(seconds) if seconds > 0 else "0s"


def _rule(name: str, expr: str, severity: str, summary: str, todo: str, for_s: float,
          hold_s: float, context: str, runbook_url: str | None) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "alert": name, "expr": expr, "for": _dur(for_s),
        "labels": {"severity": severity, "context": context},
        "annotations": {"summary": summary, **({"description": todo} if todo else {})}}
    if hold_s > 0:
        rule["keep_firing_for"] = _dur(hold_s)
    if runbook_url:
        rule["annotations"]["runbook_url"] = runbook_url.replace("{alertname}", name)
    return rule


def render_rules(profile: Profile, settings: Settings, context: str,
                 scrape_s: float = SCRAPE_S) -> dict[str, Any]:
    """The rule groups: the slots (down, stalled, each threshold per slot), the GPUs,
    the gateway, and the always-firing heartbeat. ``scrape_s``: Prometheus's scrape
    interval (a counter's move is seen one scrape after the sample before it)."""
    t = settings.alerts
    rb = settings.runbook_url
    job = '{job="vllm"}'
    slots: list[dict[str, Any]] = [
        # by the labels the console sends (not the series' job and instance): the same
        # label set, so Prometheus's SlotDown and the console's are one alert there
        _rule("SlotDown", f"max by ({', '.join(BY)}) (up{job}) == 0", "critical",
              "{{ $labels.slot }} down",
              "the slot's /metrics does not answer: see its log (l) or restart it (R)",
              t.down_for_s, t.hold_s, context, rb),
    ]
    stall = _w(t.stall_after_s)
    running = engines_query("running", settings.window_s, "", BY)
    gen = (f"sum by ({', '.join(BY)}) (increase(vllm:generation_tokens_total[{stall}]))"
           f" + sum by ({', '.join(BY)}) (increase(vllm:prompt_tokens_total[{stall}]))")
    if running is not None:
        slots.append(_rule(
            "SlotStalled", f"(({running}) > 0) unless on ({', '.join(BY)}) ({gen} > 0)",
            "critical", "{{ $labels.slot }} STALLED: requests running, no token moving",
            "/health may still say 200; restart the slot through the agent (R)",
            # the window is the wait already, as the console's StallWatch counts it
            0.0, t.hold_s, context, rb))
    for name in sorted(profile.slots):
        th = settings.thresholds_for(name, profile)
        sel = '{slot="' + name + '"}'
        for fig, rule in catalog.thresholds():
            alertname = SLOT_NAMES.get(rule.alert)
            limit = rule.limit(th)
            if alertname is None or limit is None:
                continue
            if rule.alert == "slo":
                r = _slo_rule(profile, name, th, settings, sel, context)
                if r is not None:
                    slots.append(r)
                continue
            expr = engines_query(fig.key, settings.window_s, sel, BY)
            if expr is None:
                continue
            op = "<" if rule.below else ">"
            r = _rule(alertname, f"({expr}) {op} {limit:g}", "warning",
                      f"{name} {fig.label} {op} {limit:g}", rule.hint or fig.label,
                      t.for_s, t.hold_s, context, rb)
            r["labels"]["slot"] = name  # (the series say it too: one rule per slot)
            slots.append(r)
    heartbeat = [{"alert": "Watchdog", "expr": "vector(1)",
                  "labels": {"severity": "none", "context": context, "sender": "prometheus"},
                  "annotations": {"summary": "the alerting pipeline is alive: this alert "
                                             "always fires (a dead-man's switch)"}}]
    return {"groups": [{"name": "pod-console-slots", "rules": slots},
                       {"name": "pod-console-gpus", "rules": gpu_rules(settings, context)},
                       {"name": "pod-console-gateway",
                        "rules": gateway_rules(settings, context, scrape_s)},
                       {"name": "pod-console-heartbeat", "rules": heartbeat}]}


def snap_down(edges: tuple[float, ...], target: float) -> float | None:
    """The highest edge at or under ``target`` (``numbers.share_under``'s rule)."""
    return max((e for e in edges if e <= target), default=None)


def _slo_rule(profile: Profile, name: str, th: Any, settings: Settings, sel: str,
              context: str) -> dict[str, Any] | None:
    """The slot's SLO attainment below its objective, as the console judges it
    (``console/model/slo.py``): for each latency with a target, the share of the
    window's requests at or under the target's edge (the engine's default buckets),
    where at least ``MIN_REQUESTS`` came; any one below the objective fires."""
    served = profile.slots[name]
    eng = ENGINES.get(served.engine, DEFAULT)
    t = settings.alerts
    parts, words = [], []
    for kind, target in slo.targets(th).items():
        edges = eng.slo_edges.get(kind, ())
        if served.slo is not None and served.slo.add_bucket_edges and eng is DEFAULT:
            # the pod's vLLM has the profile's own target among its edges
            edges = with_edge(edges, {"ttft": served.slo.ttft_s,
                                      "tpot": served.slo.tpot_s}[kind])
        edge = snap_down(edges, target)
        if kind not in eng.slo or edge is None:
            continue  # not exported, or no edge under the target: the console shows –
        share, count = slo_share_query(eng, kind, edge, settings.window_s, sel, BY)
        parts.append(f"(({share}) < {th.slo_objective:g} and on ({', '.join(BY)}) "
                     f"({count}) >= {slo.MIN_REQUESTS:g})")
        words.append(f"{slo.LABELS[kind]} ≤ {edge:g} s")
    if not parts:
        return None
    r = _rule("SlotSloAttainmentLow", " or ".join(parts), "warning",
              f"{name} SLO attainment < {th.slo_objective:.1%} ({', '.join(words)})",
              "requests slower than the slot's TTFT/TPOT target", t.for_s, t.hold_s,
              context, settings.runbook_url)
    r["labels"]["slot"] = name
    return r


GPU_BY = ("pod", "profile", "gpu")
"""The labels the GPU rules keep: the exporter's ``gpu`` (dcgm-exporter's index) and the
pod and profile ``profile render``'s GPU targets give it; the console sends the same."""


def _thermal_bits() -> tuple[int, ...]:
    """NVML's throttle-reason bits the console calls heat (``gpu_state.THERMAL``)."""
    from console.model.gpu_state import THERMAL
    from pod_agent.gpus import THROTTLE_REASONS

    return tuple(sorted(bit for bit, name in THROTTLE_REASONS.items() if name in THERMAL))


def gpu_rules(settings: Settings, context: str) -> list[dict[str, Any]]:
    """The console's GPU rules (``gpu_state.conditions``, ``gpu_faults``) over the
    ``DCGM_FI_DEV_*`` series the pod's exporter serves under dcgm-exporter's names:
    hardware faults at once, heat and throttling after ``for_s``. Not here: a process
    holding GPU memory for no slot (no exporter series says whose a process is), and
    the Xids the agent rates below critical (dcgm-exporter keeps only the last code)."""
    from pod_agent.gpus import XID_MEANING

    t = settings.alerts
    rb = settings.runbook_url
    by = ", ".join(GPU_BY)

    def g(name: str) -> str:
        return f"max by ({by}) ({name})"

    # PromQL has no bitwise and: bit b of the mask is floor(mask / b) % 2
    mask = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
    hot = "max by (" + by + ") (" + " + ".join(
        f"(floor({mask} / {bit}) % 2)" for bit in _thermal_bits()) + ")"
    out = []
    for code, (severity, meaning, advice) in sorted(XID_MEANING.items()):
        if severity != "critical":
            continue
        # kept until the pod's next run, as the console keeps the fault: the exporter
        # serves the GPU's last Xid until it restarts with the pod
        r = _rule("GpuXid", f"{g('DCGM_FI_DEV_XID_ERRORS')} == {code}", "critical",
                  f"GPU {{{{ $labels.gpu }}}} Xid {code}: {meaning}", advice, 0.0,
                  t.hold_s, context, rb)
        r["labels"]["xid"] = str(code)
        out.append(r)
    out += [
        _rule("GpuEccErrors", f"{g('DCGM_FI_DEV_ECC_DBE_VOL_TOTAL')} > 0", "critical",
              "GPU {{ $labels.gpu }} double-bit ECC errors",
              "take this GPU out of service: a fallback pod (f)", 0.0, t.hold_s, context,
              rb),
        _rule("GpuRowRemapFailed", f"{g('DCGM_FI_DEV_ROW_REMAP_FAILURE')} == 1",
              "critical", "GPU {{ $labels.gpu }} row remapping failed",
              "the GPU cannot hide its bad memory: a fallback pod (f)", 0.0, 0.0, context,
              rb),
        _rule("GpuRowRemapPending",
              f"(({g('DCGM_FI_DEV_ROW_REMAP_PENDING')} == 1) or "
              f"({g('DCGM_FI_DEV_RETIRED_PENDING')} == 1)) unless on ({by}) "
              f"({g('DCGM_FI_DEV_ROW_REMAP_FAILURE')} == 1)", "warning",
              "GPU {{ $labels.gpu }} memory repair pending a reset",
              "plan a pod restart (r after a stop)", 0.0, t.hold_s, context, rb),
        _rule("GpuThrottled", f"{hot} > 0", "warning",
              "GPU {{ $labels.gpu }} throttled (thermal)",
              "the GPU slows itself down: check its temperature and the host's cooling",
              t.for_s, t.hold_s, context, rb),
        # within 5 degrees of its slowdown temperature; a throttled GPU says so instead
        _rule("GpuHot", f"({g('DCGM_FI_DEV_GPU_TEMP')} >= on ({by}) "
              f"({g('DCGM_FI_DEV_SLOWDOWN_TEMP')} - 5)) unless on ({by}) ({hot} > 0)",
              "warning", "GPU {{ $labels.gpu }} near its slowdown temperature", "",
              t.for_s, t.hold_s, context, rb),
    ]
    return out


HEADER = """\
# Rendered by `pod-console profile render` (issue 43): routes by severity and context,
# inhibit rules, and the heartbeats.
#
# Heartbeats: alertname="Watchdog" always fires while its sender lives; it is the
# dead-man's-switch convention. sender="pod-console" comes from any console session,
# sender="prometheus" from Prometheus running rules.yml (both to the "heartbeat"
# receiver), sender="pod-agent" from each pod's agent, with its pod and profile labels
# (to "heartbeat-pod-agent"; the agent sends it when POD_AGENT_ALERTMANAGER_URL is in
# its environment or .env). Both receivers are empty: nothing is notified. To be paged
# when a heartbeat stops, give its receiver a webhook pointing at a dead-man's-switch
# service (one that pages when it has heard nothing for a few minutes), e.g.
#
#   - name: heartbeat-pod-agent
#     webhook_configs:
#       - url: https://deadman.example/ping/POD-AGENT-CHECK
#         send_resolved: true
#
# Each heartbeat group is notified every minute while it fires, and once "resolved"
# when its sender stopped sending (within 4 of its intervals: the console's 1 min, the
# agent's 4 x `serve --heartbeat-interval`, 2 min by default). Give each receiver its own
# check: one service hearing the console's heartbeat would not notice a pod agent gone.
# The agent's heartbeat also ends when its pod stops (a planned stop included).
"""
"""The rendered ``alertmanager.yml``'s opening comment (YAML keeps no comments)."""


def render_alertmanager(slack_url_file: str = SLACK_URL_FILE,
                        channel: str = "#oncall") -> dict[str, Any]:
    """A route by severity and context, the inhibit rules, the heartbeat to a null
    receiver. The Slack URL is read from ``slack_url_file`` (the team provides it)."""
    slack = {"api_url_file": slack_url_file, "channel": channel, "send_resolved": True,
             "title": '[{{ .Status | toUpper }}] {{ .CommonLabels.alertname }} '
                      '({{ .CommonLabels.context }})',
             "text": '{{ range .Alerts }}{{ .Annotations.summary }}'
                     '{{ if .Annotations.description }}: {{ .Annotations.description }}'
                     '{{ end }}\n{{ end }}'}
    return {
        "route": {
            "receiver": "team", "group_by": ["alertname", "context", "pod"],
            "group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h",
            "routes": [
                # the heartbeats (HEADER says how a dead-man's switch is wired): to
                # nobody here. One group per sender and pod, each notified every minute
                # (group_interval too: a repeat comes no sooner than the group's next
                # flush); the pod agent's to a receiver of its own
                {"matchers": ['alertname="Watchdog"'], "receiver": "heartbeat",
                 "group_by": ["alertname", "sender", "context", "pod"],
                 "group_wait": "0s", "group_interval": "1m", "repeat_interval": "1m",
                 "routes": [{"matchers": ['sender="pod-agent"'],
                             "receiver": "heartbeat-pod-agent"}]},
                {"matchers": ['severity="critical"'], "receiver": "team",
                 "group_by": ["alertname", "context", "pod", "slot"],
                 "group_wait": "10s", "repeat_interval": "1h", "continue": False},
                {"matchers": ['severity="warning"'], "receiver": "team",
                 "repeat_interval": "12h"},
                # info (a planned stop, a slot starting): on screens and in the API, no page
                {"matchers": ['severity="info"'], "receiver": "null"},
            ]},
        "receivers": [{"name": "null"}, {"name": "heartbeat"}, {"name": "heartbeat-pod-agent"},
                      {"name": "team", "slack_configs": [slack]}],
        "inhibit_rules": [
            # a stop somebody meant (PodStopPlanned, info) silences its pod's slot,
            # gateway, GPU and agent alerts; so does one nobody here made (PodStopped, a
            # warning: the team is told once, not per slot), as the console does
            {"source_matchers": ['alertname=~"PodStopPlanned|PodStopped"'],
             # the gateway's deployments and rates, not its own health: a gateway down
             # is down for every pod behind it (``gateway.on_the_pod``)
             "target_matchers": ['alertname=~"Slot.*|GatewayDeploymentCooldown|'
                                 'GatewayRouteFailing|GatewayFallbacksRising|Gateway5xxHigh|'
                                 'GatewayOverheadHigh|Gpu.*|PodAgentUnreachable"'],
             "equal": ["context", "pod"]},
            # a slot taken down on purpose (the console's restart, rebalance, resume:
            # SlotRestarting while it runs and until the slot is up; the agent bringing
            # it up: SlotStarting): not an outage, whoever's rules say it is
            {"source_matchers": ['alertname=~"SlotRestarting|SlotStarting"'],
             "target_matchers": [f'alertname=~"{SLOT_TROUBLE}"'],
             "equal": ["context", "pod", "slot"]},
            # one cooldown is one page (the console tells its fallbacks and 5xx under
            # it): Prometheus's of the same pod wait while it fires
            {"source_matchers": ['alertname="GatewayDeploymentCooldown"'],
             "target_matchers": ['alertname=~"Gateway5xxHigh|GatewayFallbacksRising"'],
             "equal": ["context", "pod"]},
            # a slot down says it all: not its stall or its figures too
            {"source_matchers": ['alertname="SlotDown"'],
             "target_matchers": ['alertname=~"SlotStalled|SlotKvCacheHigh|SlotTtftHigh|'
                                 'SlotSloAttainmentLow|SlotCompletionsFailing"'],
             "equal": ["context", "pod", "slot"]},
        ],
    }


def render_prometheus_alerting(am_target: str = "127.0.0.1:9093") -> dict[str, Any]:
    """What ``prometheus.yml`` adds to run the rules and send to Alertmanager."""
    return {"rule_files": ["rules.yml"],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [am_target]}]}]}}


def dump(doc: dict[str, Any]) -> str:
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False,
                          allow_unicode=True, width=1000)


GW_BY = ("pod", "profile")
"""The labels ``profile render``'s gateway target gives its series (the console labels
its gateway alerts with its own pod and profile: the same)."""
THE_GATEWAY = "the gateway"
"""The whole gateway's scope (``gateway.conditions``)."""


def gateway_rules(settings: Settings, context: str, scrape_s: float = SCRAPE_S
                  ) -> list[dict[str, Any]]:
    """The console's gateway rules (``gateway.conditions``) over LiteLLM's own series
    (``catalog.GW_*``) as Prometheus scrapes them (job ``litellm``): the gateway down,
    a deployment cooling down (or failing with no call succeeding), its fallbacks, the
    5xx share of calls per model group and overall, with the config's limits and
    timing, and the gateway's own overhead p95 per model group and overall. One cooldown
    is one page: the rendered Alertmanager inhibits the fallbacks and 5xx of its pod
    while it fires, as the console tells them under it.

    Not here: readiness (``/health/readiness`` is no metric), figures unreadable, a
    route failing while its slot is healthy (a join of the gateway with the slots by
    port)."""
    from console.model.catalog import (
        FIVE_XX,
        GW_COOLDOWNS,
        GW_FAILURES,
        GW_FALLBACK_FAILED,
        GW_FALLBACK_OK,
        GW_OVERHEAD,
        GW_REQUESTS,
        GW_STATE,
    )

    t = settings.alerts
    gw = settings.gateway
    rb = settings.runbook_url
    win = _w(settings.window_s)
    by = ", ".join(GW_BY)
    dep = f"{by}, model_id"
    grp = f"{by}, requested_model"
    five = f'{{{FIVE_XX[0]}=~"{FIVE_XX[1]}"}}'

    def inc(name: str, keys: str, sel: str = "") -> str:
        return f"sum by ({keys}) (increase({name}{sel}[{win}]))"

    def scoped(expr: str, label: str) -> str:
        # the console's ``scope`` label (a model id, a group) in place of LiteLLM's
        return (f'max by ({by}, scope) (label_replace({expr}, "scope", "$1", "{label}", '
                '"(.*)"))')

    # ``deployment_status``: state 2 is a cooldown while its counter moved within the
    # router's cooldown_time (seen one scrape after the sample before it), or failing
    # while its calls fail and none succeeds in the window
    moved = (f"(max by ({dep}) (changes({GW_COOLDOWNS}[{_w(gw.cooldown_s + scrape_s + 1)}]))"
             " > 0) or "
             # LiteLLM creates a deployment's counter at its first cooldown: a series
             # born within cooldown_time has just moved (as the console counts it)
             f"(max by ({dep}) ({GW_COOLDOWNS} unless {GW_COOLDOWNS} offset "
             f"{_w(gw.cooldown_s + 1)}) > 0)")
    # a success is a call not failed: their difference as a counter of its own (the
    # two increases apart extrapolate differently: a failure counter born at 0 is not
    # stretched to the window's start)
    oks = (f"increase((sum by ({dep}) ({GW_REQUESTS}) - sum by ({dep}) ({GW_FAILURES}))"
           f"[{win}:{_w(scrape_s)}])")
    failing = f"({inc(GW_FAILURES, dep)} > 0) unless on ({dep}) ({oks} > 0)"
    cooling = (f"(max by ({dep}) ({GW_STATE}) >= 1.5) and on ({dep}) "
               f"(({moved}) or ({failing}))")
    ratio = (f"({inc(GW_FAILURES, grp, five)} / {inc(GW_REQUESTS, grp)}) > "
             f"{gw.error_5xx_ratio:g}")
    total = (f"({inc(GW_FAILURES, by, five)} / {inc(GW_REQUESTS, by)}) > "
             f"{gw.error_5xx_ratio:g}")
    fallbacks = (f'sum by ({by}) (increase({{__name__=~"{GW_FALLBACK_OK}|'
                 f'{GW_FALLBACK_FAILED}"}}[{win}])) > 0')
    def p95(keys: str) -> str:
        return (f"histogram_quantile(0.95, sum by ({keys}, le) "
                f"(increase({GW_OVERHEAD}_bucket[{win}])))")

    slow = f"{p95(by + ', model_group')} > {gw.overhead_p95_s:g}"
    slow_all = _rule("GatewayOverheadHigh", f"{p95(by)} > {gw.overhead_p95_s:g}", "warning",
                     f"gateway overhead p95 over {gw.overhead_p95_s:g}s on all calls", "",
                     t.for_s, t.hold_s, context, rb)
    slow_all["labels"]["scope"] = THE_GATEWAY
    every = _rule("Gateway5xxHigh", total, "warning",
                  f"gateway 5xx over {gw.error_5xx_ratio:.0%} of the calls", "", t.for_s,
                  t.hold_s, context, rb)
    every["labels"]["scope"] = THE_GATEWAY
    return [
        _rule("GatewayDown", f'max by ({by}) (up{{job="{GATEWAY_JOB}"}}) == 0', "critical",
              "gateway down", "its /metrics does not answer: every model behind it is "
              "unreachable for its users", t.down_for_s, t.hold_s, context, rb),
        _rule("GatewayDeploymentCooldown", scoped(cooling, "model_id"), "warning",
              "{{ $labels.scope }} cooling down at the gateway",
              "LiteLLM routes around it; its fallbacks and the 5xx it causes are this "
              "alert's (inhibited while it fires)", t.down_for_s, t.hold_s, context, rb),
        _rule("GatewayFallbacksRising", fallbacks, "warning", "gateway fallbacks rising",
              "requests fail over to another model group", t.for_s, t.hold_s, context, rb),
        _rule("Gateway5xxHigh", scoped(ratio, "requested_model"), "warning",
              f"gateway 5xx over {gw.error_5xx_ratio:.0%} of "
              "{{ $labels.scope }} calls", "", t.for_s, t.hold_s, context, rb),
        every,
        _rule("GatewayOverheadHigh", scoped(slow, "model_group"), "warning",
              f"gateway overhead p95 over {gw.overhead_p95_s:g}s on "
              "{{ $labels.scope }} calls", "", t.for_s, t.hold_s, context, rb),
        slow_all,
    ]
