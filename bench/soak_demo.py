"""A day of the console on the demo, on an accelerated clock: does its memory stay flat?

    python bench/soak_demo.py [--hours 24] [--refresh 2] [--warmup-hours 1]

The real app (headless, the same factory as the CLI) polls the running demo
(simulated vLLM servers, real agent, RunPod emulator) back to back; each poll
moves the console's clock on by one refresh interval, so history windows,
alert hold times and plot buffers age as they would over ``--hours`` of wall
time. RSS (``/proc/self/status`` VmRSS, after a full garbage collection) is read
after the warm-up and then every simulated hour; the verdict is the growth from
the warm-up reading to the largest reading after it (target: ≤ 10 %).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


class Clock:
    def __init__(self) -> None:
        self.t = time.time()

    def __call__(self) -> float:
        return self.t


def rss_kib() -> int:
    gc.collect()
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def soak(hours: float, refresh_s: float, warmup_h: float, trace: bool = False
               ) -> dict[str, object]:
    from console.commands.tui_cmd import build_demo
    from console.ui.app import make_app

    demo, ctx = build_demo(seed=5, refresh_s=refresh_s, startup_s=1.0)
    clock = Clock()
    ctx.clock = clock
    ctx.poller.clock = clock
    app = make_app(ctx)
    polls = int(hours * 3600 / refresh_s)
    per_hour = int(3600 / refresh_s)
    warm_at = int(warmup_h * 3600 / refresh_s)
    readings: list[tuple[float, int]] = []
    t0 = time.monotonic()
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not (
                    app.snapshot and all(s.health == "up" for s in app.snapshot.slots)):
                await pilot.pause(0.2)
            for i in range(1, polls + 1):
                clock.t += refresh_s
                while app.session.polling:  # the interval timer's own poll: never overlap
                    await pilot.pause(0)
                await app.session.poll()
                await pilot.pause(0)  # let the screens paint what the poll brought
                if trace and i == warm_at:
                    import tracemalloc

                    tracemalloc.start(8)
                    first = tracemalloc.take_snapshot()
                if i >= warm_at and (i - warm_at) % per_hour == 0:
                    readings.append((round(i * refresh_s / 3600, 2), rss_kib()))
                    print(f"  {readings[-1][0]:6.2f} h simulated: RSS {readings[-1][1]} KiB",
                          flush=True)
            if trace:
                import tracemalloc

                diff = tracemalloc.take_snapshot().compare_to(first, "traceback")
                for stat in diff[:8]:
                    print(f"{stat.size_diff / 1024:9.1f} KiB {stat.count_diff:+7d} blocks")
                    for line in stat.traceback.format()[-12:]:
                        print("      " + line)
    finally:
        demo._stop_all()
    warm = readings[0][1]
    peak = max(r for _, r in readings)
    return {"hours": hours, "refresh_s": refresh_s, "polls": polls,
            "wall_s": round(time.monotonic() - t0, 1), "warm_rss_kib": warm,
            "peak_rss_kib": peak, "final_rss_kib": readings[-1][1],
            "growth_pct": round(100 * (peak - warm) / warm, 2),
            "history_points": app.history.total_points(),
            "log_lines": len(app.log_lines), "readings": readings}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--refresh", type=float, default=2.0)
    p.add_argument("--warmup-hours", type=float, default=1.0)
    p.add_argument("--trace", action="store_true",
                   help="tracemalloc from the warm-up on: where memory grew (slow)")
    a = p.parse_args()
    res = asyncio.run(soak(a.hours, a.refresh, a.warmup_hours, a.trace))
    print(json.dumps({k: v for k, v in res.items() if k != "readings"}, indent=1))
    ok = res["growth_pct"] <= 10  # type: ignore[operator]
    print(f"RSS growth after warm-up: {res['growth_pct']} % "
          f"({'within' if ok else 'OVER'} the 10 % target)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
