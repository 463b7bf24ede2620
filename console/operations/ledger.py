"""``STATE_DIR/pods.jsonl``: every pod an operation asked RunPod for, until it is settled.

Written *before* a create or a start goes out (fsynced), again when the pod id is
known, and once more when the pod is kept, stopped or terminated. Whatever
happens to the process in between — ``kill -9``, a power cut, an exception
nobody expected — the next ``pod-console up`` or ``down`` reads the entries that
were never settled and stops or terminates those pods (:func:`open_entries`).
A pod that costs money is therefore always named somewhere on disk.

Events: ``create-requested`` (name), ``created`` (name, pod), ``resume-requested``
(pod), then one of ``kept``, ``terminated``, ``stopped`` (pod or name).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.operations.audit import AuditError, write_record

SETTLED = ("kept", "terminated", "stopped", "abandoned")


@dataclass
class Entry:
    """One request that may have left a pod billing."""

    kind: str
    """create | resume"""
    name: str | None
    pod_id: str | None
    since: float
    cost: float | None = None


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path

    def record(self, event: str, **fields: Any) -> None:
        """Append one event; raises :class:`AuditError` when it cannot be written whole."""
        rec = {"t": round(time.time(), 3), "event": event, **fields}
        write_record(self.path, json.dumps(rec, sort_keys=True, default=str))

    def events(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text(errors="replace")
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a record cut by a crash: the ones before it still count
            if isinstance(rec, dict):
                out.append(rec)
        return out

    def open_entries(self) -> list[Entry]:
        """Requests that were never settled, oldest first."""
        by_key: dict[str, Entry] = {}
        for ev in self.events():
            kind = ev.get("event")
            name, pod = ev.get("name"), ev.get("pod")
            if kind == "create-requested" and name:
                by_key[f"name:{name}"] = Entry("create", str(name), None, float(ev.get("t", 0)))
            elif kind == "created" and name:
                e = by_key.pop(f"name:{name}", None) or Entry("create", str(name), None,
                                                              float(ev.get("t", 0)))
                e.pod_id = str(pod) if pod else None
                e.cost = ev.get("cost")
                by_key[f"pod:{pod}" if pod else f"name:{name}"] = e
            elif kind == "resume-requested" and pod:
                by_key[f"pod:{pod}"] = Entry("resume", ev.get("name"), str(pod),
                                             float(ev.get("t", 0)))
            elif kind in SETTLED:
                if pod:
                    by_key.pop(f"pod:{pod}", None)
                if name:
                    by_key.pop(f"name:{name}", None)
        return sorted(by_key.values(), key=lambda e: e.since)


__all__ = ["AuditError", "Entry", "Ledger"]
