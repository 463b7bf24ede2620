"""Benchmark: the web wall's bytes to the browser per minute, and the server's CPU.

Run:  python bench/web_wall_bench.py [--minutes 2] [--refresh 2]

Starts ``pod-console demo --web`` (as docs/demo.md does) and opens it in real headless
Chromium (Debian's ``chromium``, driven by Playwright) at 1600×900, the size of a wall
display's browser window at 16 px type. After a 20 s settling time, for the measured
minutes:
  * bytes the browser received on the session's websocket (the frames xterm.js draws),
    per minute;
  * CPU share of one core of the web server process (textual-serve) and, separately,
    of the browser session's wall process (the console itself; one per browser tab);
  * both processes' resident memory at the end.
The simulated deployment's own processes (agent, fake slots) are not counted: on a real
wall they run on the pod. Chromium is not counted either: it runs on the display.
Target (issue 18 names none; the terminal wall's is ≤ 40 KB/min and ≤ 3 % of a core at a
2 s refresh): the same as the terminal's.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from tests.support.browser import launch, open_wall, start_demo_web, stop_server  # noqa: E402
from tests.support.procs import free_port  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as fh:
        return int(fh.read().split()[1]) * PAGE / 2**20


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def session_process(server: int) -> int | None:
    """The browser session's ``pod-console wall`` (textual-serve starts it through sh)."""
    todo = children(server)
    while todo:
        pid = todo.pop()
        line = cmdline(pid)
        if "console.cli wall" in line and not line.startswith(("/bin/sh", "sh ")):
            return pid
        todo.extend(children(pid))
    return None


def run(minutes: float, refresh: float) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="web-wall-bench-"))
    port = free_port()
    server = start_demo_web(port, work / "state", work / "server.log", "--refresh",
                            f"{refresh:g}")
    try:
        with sync_playwright() as pw:
            browser = launch(pw)
            wall = open_wall(browser, port, server)
            wall.wait_for(lambda t: "FLASH" in t and "% KV" in t, 120)
            wall.page.wait_for_timeout(20_000)
            session = session_process(server.pid)
            assert session is not None, "no session process found"
            f0 = wall.frames_in
            b0, s0, w0, t0 = wall.bytes_in, cpu_s(server.pid), cpu_s(session), time.monotonic()
            wall.page.wait_for_timeout(minutes * 60_000)
            b1, s1, w1, t1 = wall.bytes_in, cpu_s(server.pid), cpu_s(session), time.monotonic()
            out = {"refresh_s": refresh, "minutes": (t1 - t0) / 60,
                   "browser_kb_per_min": (b1 - b0) / 1000 / ((t1 - t0) / 60),
                   "server_cpu_pct": 100 * (s1 - s0) / (t1 - t0),
                   "session_cpu_pct": 100 * (w1 - w0) / (t1 - t0),
                   "server_rss_mib": rss_mib(server.pid), "session_rss_mib": rss_mib(session),
                   "frames_per_min": (wall.frames_in - f0) / ((t1 - t0) / 60)}
            browser.close()
    finally:
        stop_server(server)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=2.0)
    ap.add_argument("--refresh", type=float, action="append",
                    help="refresh interval(s) to measure (default: 2)")
    args = ap.parse_args()
    print(f"{'refresh':>8} {'browser KB/min':>15} {'server CPU':>11} {'session CPU':>12} "
          f"{'server RSS':>11} {'session RSS':>12}")
    for refresh in args.refresh or [2.0]:
        r = run(args.minutes, refresh)
        print(f"{r['refresh_s']:>7g}s {r['browser_kb_per_min']:>15.1f} "
              f"{r['server_cpu_pct']:>10.2f}% {r['session_cpu_pct']:>11.2f}% "
              f"{r['server_rss_mib']:>8.0f} MiB {r['session_rss_mib']:>8.0f} MiB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
