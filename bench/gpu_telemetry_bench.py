"""Benchmark: the pod's GPU telemetry — sampling cost and one scrape of the exporter.

Run:  python bench/gpu_telemetry_bench.py [--seconds 60] [--fake [--gpus 8]]

Starts ``pod-agent exporter`` (its own process, sampling every GPU once a second, as on
a pod) on a free loopback port and measures:
  * its CPU share of one core over ``--seconds`` with nothing scraping it (the sampling
    loop and the Xid event wait alone), and its resident memory at the end;
  * one scrape of ``/metrics``: 300 sequential GETs over a kept-alive-free connection
    each (as Prometheus does per scrape interval), median and p95 wall time in ms.
With ``--fake`` it reads the NVML stand-in (``console/demo/fakenvml``, values from a real
H200 capture) with ``--gpus`` GPUs; without it, the real NVML of this machine.
Targets (issue 15): sampling ≤ 1 % of a core and ≤ 40 MiB RSS; one scrape ≤ 5 ms for
8 GPUs.
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--fake", action="store_true", help="the NVML stand-in, not this GPU")
    ap.add_argument("--gpus", type=int, default=8, help="with --fake: how many GPUs")
    ap.add_argument("--breakdown", action="store_true",
                    help="also, in this process: memory after each step of the start, "
                         "CPU of one sample and of the Xid wait alone")
    args = ap.parse_args()
    if args.breakdown:
        breakdown(args)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if args.fake:
        env["PYTHONPATH"] = f"{ROOT / 'console' / 'demo' / 'fakenvml'}:{ROOT}"
        env["FAKE_NVIDIA_SMI_GPUS"] = str(args.gpus)
    proc = subprocess.Popen([sys.executable, "-m", "pod_agent", "exporter", "--listen",
                             "127.0.0.1:0", "--interval", "1"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        hello = json.loads(proc.stdout.readline())
        port = int(hello["port"])
        time.sleep(3)  # imports and the first samples are the start, not the steady state
        c0, t0 = cpu_s(proc.pid), time.monotonic()
        time.sleep(args.seconds)
        c1, t1 = cpu_s(proc.pid), time.monotonic()
        rss = rss_mib(proc.pid)
        scrape_ms(port, 20)  # warm
        times = sorted(scrape_ms(port, 300))
        body = scrape_body(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    gpus = body.count(b"DCGM_FI_DEV_GPU_UTIL{")
    print(f"source {hello['source']}, {gpus} GPUs"
          f"{' (stand-in)' if args.fake else ''}")
    print(f"sampling at 1 s: {100 * (c1 - c0) / (t1 - t0):.2f} % of a core over "
          f"{t1 - t0:.0f} s; RSS {rss:.1f} MiB")
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
