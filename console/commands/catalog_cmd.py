"""``pod-console catalog``: every figure the console shows, where it comes from and how.

The trace from a number on screen to its formula: the exposition names the direct path
reads, the PromQL the Prometheus path sends, the column, plot and threshold."""

from __future__ import annotations

import argparse
import json
from typing import Any

from console.commands import examples
from console.commands.argtypes import seconds


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("catalog", help="the metric catalog: each figure's sources, PromQL, "
                                       "column, plot and threshold",
        **examples(
            'pod-console catalog                  # every figure and its PromQL',
            'pod-console catalog --json --window 60',
        ))
    p.add_argument("--json", action="store_true", help="print JSON, one object per figure")
    p.add_argument("--window", type=seconds(0, 86400, above=True), default=300.0,
                   help="window of the PromQL shown (s)")
    p.set_defaults(func=cmd_catalog)


def rows(window_s: float) -> list[dict[str, object]]:
    """Every figure of the slots' catalog, then the gateway's (issue 34): per deployment,
    and its usage per user."""
    from console.model.catalog import CATALOG, GATEWAY, GATEWAY_USAGE
    from console.sources.collect.promql import GATEWAY_BY, MODEL_BY, USERS_BY

    out: list[dict[str, object]] = []
    for family, figs, by in (("slot", CATALOG, MODEL_BY), ("gateway", GATEWAY, GATEWAY_BY),
                             ("gateway usage", GATEWAY_USAGE, USERS_BY)):
        for fig in figs:
            out.append(_row(fig, family, window_s, by))
    return out


def _row(fig: Any, family: str, window_s: float, by: tuple[str, ...]) -> dict[str, object]:
    from msgspec import to_builtins

    from console.sources.collect.promql import source_query

    gateway = family != "slot"
    setting = None if fig.threshold is None else fig.threshold.setting
    if fig.key == "slo_attainment":  # of no engine source: per kind, from its histogram
        source, definition, promql = "SloAttainment", {"words": fig.words}, slo_promql(
            window_s, by)
    else:
        source, definition = type(fig.source).__name__, to_builtins(fig.source)
        # a gateway gauge is its scope's worst series (the deployment state's max)
        promql = source_query(fig.source, window_s, by=by, gauge="max" if gateway else None)
    return {
        "family": family, "key": fig.key, "label": fig.label,
        "source": source, "definition": definition, "promql": promql,
        "metrics_json": fig.json, "column": fig.column.header if fig.column else None,
        "plot": fig.plot.title if fig.plot else None,
        "threshold": None if fig.threshold is None else (
            (f"gateway.{setting}" if gateway else setting) if setting
            else f"fixed {fig.threshold.fixed:g}"),
        "per_slot": fig.per_slot}


def slo_promql(window_s: float, by: tuple[str, ...]) -> str:
    """SLO attainment's PromQL per vLLM latency, at an example target's edge (TTFT 0.5 s,
    TPOT 0.1 s): the console takes the lower of the two shares."""
    from console.model.engines import DEFAULT
    from console.sources.collect.promql import slo_share_query

    return "min of: " + "  |  ".join(
        slo_share_query(DEFAULT, kind, edge, window_s, by=by)[0]
        for kind, edge in (("ttft", 0.5), ("tpot", 0.1)))


def cmd_catalog(args: argparse.Namespace) -> int:
    data = rows(args.window)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    family = None
    for r in data:
        if r["family"] != family:
            family = r["family"]
            print(f"# {family} figures" + (" (per deployment, model group and gateway; "
                                           "LiteLLM's /metrics/)" if family == "gateway" else
                                           " (per user/key, today)" if family != "slot"
                                           else " (per slot; vLLM's /metrics)"))
        where = ", ".join(x for x in (
            f"column {r['column']}" if r["column"] else "",
            f"plot {r['plot']}" if r["plot"] else "",
            f"threshold {r['threshold']}" if r["threshold"] else "") if x)
        print(f"{r['key']}  ({r['label']}; {r['source']}){'  ' + where if where else ''}")
        print(f"    {r['promql']}")
    return 0
