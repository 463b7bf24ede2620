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
            # dcgm's meaning: NVML's v2 used (no driver reservation), whole MiB
            assert got["DCGM_FI_DEV_FB_USED"] == \
                cap[f"nvmlDeviceGetMemoryInfo(h{gpu},33554472)"]["ok"]["used"] // 2**20
            assert got["DCGM_FI_DEV_SM_CLOCK"] == cap[f"nvmlDeviceGetClockInfo(h{gpu},1)"]["ok"]
            assert got["DCGM_FI_DEV_XID_ERRORS"] == 0
            labels = prom.query(f'DCGM_FI_DEV_GPU_TEMP{{gpu="{gpu}"}}')[0]["metric"]
            assert labels["UUID"] == cap[f"nvmlDeviceGetUUID(h{gpu})"]["ok"]
            assert labels["modelName"] == "NVIDIA H200" and labels["device"] == f"nvidia{gpu}"
    finally:
        prom.stop()
        procs.stop(exporter)


def test_the_console_reads_the_same_gpus_directly_and_through_prometheus(tmp_path) -> None:
    """What a wall (no SSH) shows: the exporter scraped by the console itself, and the
    same series read back from a real Prometheus — equal, and equal to the agent's own
    NVML reading through ``pod-agent gpus --json``."""
    import asyncio

    from console.model.gpu_state import parse
    from console.sources.collect.gpu_metrics import GpuMetrics
    from console.sources.collect.http import HttpClient

    if not prometheus_server.available():
        if os.environ.get("CI"):
            raise AssertionError("prometheus (Debian package) is missing")
        pytest.skip("prometheus is not installed")
    token = "gpu-scrape-token-0123456789"
    (tmp_path / "token").write_text(token)
    port = procs.free_port()
    env = dict(os.environ, PYTHONPATH=f"{REPO / 'console' / 'demo' / 'fakenvml'}:{REPO}",
               FAKE_NVML_STEADY="1", FAKE_NVML_CAPTURE=str(CAPTURE))
    exporter = subprocess.Popen(
        [sys.executable, "-m", "pod_agent", "exporter", "--listen", f"127.0.0.1:{port}",
         "--token-file", str(tmp_path / "token")], env=env, stdout=subprocess.PIPE,
        text=True, start_new_session=True)
    prom = prometheus_server.PrometheusServer(tmp_path / "prom", [f"127.0.0.1:{port}"],
                                              bearer_file=tmp_path / "token",
                                              labels={"pod": "pod-under-test"})
    try:
        assert exporter.stdout is not None
        json.loads(exporter.stdout.readline())
        prom.start()
        prom.wait_scrapes(2, timeout_s=60)
        agent = parse(json.loads(subprocess.run(
            [sys.executable, "-m", "pod_agent", "gpus", "--json"], env=env,
            capture_output=True, text=True, timeout=60, check=True).stdout))

        async def both():
            client = HttpClient()
            try:
                direct = await GpuMetrics(client, 5, url=f"http://127.0.0.1:{port}/metrics",
                                          token=token).fetch()
                refused = await GpuMetrics(client, 5, url=f"http://127.0.0.1:{port}/metrics"
                                           ).fetch()
                via = await GpuMetrics(client, 5, prometheus_url=prom.url,
                                       selector='{pod="pod-under-test"}').fetch()
                other = await GpuMetrics(client, 5, prometheus_url=prom.url,
                                         selector='{pod="another"}').fetch()
                return direct, refused, via, other
            finally:
                await client.aclose()

        direct, refused, via, other = asyncio.run(both())
        assert refused.error == "HTTP 401" and not refused.gpus
        assert other.error and not other.gpus  # another pod's selector sees nothing
        assert direct.error is None and via.error is None and agent is not None
        fields = ("index", "uuid", "name", "util_pct", "mem_used", "mem_total", "temp_c",
                  "temp_slowdown_c", "power_w", "power_limit_w", "sm_clock_mhz",
                  "throttled", "ecc_dbe_volatile", "remap_pending", "nvlink_up")
        for a, d, v in zip(agent.gpus, direct.gpus, via.gpus, strict=True):
            for f in fields:
                want = getattr(a, f)
                if f in ("mem_used", "mem_total"):  # the exposition has whole MiB (dcgm's)
                    want = want // 2**20 * 2**20
                assert want == getattr(d, f) == getattr(v, f), \
                    (f, getattr(a, f), getattr(d, f), getattr(v, f))
            # GPM (the stand-in replays the H200's captured intervals, one per sample:
            # the three reads may hold different seconds, which differ by < 1 point)
            assert a.gpm_supported is d.gpm_supported is v.gpm_supported is True
            for f in ("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct",
                      "dram_active_pct"):
                got = (getattr(a, f), getattr(d, f), getattr(v, f))
                assert None not in got and max(got) - min(got) < 1.0, (f, got)  # type: ignore[type-var, operator]
    finally:
        prom.stop()
        procs.stop(exporter)
