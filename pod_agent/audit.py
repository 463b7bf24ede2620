"""The agent's audit log: one JSON line per thing it did or was asked, fsynced (it is
what is left to read after a crash or a stop). Every part writes through
:func:`record` (tests replace it here, once, for all of them)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from . import paths


def record(rec: dict[str, Any]) -> None:
    with open(paths.audit_log(), "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"t": round(time.time(), 3), **rec}, sort_keys=True,
                            default=str) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
