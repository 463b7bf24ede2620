"""A slot log that rotates by size (``SLOT.log`` → ``SLOT.log.1`` …), kept small on the pod."""

from __future__ import annotations

import os
from collections import deque


class RotatingLog:
    def __init__(self, path: str, max_bytes: int = 20 * 1024 * 1024, backups: int = 3) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - long-lived handle

    def write(self, text: str) -> None:
        self._fh.write(text)
        self._fh.flush()
        if self._fh.tell() >= self.max_bytes:
            self._rotate()

    def _rotate(self) -> None:
        self._fh.close()
        for i in range(self.backups - 1, 0, -1):
            src = f"{self.path}.{i}"
            if os.path.exists(src):
                os.replace(src, f"{self.path}.{i + 1}")
        os.replace(self.path, f"{self.path}.1")
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def tail(self, n: int) -> list[str]:
        out: deque = deque(maxlen=n)
        for p in (f"{self.path}.1", self.path):
            try:
                with open(p, encoding="utf-8", errors="replace") as fh:
                    for line in fh:
                        out.append(line.rstrip("\n"))
            except FileNotFoundError:
                continue
        return list(out)

    def close(self) -> None:
        self._fh.close()
