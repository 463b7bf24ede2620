"""``pod-console metrics SOURCE [SOURCE2] --json``: figures from one or two expositions."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..collect.exposition import parse
from ..collect.figures import compute

MAX_BYTES = 16 * 1024 * 1024


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("metrics", help="figures per model from a vLLM /metrics file or URL "
                                       "(two sources: the window between them)")
    p.add_argument("source", help="file path or http(s) URL of a /metrics exposition")
    p.add_argument("source2", nargs="?", help="a later exposition of the same server")
    p.add_argument("--json", action="store_true", required=True,
                   help="print JSON keyed by model_name")
    p.add_argument("--timeout", type=float, default=5.0, help="per-request timeout (s)")
    p.set_defaults(func=cmd_metrics)


class SourceError(Exception):
    pass


def read_source(src: str, timeout: float) -> tuple[str, float]:
    """Return (text, time it was read)."""
    if src.startswith(("http://", "https://")):
        try:
            import httpx  # a one-shot command: its import cost does not matter here

            r = httpx.get(src, timeout=timeout, follow_redirects=True)
        except httpx.HTTPError as exc:
            raise SourceError(f"{src}: {type(exc).__name__}: {exc}") from None
        if r.status_code != 200:
            raise SourceError(f"{src}: HTTP {r.status_code}")
        if len(r.content) > MAX_BYTES:
            raise SourceError(f"{src}: larger than {MAX_BYTES} bytes")
        return r.text, time.time()
    path = Path(src)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise SourceError(f"{src}: larger than {MAX_BYTES} bytes")
        data = path.read_bytes()
        return data.decode("utf-8"), path.stat().st_mtime
    except OSError as exc:
        raise SourceError(f"{src}: {exc.strerror or exc}") from None
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
    if not any(n.startswith("vllm:") for n in later.samples):
        why = f" ({later.error_count} unreadable lines)" if later.error_count else ""
        print(f"pod-console metrics: no vLLM metrics in the exposition{why}", file=sys.stderr)
        return 1
    figures = compute(later, earlier, window)
    out = {m: f.contract_dict() for m, f in figures.items()}
    print(json.dumps(out, indent=2, sort_keys=True, allow_nan=False))
    return 0
