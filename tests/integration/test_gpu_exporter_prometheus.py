"""A real Prometheus scrapes ``pod-agent exporter`` (the NVML stand-in on the H200
capture) with its bearer token, and reads back the GPU's own numbers under
dcgm-exporter's names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.conftest import FIXTURES, REPO
from tests.support import procs, prometheus_server

CAPTURE = FIXTURES / "nvml-h200x2" / "nvml-load.json"


def test_prometheus_reads_the_gpus_through_the_exporter(tmp_path) -> None:
    if not prometheus_server.available():
        if os.environ.get("CI"):
            raise AssertionError("prometheus (Debian package) is missing")
        pytest.skip("prometheus is not installed")
    token = tmp_path / "token"
    token.write_text("gpu-scrape-token-0123456789\n")
    port = procs.free_port()
    env = dict(os.environ, PYTHONPATH=f"{REPO / 'console' / 'demo' / 'fakenvml'}:{REPO}",
               FAKE_NVML_STEADY="1", FAKE_NVML_CAPTURE=str(CAPTURE))
    exporter = subprocess.Popen(
        [sys.executable, "-m", "pod_agent", "exporter", "--listen", f"127.0.0.1:{port}",
         "--token-file", str(token)], env=env, stdout=subprocess.PIPE, text=True,
        start_new_session=True)
    prom = prometheus_server.PrometheusServer(tmp_path / "prom", [f"127.0.0.1:{port}"],
                                              bearer_file=token)
    try:
        assert exporter.stdout is not None
        assert json.loads(exporter.stdout.readline())["source"] == "nvml"
        prom.start()
        prom.wait_scrapes(2, timeout_s=60)
        assert prom.query("min(up)")[0]["value"][1] == "1"  # the token was accepted
        cap = json.loads(CAPTURE.read_text())
        deadline = time.time() + 60
        while time.time() < deadline and not prom.query("DCGM_FI_DEV_GPU_TEMP"):
            time.sleep(0.5)
        for gpu in (0, 1):
            got = {name: float(prom.query(f'{name}{{gpu="{gpu}"}}')[0]["value"][1])
                   for name in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
                                "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_SM_CLOCK",
                                "DCGM_FI_DEV_XID_ERRORS")}
            assert got["DCGM_FI_DEV_GPU_TEMP"] == cap[f"nvmlDeviceGetTemperature(h{gpu},0)"]["ok"]
            assert got["DCGM_FI_DEV_POWER_USAGE"] == \
                cap[f"nvmlDeviceGetPowerUsage(h{gpu})"]["ok"] / 1000
            assert got["DCGM_FI_DEV_FB_USED"] == \
                cap[f"nvmlDeviceGetMemoryInfo(h{gpu})"]["ok"]["used"] / 2**20
            assert got["DCGM_FI_DEV_SM_CLOCK"] == cap[f"nvmlDeviceGetClockInfo(h{gpu},1)"]["ok"]
            assert got["DCGM_FI_DEV_XID_ERRORS"] == 0
            labels = prom.query(f'DCGM_FI_DEV_GPU_TEMP{{gpu="{gpu}"}}')[0]["metric"]
            assert labels["UUID"] == cap[f"nvmlDeviceGetUUID(h{gpu})"]["ok"]
            assert labels["modelName"] == "NVIDIA H200" and labels["device"] == f"nvidia{gpu}"
    finally:
        prom.stop()
        procs.stop(exporter)
