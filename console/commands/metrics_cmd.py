"""``pod-console metrics SOURCE [SOURCE2] --json``: figures from one or two expositions."""

from __future__ import annotations

import argparse
import json
import sys
import time

from console.commands import aligned, examples
from console.commands.argtypes import seconds
from console.model.engines import ENGINES
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
        ))
    p.add_argument("source", help="file path or http(s) URL of a /metrics exposition")
    p.add_argument("source2", nargs="?", help="a later exposition of the same server")
    p.add_argument("--json", action="store_true",
                   help="print JSON keyed by model_name (without it: a table to read)")
    p.add_argument("--all", action="store_true",
                   help="every figure of the metric catalog, flat by key (see `pod-console "
                        "catalog`), instead of the fixed contract")
    p.add_argument("--timeout", type=seconds(0, 600, above=True), default=5.0,
                   help="deadline for the whole request, body included (s, up to 600)")
    p.set_defaults(func=cmd_metrics)


class SourceError(Exception):
    pass


def read_source(src: str, timeout: float) -> tuple[str, float]:
    """Return (text, time it was read). Bounded in time (one deadline for connect,
    headers and the whole body, whatever the server drips) and in memory (the body is
    refused once past ``MAX_BYTES``, while reading; nothing compressed is asked for)."""
    if src.startswith(("http://", "https://")):
        import asyncio

        from console.sources.collect.http import HttpClient, HttpError

        async def fetch() -> tuple[int, bytes]:
            client = HttpClient()
            try:
                r = await client.get(src, timeout=timeout, max_bytes=MAX_BYTES)
                return r.status_code, r.content
            finally:
                await client.aclose()

        try:
            status, body = asyncio.run(fetch())
        except HttpError as exc:
            raise SourceError(f"{src}: {exc.describe()}") from None
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


def cmd_metrics(args: argparse.Namespace) -> int:
    try:
        text1, t1 = read_source(args.source, args.timeout)
        later, earlier, window = parse(text1), None, None
        if args.source2:
            text2, t2 = read_source(args.source2, args.timeout)
            earlier, later = later, parse(text2)
            window = max(t2 - t1, 0.0) or None
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
        print(figures_table(figures, window))
        return 0
    out = {m: dict(f.values) if args.all else f.contract_dict() for m, f in figures.items()}
    print(json.dumps(out, indent=2, sort_keys=True, allow_nan=False))
    return 0


def figures_table(figures: dict, window: float | None) -> str:
    """Every model figure of the catalog, one row each, one column per model, formatted as
    the console shows it."""
    from console.model.catalog import MODEL_FIGURES

    models = sorted(figures)
    head = f"figures over {window:.0f} s" if window else "lifetime figures (one capture)"
    rows = [("", *models)]
    rows += [(fig.label, *(fig.show(figures[m].value(fig.key)) for m in models))
             for fig in MODEL_FIGURES]
    return "\n".join([head, *aligned(rows)])
