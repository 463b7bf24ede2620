"""The pod's ``.env``: KEY=VALUE lines the slot launcher reads (no secrets are written)."""

from __future__ import annotations

import os
import tempfile


def read_env(path: str) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line or line.startswith("#") or "=" not in line:
                    continue
                k, v = line.split("=", 1)
                out[k.strip()] = v.strip()
    except FileNotFoundError:
        pass
    return out


def update_env(path: str, values: dict[str, str]) -> None:
    """Set keys, keep the others, write atomically."""
    cur = read_env(path)
    cur.update(values)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".env.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        for k in sorted(cur):
            fh.write(f"{k}={cur[k]}\n")
    os.replace(tmp, path)
