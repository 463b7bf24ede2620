"""The real Alertmanager (Debian's ``prometheus-alertmanager``) on loopback, its gossip
cluster off, notifying a loopback webhook receiver (``hook_receiver.py``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from . import procs

BINARY = "prometheus-alertmanager"


def available() -> bool:
    return shutil.which(BINARY) is not None


def require() -> None:
    """Skip a test without Alertmanager here; under CI (``CI`` set) fail it instead."""
    if not available():
        if os.environ.get("CI"):
            pytest.fail("prometheus-alertmanager is not installed; .ci/run must install it")
        pytest.skip("prometheus-alertmanager not installed")


def fast_config(receiver_url: str) -> dict[str, Any]:
    """Fast grouping for tests; the heartbeat to a null receiver, as the rendered one."""
    return {
        "route": {"receiver": "hook", "group_by": ["alertname", "pod"],
                  "group_wait": "1s", "group_interval": "2s", "repeat_interval": "1h",
                  "routes": [{"matchers": ['alertname="Watchdog"'], "receiver": "null"}]},
        "receivers": [{"name": "null"},
                      {"name": "hook", "webhook_configs": [
                          {"url": receiver_url, "send_resolved": True}]}],
    }


@dataclass
class AlertmanagerServer:
    workdir: Path
    config: dict[str, Any]
    port: int = field(default_factory=procs.free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "alertmanager.yml"
        cfg.write_text(yaml.safe_dump(self.config))
        log = self.workdir / "alertmanager.log"
        self.proc = procs.start([
            BINARY, f"--config.file={cfg}", f"--storage.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address=",
            "--log.level=warn"], log)
        procs.wait_http(self.url + "/-/ready", 60, self.proc, log)

    def stop(self) -> None:
        if self.proc is not None:
            procs.stop(self.proc)
            self.proc = None

    def get(self, path: str) -> Any:
        r = httpx.get(self.url + path, timeout=10)
        r.raise_for_status()
        return r.json()
