"""Benchmark: the console's steady-state CPU, terminal bytes per minute, and first data.

Run:  python bench/tui_bench.py [--minutes 1]

Starts the demo deployment (simulated slots, RunPod emulator) once, then runs
``pod-console watch`` against it in a real pseudo-terminal (160×48) as its own
process, so only the console is measured:
  * CPU share of one core between t=20 s and t=20 s + the measured minutes;
  * bytes the console wrote to the terminal per minute over the same span;
  * time from process start to the first frame showing live numbers (a slot's
    "UP"), against a bare Textual app's first frame (its text), as a ratio.
Each at a 1 s and a 2 s refresh (plots every 300 s, the default, and every 120 s).
Targets: ≤ 3 % of a core, ≤ 40 KB/min at 2 s, first data ≤ 2× the bare app's first frame.

The console's modules are byte-compiled first, as ``pip install`` leaves an installed
package (Textual's already are): with ``PYTHONDONTWRITEBYTECODE`` set, as on some
machines, every start would otherwise compile the console's sources again (~20 ms).
Terminal bytes vary from run to run with what the demo does (alerts raised and cleared
write to the log; a plot redraw is 15-25 KB), so compare runs of several minutes.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import select
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from console.demo.deployment import DEMO_KEY, DemoDeployment  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK  # utime + stime


def run_in_pty(argv: list[str], env: dict[str, str], marker: bytes, measure_s: float,
               warmup_s: float = 20.0) -> dict[str, float]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True, close_fds=True)
    os.close(slave)
    seen = b""
    first = None
    total = 0
    window_bytes = 0
    cpu0 = None
    t_start = t0 + warmup_s
    t_end = t_start + measure_s
    try:
        while time.monotonic() < (t_end if measure_s else t0 + 30):
            r, _, _ = select.select([master], [], [], 0.1)
            now = time.monotonic()
            if cpu0 is None and measure_s and now >= t_start:
                cpu0 = cpu_s(proc.pid)
            if not r:
                if first is not None and not measure_s:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            total += len(data)
            if cpu0 is not None:
                window_bytes += len(data)
            if first is None:
                seen = (seen + data)[-4096:]
                if marker in seen:
                    first = now - t0
                    if not measure_s:
                        break
        cpu1 = cpu_s(proc.pid) if measure_s else None
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        os.close(master)
    out = {"first_s": first if first is not None else float("nan")}
    if measure_s and cpu0 is not None and cpu1 is not None:
        out["cpu_share"] = (cpu1 - cpu0) / measure_s
        out["bytes_per_min"] = window_bytes / measure_s * 60
    return out


BARE = ("from textual.app import App\nfrom textual.widgets import Static\n"
        "class Bare(App):\n    def compose(self):\n        yield Static('BARE-READY')\n"
        "Bare().run()\n")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=2.0)
    args = ap.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", "console", "pod_agent"],
                   cwd=ROOT, check=True)
    demo = DemoDeployment(seed=7, startup_s=2.0)
    demo.start()
    try:
        time.sleep(6)  # slots up
        tmp = Path(tempfile.mkdtemp())
        cfg = tmp / "config.yaml"
        cfg.write_text(f"profiles_dir: {demo.profiles_dir}\nstate_dir: {tmp / 'state'}\n"
                       f"pod:\n  runpod_id: {demo.pod_id}\n  host: 127.0.0.1\n")
        env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor",
                   RUNPOD_API_KEY=DEMO_KEY, RUNPOD_API_BASE=demo.emulator.base_url,
                   PYTHONPATH=str(ROOT))
        # medians of 5: single starts vary by ±20 ms on a busy machine
        bare = [run_in_pty([sys.executable, "-c", BARE], env, b"BARE-READY", 0)["first_s"]
                for _ in range(5)]
        bare_s = sorted(bare)[2]
        print(f"bare Textual app first frame: {bare_s * 1000:.0f} ms (median of 5)")
        print(f"{'refresh':>8} {'plots':>6} {'first data':>11} {'ratio':>6} {'CPU':>7} "
              f"{'KB/min':>8}")
        for refresh, plots in ((1.0, 300), (2.0, 300), (2.0, 120)):
            argv = [sys.executable, "-m", "console.cli", "watch", "--config", str(cfg),
                    "--refresh", str(refresh)]
            penv = dict(env, POD_CONSOLE_PLOT_REFRESH_S=str(plots))
            firsts = [run_in_pty(argv, penv, b" UP", 0)["first_s"] for _ in range(5)]
            first = sorted(firsts)[2]
            m = run_in_pty(argv, penv, b" UP", args.minutes * 60)
            print(f"{refresh:>7.0f}s {plots:>5}s {first * 1000:>9.0f}ms {first / bare_s:>6.2f} "
                  f"{m['cpu_share'] * 100:>6.2f}% {m['bytes_per_min'] / 1024:>8.1f}")
        print("targets: CPU <= 3 % of a core; <= 40 KB/min at 2 s; first data <= 2x bare")
    finally:
        demo._stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
