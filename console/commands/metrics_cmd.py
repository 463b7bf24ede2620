"""``pod-console metrics SOURCE [SOURCE2] --json``: figures from one or two expositions."""

from __future__ import annotations

import argparse
import json
import sys
import time

from console.commands import aligned, examples
from console.commands.argtypes import seconds
from console.model import fmt
from console.model.engines import ENGINES
from console.model.printable import printable_lines
from console.sources.collect.exposition import parse
from console.sources.collect.figures import compute

MAX_BYTES = 16 * 1024 * 1024



def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("metrics", help="figures per model from a vLLM /metrics file or URL "
                                       "(two sources: the window between them)",
        **examples(
            'pod-console metrics http://127.0.0.1:8881/metrics',
            'pod-console metrics before.txt after.txt --json   # the window between two captures',
            'pod-console metrics after.txt --json --all         # every catalog figure',
            'pod-console metrics http://127.0.0.1:4000/metrics/ --gateway   # LiteLLM',
        ))
    p.add_argument("source", help="file path or http(s) URL of a /metrics exposition")
    p.add_argument("source2", nargs="?", help="a later exposition of the same server")
    p.add_argument("--json", action="store_true",
                   help="print JSON keyed by model_name (without it: a table to read)")
    p.add_argument("--all", action="store_true",
                   help="every figure of the metric catalog, flat by key (see `pod-console "
                        "catalog`), instead of the fixed contract")
    p.add_argument("--gateway", action="store_true",
                   help="the exposition is LiteLLM's (the gateway): its figures per model "
                        "group, deployment and user; a URL is read with the bearer key in "
                        "$LITELLM_MASTER_KEY (or --key-env/--key-file; never on the "
                        "command line)")
    p.add_argument("--key-env", default="LITELLM_MASTER_KEY", metavar="NAME",
                   help="with --gateway: the environment variable holding the key")
    p.add_argument("--key-file", metavar="PATH",
                   help="with --gateway: a file holding the key (its first line)")
    p.add_argument("--timeout", type=seconds(0, 600, above=True), default=5.0,
                   help="deadline for the whole request, body included (s, up to 600)")
    p.set_defaults(func=cmd_metrics)


class SourceError(Exception):
    pass


def read_source(src: str, timeout: float, key: str | None = None) -> tuple[str, float]:
    """Return (text, time it was read). Bounded in time (one deadline for connect,
    headers and the whole body, whatever the server drips) and in memory (the body is
    refused once past ``MAX_BYTES``, while reading; nothing compressed is asked for).
    ``key``: a bearer key for the request (LiteLLM's ``/metrics``); a redirect to the
    same origin (LiteLLM's ``/metrics`` → ``/metrics/``) is followed once."""
    if src.startswith(("http://", "https://")):
        import asyncio
        from urllib.parse import urljoin, urlsplit

        from console.sources.collect.http import HttpClient, HttpError

        headers = {"Authorization": f"Bearer {key}"} if key else None

        async def fetch() -> tuple[int, bytes]:
            client = HttpClient()
            try:
                r = await client.get(src, timeout=timeout, max_bytes=MAX_BYTES,
                                     headers=headers)
                loc = r.headers.get("location", "")
                if r.status_code in (301, 302, 307, 308) and loc:
                    nxt = urljoin(src, loc)
                    if urlsplit(nxt).netloc == urlsplit(src).netloc:
                        r = await client.get(nxt, timeout=timeout, max_bytes=MAX_BYTES,
                                             headers=headers)
                return r.status_code, r.content
            finally:
                await client.aclose()

        try:
            status, body = asyncio.run(fetch())
        except HttpError as exc:
            raise SourceError(f"{src}: {exc.describe()}") from None
        if status in (401, 403) and key is None:
            raise SourceError(f"{src}: HTTP {status}: a key is needed (LiteLLM: put it in "
                              "$LITELLM_MASTER_KEY or --key-file with --gateway)")
        if status != 200:
            raise SourceError(f"{src}: HTTP {status}")
        return _decode(src, body), time.time()
    import os
    import stat

    try:
        fd = os.open(src, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise SourceError(f"{src}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise SourceError(f"{src}: not a regular file (a FIFO or device never ends)")
        if st.st_size > MAX_BYTES:
            raise SourceError(f"{src}: larger than {MAX_BYTES} bytes")
        try:
            data = fh.read(MAX_BYTES + 1)
        except OSError as exc:
            raise SourceError(f"{src}: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise SourceError(f"{src}: larger than {MAX_BYTES} bytes")
    return _decode(src, data), st.st_mtime


def _decode(src: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SourceError(f"{src}: not UTF-8 text") from None


def _gateway_key(args: argparse.Namespace) -> str | None:
    import os
    from pathlib import Path

    if args.key_file:
        try:
            lines = Path(args.key_file).expanduser().read_text(errors="replace").split()
        except OSError as exc:
            raise SourceError(f"--key-file {args.key_file}: {exc.strerror or exc}") from None
        return lines[0] if lines else None
    return os.environ.get(args.key_env) or None


def cmd_gateway(args: argparse.Namespace) -> int:
    """The gateway's figures from one LiteLLM exposition (lifetime) or two (window)."""
    from console.session.deployment import capture_reader
    from console.sources.collect.gateway import FAMILIES

    try:
        key = _gateway_key(args)
        text1, t1 = read_source(args.source, args.timeout, key)
        t2, text2 = t1, None
        if args.source2:
            text2, t2 = read_source(args.source2, args.timeout, key)
    except SourceError as exc:
        print(f"pod-console metrics: {exc}", file=sys.stderr)
        return 1
    first = parse(text1, FAMILIES)
    second = parse(text2, FAMILIES) if text2 is not None else None
    # a fresh proxy exports no litellm_ series before its first request: as the earlier
    # capture it is a window from nothing, and only the later one must have them
    if not any(n.startswith("litellm_") for n in (second or first).names()):
        print("pod-console metrics: no litellm_ metrics in the exposition (the proxy needs "
              "callbacks: [\"prometheus\"])", file=sys.stderr)
        return 1
    col = capture_reader(args.source, args.timeout)
    snap = col.read(first, t1)
    if second is not None:
        # the window between the two captures as it is (0.63 s is not 1 s); equal times
        # leave its rates undefined, its increases stand
        snap = col.read(second, max(t2, t1), earlier=(t1, first))
    if args.json:
        print(json.dumps(snap.as_json(), indent=2, sort_keys=True, allow_nan=False))
        return 0
    print(printable_lines(gateway_table(snap)))  # label values: outside text
    return 0


def gateway_table(snap: object) -> str:
    """The gateway's figures as the console shows them: per scope, one row each."""
    from console.model.catalog import GATEWAY
    from console.model.gateway import STATUS_TEXT, GatewaySnapshot

    assert isinstance(snap, GatewaySnapshot)
    head = (f"gateway figures over {_span(snap.window_s)}" if snap.window_s
            else "gateway lifetime figures (one capture)")
    figs = [f for f in GATEWAY if f.detail]
    rows: list[tuple[str, ...]] = [("", "state", *(f.label for f in figs))]
    rows.append(("gateway", "", *(f.show(snap.total.get(f.key)) for f in figs)))
    for g in sorted(snap.groups):
        rows.append((g, "", *(f.show(snap.groups[g].get(f.key)) for f in figs)))
        for d in snap.deployments:
            if d.group == g:
                rows.append(("  " + d.model_id, STATUS_TEXT[d.status],
                             *(f.show(d.figure(f.key)) for f in figs)))
    users = [("user / key", "requests", "tokens", "spend")]
    users += [(u.name, fmt.num(u.requests), fmt.num(u.tokens), fmt.money(u.spend, 4))
              for u in snap.users]
    return "\n".join([head, *aligned(rows), "", *aligned(users)])


def cmd_metrics(args: argparse.Namespace) -> int:
    if args.gateway:
        return cmd_gateway(args)
    try:
        text1, t1 = read_source(args.source, args.timeout)
        later, earlier, window = parse(text1), None, None
        if args.source2:
            text2, t2 = read_source(args.source2, args.timeout)
            earlier, later = later, parse(text2)
            window = t2 - t1 if t2 > t1 else None
    except SourceError as exc:
        print(f"pod-console metrics: {exc}", file=sys.stderr)
        return 1
    prefixes = tuple(e.prefix for e in ENGINES.values())
    if not any(n.startswith(prefixes) for n in later.samples):
        why = f" ({later.error_count} unreadable lines)" if later.error_count else ""
        print(f"pod-console metrics: no vLLM metrics (nor SGLang's) in the exposition{why}",
              file=sys.stderr)
        return 1
    figures = compute(later, earlier, window)
    if not args.json:
        print(figures_table(figures, window, two=earlier is not None))
        return 0
    out = {m: dict(f.values) if args.all else f.contract_dict() for m, f in figures.items()}
    print(json.dumps(out, indent=2, sort_keys=True, allow_nan=False))
    return 0


def _span(window: float) -> str:
    """A window as the table heads say it: 0.63 s under ten seconds, whole ones above."""
    return f"{window:.3g} s" if window < 10 else f"{window:.0f} s"


def figures_table(figures: dict, window: float | None, two: bool = False) -> str:
    """Every model figure of the catalog, one row each, one column per model, formatted as
    the console shows it. ``two``: read from two captures (a window, even when their
    times do not say how long it is)."""
    from console.model.catalog import MODEL_FIGURES

    models = sorted(figures)
    head = (f"figures over {_span(window)}" if window else
            "figures between the two captures (their times do not tell the window: no "
            "rates)" if two else "lifetime figures (one capture)")
    rows = [("", *models)]
    rows += [(fig.label, *(fig.show(figures[m].value(fig.key)) for m in models))
             for fig in MODEL_FIGURES]
    return "\n".join([head, *aligned(rows)])
