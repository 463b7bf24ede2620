"""Benchmark: ``pod-console fleet`` without Prometheus, for N contexts.

Run:  python bench/fleet_bench.py  [--sizes 50,100,200,400] [--profile N]

For each N it builds a config with N contexts, each on a pod of its own on the
loopback RunPod emulator (``console/sources/provider/emulator.py``, in a process of its
own, N RUNNING pods) whose slot is one of N simulated vLLM servers
(``bench/slot_server.py``, the real ~55 KB vLLM 0.32.0 exposition, in another process),
then runs ``python -m console.cli fleet --json`` as a user would and reports its wall
time, CPU time and peak RSS (``wait4`` of that one process), and how many rows came
back RUNNING with their slot UP. Without Prometheus, so every pod is polled directly:
its provider record and its slot's health, models and metrics.

It ends with the verdicts: whether 100 contexts take 3 s or less, and whether the time
is linear: the cost of each added context (the slope between consecutive sizes, so the
fixed start of the interpreter is not spread over the contexts) at the largest sizes
within 1.5x of that at the smallest. Exit status 0 when both hold.

Measured on the 2-core development machine (the emulator and the slot servers share
those cores): before the fix 100 contexts took 5.4 s and 400 took 38.3 s (493 MB);
after it, 1.9 s and 6.0 s (170 MB), about 13.5 ms per added context at every size.

``--profile N`` runs the fleet once in this process under cProfile instead and prints
the top functions by cumulative time.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

EXPOSITION = ROOT / "tests/fixtures/vllm-0.32.0-cpu/ngram/metrics-specdecode-after-basic-load.txt"
KEY = "rp-bench-key"
SLOT_PORT = 8000
TARGET_100_S = 3.0
LINEAR_SLACK = 1.5

EMULATOR = r"""
import json, sys, time
from console.sources.provider.emulator import EmulatorServer, EmulatorState
n, base = int(sys.argv[1]), int(sys.argv[2])
state = EmulatorState(api_key=sys.argv[3])
ids = []
for i in range(n):
    pid = f"bench{i:05d}"
    pod = state._pod(pid, f"bench-{i}", "vllm/vllm-openai:latest",
                     "NVIDIA H100 80GB HBM3", 2, "13.0")
    pod["runtime"] = {"uptime": 60, "ports": [
        {"private": 8000, "public": base + i, "type": "tcp", "ip": "127.0.0.1"}]}
    state.pods[pid] = pod
    ids.append(pid)
srv = EmulatorServer(state)
srv.start()
print(json.dumps({"base_url": srv.base_url, "ids": ids}), flush=True)
sys.stdin.read()
print(json.dumps({"requests": len(state.log)}), flush=True)
srv.stop()
"""


def free_base(n: int) -> int:
    for base in range(21000, 60000, 509):
        socks = []
        try:
            for i in range(n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free run of ports")


def write_world(d: Path, n: int, base: int, ids: list[str]) -> Path:
    prof = d / "profiles"
    prof.mkdir()
    (prof / "10-bench.yaml").write_text(json.dumps({
        "gpu_type_ids": ["NVIDIA H100 80GB HBM3"], "gpu_count": 2,
        "image": "vllm/vllm-openai:latest",
        "slots": {"MAIN": {"served_model_name": "tiny-main", "hf_repo_id": "x/y",
                           "port": SLOT_PORT, "gpus": [0, 1], "gpu_util": 0.5,
                           "max_model_len": 4096}},
        "aliases": {"default": "MAIN"}}))
    lines = [f"state_dir: {d / 'state'}", f"profiles_dir: {prof}", "contexts:"]
    for i, pid in enumerate(ids):
        lines += [f"  c{i:04d}:", "    pod:", f"      machine_id: {pid}",
                  "      host: 127.0.0.1", f"      port_map: {{{SLOT_PORT}: {base + i}}}"]
    cfg = d / "config.yaml"
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


class World:
    """The emulator and the slot servers for N contexts, each in a process of its own."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.dir = Path(tempfile.mkdtemp(prefix=f"fleet-bench-{n}-"))
        self.base = free_base(n)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.slots = subprocess.Popen(
            [sys.executable, str(ROOT / "bench/slot_server.py"), "--base-port",
             str(self.base), "--slots", str(n), "--exposition", str(EXPOSITION),
             "--model", "tiny-main"],
            stdout=subprocess.PIPE, text=True, env=env)
        assert self.slots.stdout is not None and self.slots.stdout.readline().strip() == "ready"
        self.emu = subprocess.Popen([sys.executable, "-c", EMULATOR, str(n), str(self.base),
                                     KEY], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    text=True, env=env)
        assert self.emu.stdout is not None
        info = json.loads(self.emu.stdout.readline())
        self.base_url = info["base_url"]
        self.cfg = write_world(self.dir, n, self.base, info["ids"])
        self.env = dict(os.environ, PYTHONPATH=str(ROOT), RUNPOD_API_KEY=KEY,
                        RUNPOD_API_BASE=self.base_url)
        for k in ("POD_CONSOLE_STATE_DIR", "POD_CONSOLE_CONTEXT", "POD_CONSOLE_CONFIG",
                  "POD_CONSOLE_PROMETHEUS_URL"):
            self.env.pop(k, None)

    def close(self) -> int:
        """Stop both servers; the emulator's count of API requests."""
        requests = -1
        if self.emu.poll() is None:
            assert self.emu.stdin is not None and self.emu.stdout is not None
            self.emu.stdin.close()
            with contextlib.suppress(ValueError):
                requests = json.loads(self.emu.stdout.readline())["requests"]
            try:
                self.emu.wait(10)
            except subprocess.TimeoutExpired:
                self.emu.kill()
                self.emu.wait()
        self.slots.terminate()
        self.slots.wait()
        return requests


def run_fleet_measured(world: World) -> dict:
    """One ``fleet`` process, its own rusage (not the servers')."""
    import threading

    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "console.cli", "fleet", "--json", "--config",
                          str(world.cfg)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=world.env, cwd=world.dir)
    chunks: dict[str, bytes] = {}

    def drain(name: str, f) -> None:
        chunks[name] = f.read()

    readers = [threading.Thread(target=drain, args=(k, f)) for k, f in
               (("out", p.stdout), ("err", p.stderr))]
    for t in readers:
        t.start()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    for t in readers:
        t.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    try:
        doc = json.loads(chunks["out"])
    except ValueError:
        sys.stderr.write(chunks["err"].decode()[-3000:])
        raise
    rows = doc["pods"]
    ok = sum(1 for r in rows if r["status"] == "RUNNING" and r["slots_up"] == 1
             and not r["error"])
    errors = sorted({r["error"] for r in rows if r["error"]})
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024,
            "rows": len(rows), "ok": ok, "errors": errors[:3], "rc": p.returncode}


def profile(n: int) -> None:
    import asyncio
    import cProfile
    import pstats

    world = World(n)
    try:
        os.environ.update({k: world.env[k] for k in ("RUNPOD_API_KEY", "RUNPOD_API_BASE")})
        from console.commands.fleet_cmd import _fleet

        pr = cProfile.Profile()
        t0 = time.perf_counter()
        pr.enable()
        snap = asyncio.run(_fleet(world.cfg))
        pr.disable()
        print(f"{n} contexts: {time.perf_counter() - t0:.2f} s under cProfile, "
              f"{sum(1 for r in snap.rows if r.slots_up == 1)} slots up")
        pstats.Stats(pr).sort_stats("cumulative").print_stats(40)
    finally:
        world.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="50,100,200,400")
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    args = ap.parse_args()
    if args.profile:
        profile(args.profile)
        return 0
    sizes = [int(x) for x in args.sizes.split(",")]
    results: dict[int, dict] = {}
    print(f"{'contexts':>8} {'wall s':>7} {'cpu s':>6} {'peak RSS MB':>11} {'ok rows':>8} "
          f"{'API reqs':>8}  errors")
    for n in sizes:
        world = World(n)
        try:
            r = run_fleet_measured(world)
        finally:
            r_api = world.close()
        results[n] = r
        print(f"{n:>8} {r['wall_s']:>7.2f} {r['cpu_s']:>6.2f} {r['rss_mb']:>11.0f} "
              f"{r['ok']:>4}/{r['rows']:<3} {r_api:>8}  {'; '.join(r['errors']) or '-'}",
              flush=True)
    verdict = 0
    if 100 in results:
        good = results[100]["wall_s"] <= TARGET_100_S and results[100]["ok"] == 100
        print(f"100 contexts in {results[100]['wall_s']:.2f} s: "
              f"{'within' if good else 'NOT within'} the {TARGET_100_S:g} s target"
              + ("" if results[100]["ok"] == 100 else " (not every row read)"))
        verdict |= 0 if good else 1
    if len(results) >= 3:
        # the slope between sizes, so the fixed start (interpreter, imports) is not spread
        # over the contexts: linear when the last step's cost per added context is within
        # LINEAR_SLACK of the first step's
        ns = sorted(results)
        steps = [(results[b]["wall_s"] - results[a]["wall_s"]) / (b - a)
                 for a, b in itertools.pairwise(ns)]
        print("per added context: " + ", ".join(
            f"{a}->{b} {s * 1000:.1f} ms" for (a, b), s in zip(itertools.pairwise(ns),
                                                               steps, strict=True)))
        linear = steps[-1] <= steps[0] * LINEAR_SLACK
        print(f"time is {'linear' if linear else 'NOT linear'} in the contexts (last step "
              f"{steps[-1] / steps[0]:.2f}x the first; linear: at most {LINEAR_SLACK:g}x)")
        verdict |= 0 if linear else 2
    return verdict


if __name__ == "__main__":
    sys.exit(main())
