"""Benchmark: the pod's GPU telemetry — sampling cost and one scrape of the exporter.

Run:  python bench/gpu_telemetry_bench.py [--seconds 60] [--fake [--gpus 8]] [--breakdown]

Measures the arrangement ``pod-agent serve`` runs on a pod whose profile sets
``gpu_metrics_port``: the supervisor samples every GPU once a second (NVML; the Xid event
wait; the kernel log), and ``pod-agent exporter --from-agent`` (its own process: the agent
opens no port) asks the supervisor for each sample over the agent's Unix socket, so only
the supervisor holds NVML. Here the supervisor's part runs alone in a child process
(``--as-agent``: the supervisor's own ``GpuMonitor`` and socket handler, no slots), so what
it costs is the telemetry's alone:
  * the telemetry loop: its CPU share of one core over ``--seconds`` (answering the
    exporter included), and the resident memory it adds to the supervisor (RSS once the
    agent's modules are imported, before and after the monitor starts);
  * the exporter process: CPU and RSS over the same time;
  * one scrape of ``/metrics``: 300 sequential GETs, a connection each (as Prometheus
    does per scrape interval), median and p95 wall time in ms.
With ``--fake`` the NVML stand-in (``console/demo/fakenvml``, values from a real H200
capture) with ``--gpus`` GPUs; without it, the real NVML of this machine.
Targets (issue 15): the telemetry loop at 1 s sampling ≤ 1 % of a core and ≤ 40 MiB of
RSS; one scrape ≤ 5 ms for 8 GPUs.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def anon_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def scrape_ms(port: int, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/metrics")
        r = c.getresponse()
        body = r.read()
        c.close()
        out.append((time.perf_counter() - t0) * 1000)
        assert r.status == 200 and b"DCGM_FI_DEV_GPU_UTIL" in body
    return out


def as_agent(home: str) -> None:
    """The supervisor's telemetry alone: its monitor at the exporter's pace and its
    socket handler (``serve`` without slots). Prints RSS before/after as JSON lines."""
    import asyncio

    from pod_agent import paths
    from pod_agent.supervisor import EXPORTER_SAMPLE_S, Supervisor

    os.environ["POD_AGENT_HOME"] = home
    prof = Path(home) / "bench.yaml"
    prof.write_text((ROOT / "profiles" / "10-rtx6000-2x.yaml").read_text()
                    + "gpu_metrics_port: 9400\n")
    before = rss_mib(os.getpid())
    sup = Supervisor(str(prof), vllm="false", apply_patches=False)
    assert sup.gpus.sampler.interval_s == EXPORTER_SAMPLE_S

    async def main() -> None:
        sup.gpus.start()
        await asyncio.start_unix_server(sup.handle, path=paths.socket_path())
        print(json.dumps({"rss_before": before, "rss_after": rss_mib(os.getpid()),
                          "source": sup.gpus.sampler.latest().source}), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--fake", action="store_true", help="the NVML stand-in, not this GPU")
    ap.add_argument("--gpus", type=int, default=8, help="with --fake: how many GPUs")
    ap.add_argument("--breakdown", action="store_true",
                    help="also, in this process: memory after each step of the start, "
                         "CPU of one sample and of the Xid wait alone")
    ap.add_argument("--as-agent", metavar="HOME", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.as_agent:
        as_agent(args.as_agent)
        return 0
    if args.breakdown:
        breakdown(args)
    # the caller's PYTHONPATH stays after ours (a machine with the agent's dependencies
    # in a directory of their own)
    path = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(":") if p]
    if args.fake:
        path.insert(0, str(ROOT / "console" / "demo" / "fakenvml"))
    env = dict(os.environ, PYTHONPATH=":".join(path))
    if args.fake:
        env["FAKE_NVIDIA_SMI_GPUS"] = str(args.gpus)
    home = tempfile.mkdtemp(prefix="gpu-bench-")
    env["POD_AGENT_HOME"] = home
    env["POD_AGENT_KMSG"] = os.path.join(home, "no-kmsg")  # the bench reads no kernel log
    procs: list[subprocess.Popen[str]] = []
    try:
        agent = subprocess.Popen([sys.executable, __file__, "--as-agent", home], cwd=ROOT,
                                 env=env, stdout=subprocess.PIPE, text=True,
                                 start_new_session=True)
        procs.append(agent)
        assert agent.stdout is not None
        mem = json.loads(agent.stdout.readline())
        exporter = subprocess.Popen(
            [sys.executable, "-m", "pod_agent", "exporter", "--listen", "127.0.0.1:0",
             "--interval", "1", "--from-agent"], cwd=ROOT, env=env,
            stdout=subprocess.PIPE, text=True, start_new_session=True)
        procs.append(exporter)
        assert exporter.stdout is not None
        port = int(json.loads(exporter.stdout.readline())["port"])
        time.sleep(3)  # imports and the first samples are the start, not the steady state
        pids = (agent.pid, exporter.pid)
        c0, t0 = [cpu_s(p) for p in pids], time.monotonic()
        time.sleep(args.seconds)
        c1, t1 = [cpu_s(p) for p in pids], time.monotonic()
        rss = [rss_mib(p) for p in pids]
        scrape_ms(port, 20)  # warm
        times = sorted(scrape_ms(port, 300))
        body = scrape_body(port)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
    share = [100 * (b - a) / (t1 - t0) for a, b in zip(c0, c1, strict=True)]
    gpus = body.count(b"DCGM_FI_DEV_GPU_UTIL{")
    print(f"source {mem['source']}, {gpus} GPUs{' (stand-in)' if args.fake else ''}")
    print(f"telemetry loop in the supervisor, 1 s sampling: {share[0]:.2f} % of a core "
          f"over {t1 - t0:.0f} s; RSS it adds {mem['rss_after'] - mem['rss_before']:.1f} "
          f"MiB ({mem['rss_before']:.1f} -> {mem['rss_after']:.1f}; {rss[0]:.1f} at the "
          "end)")
    print(f"exporter process (--from-agent): {share[1]:.2f} % of a core; RSS {rss[1]:.1f} "
          "MiB (no NVML in it)")
    print(f"one scrape ({len(body)} bytes): median {statistics.median(times):.2f} ms, "
          f"p95 {times[int(0.95 * len(times))]:.2f} ms over {len(times)}")
    return 0


def breakdown(args: argparse.Namespace) -> None:
    """Where the exporter's memory and CPU go, step by step, in this process."""
    if args.fake:
        sys.path.insert(0, str(ROOT / "console" / "demo" / "fakenvml"))
        os.environ["FAKE_NVIDIA_SMI_GPUS"] = str(args.gpus)
    sys.path.insert(0, str(ROOT))
    me = os.getpid()
    print(f"RSS python alone: {rss_mib(me):.1f} MiB")
    import prometheus_client  # noqa: F401
    print(f"RSS + prometheus_client: {rss_mib(me):.1f} MiB")
    from pod_agent import gpus

    nvml = gpus.load_nvml()
    print(f"RSS + NVML initialised: {rss_mib(me):.1f} MiB")
    src = gpus.NvmlSource(nvml)
    src.sample()
    print(f"RSS + one sample: {rss_mib(me):.1f} MiB ({anon_mib(me):.1f} MiB of it the "
          "process's own, the rest mapped files: the driver library, Python)")
    c0 = time.process_time()
    for _ in range(60):
        src.sample()
    print(f"one sample of {src.count} GPUs: {(time.process_time() - c0) / 60 * 1000:.2f} "
          "ms CPU (1 s sampling: that / 10 = % of a core)")
    # which queries cost: each of the binding's functions timed through one more sample
    costs: dict[str, list[float]] = {}

    def timed(name: str, fn):  # type: ignore[no-untyped-def]
        def call(*a):  # type: ignore[no-untyped-def]
            t = time.process_time()
            try:
                return fn(*a)
            finally:
                costs.setdefault(name, []).append(time.process_time() - t)
        return call

    real = {n: getattr(nvml, n) for n in dir(nvml) if n.startswith("nvmlDevice")}
    for n, fn in real.items():
        setattr(nvml, n, timed(n, fn))
    src._slow_read = -1e18  # the slow counters too, once
    for _ in range(10):
        src.sample()
    for n, fn in real.items():
        setattr(nvml, n, fn)
    top = sorted(costs.items(), key=lambda kv: -sum(kv[1]))[:8]
    for n, ts in top:
        print(f"  {n}: {sum(ts) / 10 * 1000:.2f} ms CPU per sample ({len(ts) // 10} calls)")
    w = gpus.XidWatcher(nvml, [s["uuid"] for s in src.static])
    c0, t0 = time.process_time(), time.monotonic()
    w.start()
    time.sleep(10)
    w.stop()
    print(f"Xid wait alone: {100 * (time.process_time() - c0) / (time.monotonic() - t0):.2f}"
          f" % of a core ({w.error or 'registered'})")


def scrape_body(port: int) -> bytes:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/metrics")
    body = c.getresponse().read()
    c.close()
    return body


if __name__ == "__main__":
    sys.exit(main())
