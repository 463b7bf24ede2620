"""The real Prometheus server (Debian package), scraping given targets on loopback."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

from . import procs


def available() -> bool:
    return shutil.which("prometheus") is not None


@dataclass
class PrometheusServer:
    workdir: Path
    targets: list[str]
    scrape_interval_s: float = 1.0
    labels: dict[str, str] = field(default_factory=dict)
    """Target labels (``pod``: what ``profile render`` gives each slot's target)."""
    bearer_file: Path | None = None
    """A file holding the token sent as ``Authorization: Bearer`` on every scrape."""
    file_sd: Path | None = None
    """A ``file_sd`` targets file (``profile render``'s ``targets.json``) instead of
    ``targets``."""
    federate: str | None = None
    """``host:port`` of a Prometheus to federate from (``/federate``, every ``vllm:``
    series, its labels and timestamps kept) instead of scraping targets: a global
    Prometheus in front of per-site ones."""
    rules: Path | None = None
    """A rule file to evaluate (``profile render``'s ``prometheus/rules.yml``)."""
    alertmanager: str | None = None
    """``host:port`` of the Alertmanager its alerts go to (resent every second)."""
    metrics_path: str | None = None
    """The targets' exposition path when not ``/metrics`` (LiteLLM's ``/metrics/``)."""
    port: int = field(default_factory=procs.free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        iv = f"{int(self.scrape_interval_s * 1000)}ms"
        job: dict = {"job_name": "vllm", "static_configs": [
            {"targets": self.targets, "labels": self.labels}]}
        if self.file_sd is not None:
            job = {"job_name": "vllm", "file_sd_configs": [{"files": [str(self.file_sd)]}]}
        if self.federate is not None:
            job = {"job_name": "federate", "metrics_path": "/federate",
                   "honor_labels": True, "params": {"match[]": ['{__name__=~"vllm:.*"}']},
                   "static_configs": [{"targets": [self.federate]}]}
        if self.metrics_path is not None:
            job["metrics_path"] = self.metrics_path
        if self.bearer_file is not None:
            job["authorization"] = {"type": "Bearer",
                                    "credentials_file": str(self.bearer_file)}
        cfg: dict = {"global": {"scrape_interval": iv, "evaluation_interval": iv},
                     "scrape_configs": [job]}
        if self.rules is not None:
            cfg["rule_files"] = [str(self.rules)]
        if self.alertmanager is not None:
            cfg["alerting"] = {"alertmanagers": [
                {"static_configs": [{"targets": [self.alertmanager]}]}]}
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(cfg))
        log = self.workdir / "prometheus.log"
        self.proc = procs.start([
            "prometheus", f"--config.file={self.workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}", "--web.enable-lifecycle",
            "--storage.tsdb.retention.time=1h", "--log.level=warn",
            *(["--rules.alert.resend-delay=1s"] if self.alertmanager else [])], log)
        procs.wait_http(self.url + "/-/ready", 60, self.proc, log)

    def stop(self) -> None:
        if self.proc is not None:
            procs.stop(self.proc)
            self.proc = None

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        r = httpx.get(self.url + "/api/v1/query", params=params, timeout=10)
        body = r.json()
        assert body["status"] == "success", body
        return body["data"]["result"]

    def wait_scrapes(self, n: int = 2, timeout_s: float = 30.0) -> None:
        """Block until every target has been scraped ``n`` more times."""
        def count() -> int:
            res = self.query("min(count_over_time(up[1h]))")
            return int(float(res[0]["value"][1])) if res else 0
        start = count()
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if count() >= start + n:
                return
            time.sleep(0.2)
        raise TimeoutError("Prometheus did not scrape in time")
