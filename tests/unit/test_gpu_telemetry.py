"""The pod agent's GPU telemetry and its dcgm-exporter-named endpoint.

Driven by the NVML stand-in, whose every answer is what a real two-H200 host answered
(``tests/fixtures/nvml-h200x2``, captured with ``tools/nvml_capture.py`` on the device
machine), errors included; and by the real ``nvidia-smi`` CSV from the same host."""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from pod_agent import gpus
from pod_agent.exporter import FIELDS, Exporter
from tests.conftest import FIXTURES, REPO

CAPTURE = FIXTURES / "nvml-h200x2"
FAKE_DIR = REPO / "console" / "demo" / "fakenvml"
TOKEN = "scrape-token-0123456789"


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """The stand-in binding on the captured load readings, steady, with a fault dir."""
    monkeypatch.setenv("FAKE_NVML_CAPTURE", str(CAPTURE / "nvml-load.json"))
    monkeypatch.setenv("FAKE_NVML_STEADY", "1")
    monkeypatch.setenv("FAKE_NVML_FAULTS", str(tmp_path / "faults"))
    monkeypatch.delenv("FAKE_NVIDIA_SMI_GPUS", raising=False)
    monkeypatch.delenv("FAKE_NVIDIA_SMI_NAME", raising=False)
    monkeypatch.delenv("FAKE_NVIDIA_SMI_MIB", raising=False)
    (tmp_path / "faults").mkdir()
    spec = importlib.util.spec_from_file_location("fake_pynvml", FAKE_DIR / "pynvml.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.nvmlInit()
    mod.faults = tmp_path / "faults"
    yield mod
    mod.nvmlShutdown()


def recorded(key: str):
    return json.loads((CAPTURE / "nvml-load.json").read_text())[key]["ok"]


def test_readings_are_the_hosts_own(fake) -> None:
    tel = gpus.NvmlSource(fake).sample()
    assert tel.source == "nvml" and tel.driver == recorded("nvmlSystemGetDriverVersion()")
    assert len(tel.readings) == 2
    for r in tel.readings:
        h = f"h{r.index}"
        assert r.uuid == recorded(f"nvmlDeviceGetUUID({h})")
        assert r.name == "NVIDIA H200"
        assert r.temp_c == recorded(f"nvmlDeviceGetTemperature({h},0)")
        assert r.power_w == recorded(f"nvmlDeviceGetPowerUsage({h})") / 1000
        assert r.power_limit_w == 700.0
        # NVML's v2 memory call, as nvidia-smi: used leaves the driver's reservation out
        v2 = recorded(f"nvmlDeviceGetMemoryInfo({h},33554472)")
        assert (r.mem_used_bytes, r.mem_reserved_bytes) == (v2["used"], v2["reserved"])
        assert r.sm_clock_mhz == recorded(f"nvmlDeviceGetClockInfo({h},1)")
        assert (r.temp_slowdown_c, r.temp_shutdown_c) == (89, 95)
        assert (r.pcie_gen, r.pcie_width) == (5, 16)
        assert (r.nvlink_up, r.nvlink_links) == (18, 18)  # H200: 18 links, all up
        assert r.ecc_enabled is True
        # Hopper remaps rows and does not retire pages: unknown, not zero
        assert (r.retired_sbe, r.retired_dbe, r.retired_pending) == (None, None, None)
        assert (r.remapped_uncorrectable, r.remap_pending, r.remap_failed) == (0, False, False)
        # under load the H200s sat at their 700 W cap: power capping, said as such
        assert r.throttled == ["sw_power_cap"]
    procs = recorded("nvmlDeviceGetComputeRunningProcesses(h0)")
    assert tel.readings[0].processes == tuple(
        gpus.GpuProcess(p["pid"], p["usedGpuMemory"]) for p in procs)
    assert tel.to_json()["gpus"][1]["uuid"] == tel.readings[1].uuid


def test_an_idle_gpu_is_not_throttled(fake, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_NVML_CAPTURE", str(CAPTURE / "nvml-idle.json"))
    fake.nvmlInit()
    r = gpus.NvmlSource(fake).sample().readings[0]
    assert r.throttle == ["gpu_idle"] and r.throttled == []


def test_heat_and_a_double_bit_error(fake) -> None:
    src = gpus.NvmlSource(fake)
    (fake.faults / "hot-1").touch()
    (fake.faults / "dbe-0").touch()
    g0, g1 = src.sample().readings
    assert g1.temp_c == 91 and "hw_thermal_slowdown" in g1.throttled
    assert g1.sm_clock_mhz == recorded("nvmlDeviceGetClockInfo(h1,1)") // 2
    assert g0.ecc_dbe_volatile == 1 and g0.ecc_dbe_aggregate == 1
    assert g0.remapped_uncorrectable == 1 and g0.remap_pending is True
    assert g1.ecc_dbe_volatile == 0 and "hw_thermal_slowdown" not in g0.throttled


def test_xid_events_arrive_once_each(fake) -> None:
    src = gpus.NvmlSource(fake)
    seen: list[gpus.XidEvent] = []
    w = gpus.XidWatcher(fake, [s["uuid"] for s in src.static], on_event=seen.append)
    w.start()
    try:
        assert w.error is None
        (fake.faults / "xid-1-79").touch()
        (fake.faults / "xid-0-48").touch()
        deadline = time.monotonic() + 30
        while len(seen) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted((e.gpu, e.xid) for e in seen) == [(0, 48), (1, 79)]
        assert w.last(1).xid == 79 and w.last(1).uuid == src.static[1]["uuid"]
        # every process that registered hears each event once (the agent and the
        # exporter both do), and a second event of the same code is its own
        (fake.faults / "xid-1-79-2").touch()
        deadline = time.monotonic() + 30
        while len(seen) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [(e.gpu, e.xid) for e in seen[2:]] == [(1, 79)]
        # no duplicate came after it: a later event is the barrier (the fake delivers
        # what is due in one scan, in order), not a pause that a loaded machine outlasts
        (fake.faults / "xid-0-31").touch()
        deadline = time.monotonic() + 30
        while not any(e.xid == 31 for e in seen) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [(e.gpu, e.xid) for e in seen[3:]] == [(0, 31)], seen
    finally:
        w.stop()


def test_nvidia_smi_rows_from_the_real_host() -> None:
    rows = [r for r in (CAPTURE / "nvidia-smi-load.csv").read_text().splitlines() if r]
    got = gpus.parse_smi_csv("\n".join(rows))
    assert [r.index for r in got] == [0, 1]
    r = got[0]
    f = [x.strip() for x in rows[0].split(",")]
    assert r.uuid == f[1] and r.util_gpu_pct == float(f[4]) and r.temp_c == float(f[8])
    assert r.mem_total_bytes == int(f[7]) << 20 and r.throttle_mask == int(f[13], 16)
    # a field the GPU does not report reads as unknown, and a broken row is skipped
    na = rows[0].replace(", 0, 0, 0, 0, 5, 16,", ", [N/A], [Not Supported], 0, 0, 5, 16,")
    got = gpus.parse_smi_csv(na + "\nNVIDIA-SMI has failed\n")
    assert len(got) == 1 and got[0].ecc_sbe_volatile is None and got[0].ecc_dbe_volatile is None


def test_without_the_binding_nvidia_smi_answers(monkeypatch) -> None:
    def no_binding():
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr(gpus, "load_nvml", no_binding)
    monkeypatch.setenv("PATH", f"{REPO / 'console' / 'demo' / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_GPUS", "2")
    t = gpus.Telemetry()
    assert t.nvml_error == "nvidia-ml-py is not installed"
    tel = t.sample()
    assert tel.source == "nvidia-smi" and tel.error is None and len(tel.readings) == 2
    assert tel.readings[1].power_limit_w == 700.0 and tel.driver == "580.159.04"
    monkeypatch.setenv("FAKE_NVIDIA_SMI_FAIL", "1")
    tel = t.sample()
    assert tel.readings == [] and "nvidia-ml-py is not installed" in (tel.error or "")


def _get(port: int, path: str = "/metrics", method: str = "GET",
         headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path, headers=headers or {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


def _serve(exporter: Exporter):
    import threading

    t = threading.Thread(target=exporter.httpd.serve_forever, daemon=True)
    exporter.start()
    t.start()
    return t


def test_the_endpoint_is_metrics_only_and_asks_for_its_token(fake) -> None:
    ex = Exporter("127.0.0.1", 0, 0.2, TOKEN, nvml=fake)
    _serve(ex)
    try:
        assert _get(ex.port)[0] == 401
        assert _get(ex.port, headers={"Authorization": "Bearer wrong-wrong-wrong"})[0] == 401
        ok = {"Authorization": f"Bearer {TOKEN}"}
        status, body = _get(ex.port, headers=ok)
        assert status == 200
        assert _get(ex.port, "/", headers=ok)[0] == 404
        assert _get(ex.port, method="POST", headers=ok)[0] == 405
        text = body.decode()
        for name, *_ in FIELDS:
            if name.startswith("DCGM_FI_DEV_RETIRED_"):  # Hopper: not supported, left out
                assert f"\n{name}{{" not in text
                continue
            if name.startswith("DCGM_FI_PROF_"):  # GPM needs two samples: tests/unit/test_gpm
                continue
            assert f"\n{name}{{" in text, name
        temp = recorded("nvmlDeviceGetTemperature(h1,0)")
        uuid = recorded("nvmlDeviceGetUUID(h1)")
        assert (f'DCGM_FI_DEV_GPU_TEMP{{Hostname="{os.uname().nodename}",UUID="{uuid}",'
                f'device="nvidia1",gpu="1",modelName="NVIDIA H200",'
                f'pci_bus_id="00000000:00:07.0"}} {float(temp)}') in text
        assert 'DCGM_FI_DEV_XID_ERRORS{' in text
        assert 'pod_agent_gpu_telemetry_up{source="nvml"} 1.0' in text
        # an Xid reaches the gauge at the next scrape (the last Xid's value, as DCGM)
        (fake.faults / "xid-0-79").touch()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            text = _get(ex.port, headers=ok)[1].decode()
            if 'gpu="0",modelName="NVIDIA H200",pci_bus_id="00000000:00:06.0"} 79.0' in text:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the Xid never reached DCGM_FI_DEV_XID_ERRORS")
    finally:
        ex.httpd.shutdown()
        ex.close()


INHERENT_LINT = ("label names should be written in 'snake_case' not 'camelCase'",
                 "metric name should not include type 'counter'")
"""What promtool's linter says of dcgm-exporter's own names (the ``modelName`` label,
``DCGM_FI_DEV_PCIE_REPLAY_COUNTER``): the dashboards need exactly these."""


def _promtool(text: bytes) -> None:
    if shutil.which("promtool") is None:
        if os.environ.get("CI"):
            raise AssertionError("promtool (Debian prometheus) is missing")
        pytest.skip("promtool is not installed")
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       timeout=60)
    out = (r.stdout + r.stderr).decode()
    # exit 3 is lint only; 1 would be an exposition that does not parse
    assert r.returncode in (0, 3), out
    problems = [line for line in out.splitlines() if line.strip()]
    assert all(any(k in p for k in INHERENT_LINT) for p in problems), problems


def test_promtool_reads_the_endpoint_on_the_real_host_and_here(fake) -> None:
    _promtool((CAPTURE / "exporter-load.prom").read_bytes())  # from the H200 host
    ex = Exporter("127.0.0.1", 0, 0.2, None, nvml=fake)
    try:
        _promtool(ex.render())
    finally:
        ex.close()


def test_pod_agent_gpus_json_with_the_stand_in(tmp_path) -> None:
    env = dict(os.environ, PYTHONPATH=f"{FAKE_DIR}:{REPO}", FAKE_NVML_STEADY="1",
               FAKE_NVIDIA_SMI_GPUS="3", FAKE_NVML_CAPTURE=str(CAPTURE / "nvml-load.json"))
    r = subprocess.run([sys.executable, "-m", "pod_agent", "gpus", "--json"], env=env,
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["source"] == "nvml" and [g["index"] for g in doc["gpus"]] == [0, 1, 2]
    assert len({g["uuid"] for g in doc["gpus"]}) == 3  # each its own identity


def test_costly_counters_are_read_every_fifteen_seconds(fake, monkeypatch) -> None:
    calls: list[int] = []
    real = fake.nvmlDeviceGetTotalEnergyConsumption

    def energy(h):
        calls.append(h.index)
        return real(h)

    monkeypatch.setattr(fake, "nvmlDeviceGetTotalEnergyConsumption", energy)
    clock = [1000.0]
    monkeypatch.setattr(gpus.time, "monotonic", lambda: clock[0])
    src = gpus.NvmlSource(fake)
    for _ in range(5):  # five samples a second apart: one read per GPU
        src.sample()
        clock[0] += 1
    assert calls == [0, 1]
    clock[0] += gpus.SLOW_EVERY_S
    tel = src.sample()
    assert calls == [0, 1, 0, 1] and all(r.energy_mj for r in tel.readings)


def test_host_check_fails_a_gpu_with_memory_faults(fake) -> None:
    from pod_agent.hostcheck import check_gpu_health

    ok = check_gpu_health(gpus.Telemetry(fake))
    assert ok.ok is True and "no memory faults via nvml" in ok.detail
    assert "sw_power_cap" in ok.detail  # throttling is said, not failed
    (fake.faults / "dbe-1").touch()
    bad = check_gpu_health(gpus.Telemetry(fake))
    assert bad.ok is False
    assert "GPU 1: 1 double-bit ECC error(s)" in bad.detail
    assert "GPU 1: memory repair pending a reset" in bad.detail
    assert bad.value[0]["faults"] == []  # GPU 0 is fine


async def test_serve_starts_the_exporter_on_the_profiles_port(fake, tmp_path,
                                                             monkeypatch) -> None:
    """The exporter ``serve`` starts serves the supervisor's own samples over the agent's
    socket (one process holds NVML): the exporter's process here has no NVML at all (the
    stand-in is only in this test's process, where the supervisor runs), yet it serves
    the captured values, the supervisor's Xid, and says so when the agent is gone."""
    import asyncio

    from pod_agent import paths
    from pod_agent.gpu_monitor import GpuMonitor
    from pod_agent.supervisor import Supervisor
    from tests.conftest import PROFILES
    from tests.support.procs import free_port

    port = free_port()
    prof = tmp_path / "10-rtx6000-2x.yaml"
    prof.write_text((PROFILES / "10-rtx6000-2x.yaml").read_text()
                    + f"gpu_metrics_port: {port}\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / "exporter.token").write_text(TOKEN)
    monkeypatch.setenv("POD_AGENT_HOME", str(home))
    monkeypatch.setenv("POD_AGENT_EXPORTER_HOST", "127.0.0.1")  # loopback in tests
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # no NVML stand-in for the exporter
    sup = Supervisor(str(prof), vllm="false", apply_patches=False)
    assert sup.gpus.sampler.interval_s == 1.0  # the exporter's pace when it is served
    sup.gpus = GpuMonitor(lambda rec: None, sample_every_s=0.2, nvml=fake,
                          kmsg_path=str(tmp_path / "no-kmsg"))
    sup.gpus.start()
    server = await asyncio.start_unix_server(sup.handle, path=paths.socket_path())
    proc = await sup._start_exporter()
    assert proc is not None
    ok = {"Authorization": f"Bearer {TOKEN}"}

    async def scrape_until(want: str) -> str:
        deadline = time.monotonic() + 60
        text = ""
        while time.monotonic() < deadline:
            try:
                status, body = await asyncio.to_thread(_get, port, headers=ok)
                text = body.decode()
                if status == 200 and want in text:
                    return text
            except OSError:
                pass
            await asyncio.sleep(0.2)
        raise AssertionError(f"{want!r} never served; last:\n{text[-2000:]}")

    try:
        await sup.watchdog_tick()  # the stop plan (this test runs no watchdog loop)
        text = await scrape_until('pod_agent_gpu_telemetry_up{source="nvml"} 1.0')
        # the stop plan rides along, for the wall: the console reads it back
        assert 'pod_agent_stop_in_seconds{reason="schedule"}' in text
        from console.sources.collect.gpu_metrics import GpuMetrics
        from console.sources.collect.http import HttpClient

        client = HttpClient()
        try:
            report, plan, armed = await GpuMetrics(
                client, 10, url=f"http://127.0.0.1:{port}/metrics", token=TOKEN).fetch_pod()
        finally:
            await client.aclose()
        assert armed is True and plan is not None and plan.next_reason == "schedule"
        assert plan.in_s is not None and plan.in_s > 0 and len(report.gpus) == 2
        assert (await asyncio.to_thread(_get, port))[0] == 401  # the token file was used
        temp = recorded("nvmlDeviceGetTemperature(h1,0)")
        assert f'gpu="1",modelName="NVIDIA H200",pci_bus_id="00000000:00:07.0"}} ' \
               f'{float(temp)}' in text.split("DCGM_FI_DEV_GPU_TEMP{", 2)[2]
        # dcgm's FB_USED: v2 used (no driver reservation), whole MiB rounded down
        used = float(recorded("nvmlDeviceGetMemoryInfo(h0,33554472)")["used"] // 2**20)
        assert f'gpu="0",modelName="NVIDIA H200",pci_bus_id="00000000:00:06.0"}} ' \
               f'{used}' in text.split("DCGM_FI_DEV_FB_USED{", 2)[1]
        # the supervisor's Xid event reaches Prometheus through the exporter
        (fake.faults / "xid-1-48").touch()
        await scrape_until('gpu="1",modelName="NVIDIA H200",pci_bus_id="00000000:00:07.0"}'
                           ' 48.0')
        audit = [json.loads(x) for x in (home / "audit.jsonl").read_text().splitlines()
                 if '"exporter"' in x]
        assert audit and audit[-1]["port"] == port and audit[-1]["token"] is True
        # the agent gone: no GPU series (an old sample is not a new one), and up 0
        server.close()
        await server.wait_closed()
        os.unlink(paths.socket_path())
        text = await scrape_until('pod_agent_gpu_telemetry_up{source="agent"} 0.0')
        assert "DCGM_FI_DEV_GPU_TEMP{" not in text
    finally:
        proc.terminate()
        await proc.wait()
        server.close()
        sup.gpus.stop()


def test_agent_samples_cross_the_socket_unchanged(fake) -> None:
    tel = gpus.NvmlSource(fake).sample()
    back = gpus.GpuTelemetry.from_json(json.loads(json.dumps(tel.to_json())))
    assert back == tel


@pytest.mark.parametrize("code,severity,words", [
    (13, "warn", "graphics engine exception"), (31, "warn", "memory page fault"),
    (48, "crit", "double-bit ECC"), (63, "warn", "row remapping recorded"),
    (64, "warn", "row remapping failed"), (79, "crit", "fallen off the bus"),
    (74, "crit", "NVLink"), (999, "warn", "Xid 999")])
def test_each_xid_class_becomes_its_alert(fake, tmp_path, code, severity, words) -> None:
    """Through the agent's monitor (NVML events, audited) to the console's alert."""
    from console.model.gpu_state import conditions, parse
    from pod_agent.gpu_monitor import GpuMonitor

    audited: list[dict] = []
    mon = GpuMonitor(audited.append, sample_every_s=0.2, nvml=fake,
                     kmsg_path=str(tmp_path / "no-kmsg"))
    mon.start()
    try:
        (fake.faults / f"xid-1-{code}").touch()
        deadline = time.monotonic() + 30
        while not mon.events and time.monotonic() < deadline:
            time.sleep(0.05)
        doc = mon.status({})
    finally:
        mon.stop()
    assert audited and audited[0]["op"] == "xid" and audited[0]["xid"] == code
    assert doc["xid_error"] is None and "kernel log not readable" in doc["kmsg_error"]
    conds = [c for c in conditions(parse(doc), set(), time.time(), 30, 10)
             if c.key.startswith("xid:")]
    assert len(conds) == 1 and conds[0].severity == severity
    assert words in conds[0].title and conds[0].title.startswith(f"GPU 1 Xid {code}")
    assert conds[0].detail  # what to do


def test_xid_lines_of_the_kernel_log_count_once(fake, tmp_path) -> None:
    """The driver logs every Xid in the kernel log; NVML's events carry the critical
    ones. Both seen, one event; a line from another GPU's bus is mapped to its index."""
    import os

    from pod_agent.gpu_monitor import GpuMonitor

    kmsg = tmp_path / "kmsg"
    os.mkfifo(kmsg)
    audited: list[dict] = []
    mon = GpuMonitor(audited.append, sample_every_s=0.2, nvml=fake, kmsg_path=str(kmsg))
    mon.start()
    try:
        with open(kmsg, "w") as w:  # the kernel's record format: "prio,seq,us,flags;text"
            w.write("4,1201,88123,-;NVRM: Xid (PCI:0000:00:07): 13, pid=4242, "
                    "name=python3, Graphics Exception\n")
            w.flush()
            (fake.faults / "xid-0-79").touch()
            w.write("4,1202,88124,-;NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', "
                    "GPU has fallen off the bus.\n")
            w.flush()
            # the second report of the 79, if any, comes from either source before a
            # later event of its own (each source reports in order): one barrier event
            # through each, waited for, instead of a pause a loaded machine outlasts
            w.write("4,1203,88125,-;NVRM: Xid (PCI:0000:00:07): 31, pid=4242, "
                    "name=python3, MMU Fault\n")
            w.flush()
            (fake.faults / "xid-0-48").touch()
            deadline = time.monotonic() + 30
            while not {(0, 48), (1, 31)} <= {(e["gpu"], e["xid"]) for e in mon.events} \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
        events = sorted((e["gpu"], e["xid"]) for e in mon.status({})["xid_events"])
    finally:
        mon.stop()
    assert events == [(0, 48), (0, 79), (1, 13), (1, 31)], events
    assert {e["source"] for e in mon.events} <= {"nvml", "kernel log"}
