"""The console's own operations on the pod, read back from the audit log (issue 42).

A stop is explained by whoever made it. The watchdog says so in its own record; the
console's `w s`, `down` (from a terminal or cron, another process) and a fallback say so
in the audit log of the state dir. The pod's run (``console.model.pod_run``) reads the
recent ones: :class:`AuditTail` reads what was appended since its last look (blocking
file work: the session runs it off the loop) and keeps the operations that start or
stop a machine.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import deque
from pathlib import Path

from console.model.pod_run import OPERATION_S, Operation, operation_of

FIRST_READ_BYTES = 256 * 1024
"""At the first look only the log's end is read: older records explain no stop now."""
KEEP = 64


class AuditTail:
    """The audit log's recent machine operations, oldest first."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._offset: int | None = None
        self._ino: int | None = None
        self._partial = b""
        self.ops: deque[Operation] = deque(maxlen=KEEP)

    def read(self, now: float) -> tuple[Operation, ...]:
        """What was appended since the last read (blocking: call it off the loop); the
        operations of the last ``OPERATION_S``. A log that cannot be read explains
        nothing: the ones read before stay."""
        if self.path is not None:
            with contextlib.suppress(OSError):
                self._read_new()
        return tuple(op for op in self.ops if now - op.at <= OPERATION_S)

    def _read_new(self) -> None:
        assert self.path is not None
        st = os.stat(self.path)
        if self._ino != st.st_ino or self._offset is None or st.st_size < self._offset:
            # first look, or the log was replaced: from near its end
            self._ino, self._partial = st.st_ino, b""
            self._offset = max(0, st.st_size - FIRST_READ_BYTES)
            first = self._offset > 0
        else:
            first = False
        if st.st_size == self._offset:
            return
        with open(self.path, "rb") as fh:
            fh.seek(self._offset)
            data = fh.read(st.st_size - self._offset)
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()  # a record being written: read whole next time
        if first and lines:
            lines = lines[1:]  # begun mid-record
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and (op := operation_of(rec)) is not None:
                self.ops.append(op)


__all__ = ["AuditTail"]
