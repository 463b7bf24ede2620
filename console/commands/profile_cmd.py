"""``pod-console profile check|render``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from console.commands import examples


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="check or render deployment profiles",
        **examples(
            'pod-console profile check profiles/',
            'pod-console profile render profiles/10-rtx6000-2x.yaml --out build/',
        ))
    psub = p.add_subparsers(dest="profile_cmd", required=True)

    c = psub.add_parser("check", help="validate profile files (exit 1 on any problem)")
    c.add_argument("paths", nargs="+", help="profile files or directories of *.yaml")
    c.set_defaults(func=cmd_check)

    r = psub.add_parser("render", help="write slot commands, LiteLLM, Prometheus and Gatus "
                                       "configs from one profile")
    r.add_argument("profile", help="profile file")
    r.add_argument("--out", required=True, help="output directory")
    r.add_argument("--pod-host", default="127.0.0.1", help="address the laptop reaches "
                                                           "the pod's slots at")
    r.add_argument("--pod-id", default="local", help="pod id, used in labels and ids")
    r.add_argument("--scheme", choices=("http", "https"), default="http")
    r.add_argument("--port-map", action="append", default=[], metavar="POD=PUBLIC",
                   help="public port for a pod port (RunPod direct TCP); repeatable")
    r.add_argument("--p2p-disabled", action="store_true",
                   help="render slot commands for a host whose GPU P2P is broken")
    r.add_argument("--config", type=Path, default=None,
                   help="the console's config: the alert rules' thresholds and timing")
    r.add_argument("--alertmanager", default="127.0.0.1:9093", metavar="HOST:PORT",
                   help="where the rendered Prometheus sends the alerts of rules.yml")
    r.add_argument("--slack-url-file", default=None, metavar="PATH",
                   help="the file alertmanager.yml reads the Slack webhook URL from")
    r.set_defaults(func=cmd_render)


def cmd_check(args: argparse.Namespace) -> int:
    from pod_agent.profiles import check_file, expand_paths

    files = expand_paths(args.paths)
    if not files:
        print("no profile files found", file=sys.stderr)
        return 1
    bad = 0
    for path in files:
        _, problems = check_file(path)
        for prob in problems:
            print(prob)
        if problems:
            bad += 1
        else:
            print(f"{path}: ok")
    return 1 if bad else 0


def cmd_render(args: argparse.Namespace) -> int:
    from console.config.render import PodAddress, render_all, write_all
    from pod_agent.profiles import check_file, profile_name

    path = Path(args.profile)
    profile, problems = check_file(path)
    if problems or profile is None:
        for prob in problems:
            print(prob, file=sys.stderr)
        return 1
    port_map: dict[int, int] = {}
    for item in args.port_map:
        try:
            a, b = item.split("=", 1)
            port_map[int(a)] = int(b)
        except ValueError:
            print(f"--port-map {item!r}: expected POD=PUBLIC, two port numbers", file=sys.stderr)
            return 2
    addr = PodAddress(host=args.pod_host, pod_id=args.pod_id, scheme=args.scheme,
                      port_map=port_map)
    from console.config.settings import ConfigError, load_settings
    from console.session.alertmanager import DEFAULT_CONTEXT
    from console.sources import alert_rules

    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"pod-console profile render: {exc}", file=sys.stderr)
        return 1
    name = profile_name(path, profile)
    gw = ((settings.gateway_url, settings.gateway.metrics_path)
          if settings.gateway_url and settings.gateway.watch else None)
    files = render_all(profile, name, addr, args.p2p_disabled, alertmanager=args.alertmanager,
                       gateway=gw)
    # the console's rules, for the team's Prometheus and Alertmanager (issue 43)
    files[alert_rules.RULES_FILE] = alert_rules.dump(alert_rules.render_rules(
        profile, settings, settings.context or DEFAULT_CONTEXT))
    files[alert_rules.ALERTMANAGER_FILE] = alert_rules.HEADER + alert_rules.dump(
        alert_rules.render_alertmanager(args.slack_url_file or alert_rules.SLACK_URL_FILE))
    files = dict(sorted(files.items()))
    for p in write_all(files, Path(args.out)):
        print(p)
    return 0
