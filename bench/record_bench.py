"""Benchmark: what recording every poll costs, on the real vLLM 0.32 exposition.

Run:  python bench/record_bench.py  [--hours 24] [--seeks 40]

Two slots serve the captured expositions of ``tests/fixtures/vllm-0.32.0-cpu`` (the
plain engine and the n-gram speculative one, ~55 KB each), their counters and histograms
moving with simulated traffic (a request every ~2 s per slot, tokens, latencies into
their buckets, the KV gauge walking). The console's own ``DeploymentPoller`` polls them
(its HTTP fetch replaced by the text, the parse, layout, scrape window and figures its
own) on a simulated clock at a 2 s refresh, the pod is read every 10 s, and each poll's
state goes to a real :class:`Recorder` as the session hands it over.

Prints, against the issue's targets:
  * bytes per second per slot on disk (the file after the last poll, over the simulated
    time and the slots): <= 1 KB/s/slot;
  * the simulated day of two slots, in MB: <= 200 MB (``--hours 24``; fewer hours are
    extrapolated and said so);
  * recording CPU as a share of one core at 2 slots and a 2 s refresh: the writer
    thread's CPU (``thread_time``) plus what handing a poll over costs the loop, over the
    simulated seconds: <= 0.5 %;
  * seek: opening the file and rebuilding the state at a random minute (figures from
    the samples, the plots' hour), worst and median of ``--seeks``: <= 200 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from console.model.history import History  # noqa: E402
from console.model.snapshot import PodSnapshot  # noqa: E402
from console.session.record.reader import SqliteTape  # noqa: E402
from console.session.record.store import PollItem, Recorder  # noqa: E402
from console.session.record.tape import index_at  # noqa: E402
from console.session.view import ConsoleState, ConsoleView  # noqa: E402
from console.sources.collect import poller as poller_mod  # noqa: E402
from console.sources.collect.exposition import ParseMemo, parse  # noqa: E402
from console.sources.collect.poller import DeploymentPoller  # noqa: E402
from console.sources.collect.slot import FAMILIES, SlotProbe  # noqa: E402
from console.sources.collect.targets import SlotTarget  # noqa: E402

FIX = ROOT / "tests/fixtures/vllm-0.32.0-cpu"
SOURCES = {"MAIN": (FIX / "plain/metrics-after-load.txt", "tiny-main"),
           "SPEC": (FIX / "ngram/metrics-specdecode-after-basic-load.txt", "tiny-spec")}
REFRESH_S = 2.0


class Traffic:
    """One slot's exposition with its numbers moving as a served model's do."""

    def __init__(self, text: str, seed: int) -> None:
        self.rng = random.Random(seed)
        self.lines: list[list[str]] = []
        self.values: list[float] = []
        self.kind: list[str] = []
        self.le: list[float] = []
        for line in text.splitlines():
            if line.startswith("#") or not line.strip():
                self.lines.append([line])
                continue
            head, _, value = line.rpartition(" ")
            name = head.split("{", 1)[0]
            self.lines.append([head, ""])
            self.values.append(float(value))
            le = math.inf
            if name.endswith("_bucket") and 'le="' in head:
                raw = head.split('le="', 1)[1].split('"', 1)[0]
                le = float(raw.replace("+Inf", "inf"))
            self.le.append(le)
            self.kind.append("bucket" if name.endswith("_bucket") else
                             "count" if name.endswith("_count") else
                             "sum" if name.endswith("_sum") else
                             "created" if name.endswith("_created") else
                             "counter" if name.endswith("_total") else "gauge")
        self.names = [ln[0].split("{", 1)[0] for ln in self.lines if len(ln) == 2]

    def step(self) -> str:
        """A refresh's worth of traffic; the text a scrape reads now."""
        rng = self.rng
        n = sum(1 for _ in range(3) if rng.random() < 0.33)  # ~1 request per 2 s
        obs: dict[str, list[float]] = {}
        for i, kind in enumerate(self.kind):
            base = self.names[i].rsplit("_", 1)[0]
            if kind == "counter":
                if "token" in self.names[i]:
                    self.values[i] += n * rng.randint(50, 400)
                elif n and rng.random() < 0.5:
                    self.values[i] += n
            elif kind in ("bucket", "count", "sum") and n:
                got = obs.setdefault(base, [rng.lognormvariate(-1.0, 1.0) * (
                    200 if "tokens" in base else 1) for _ in range(n)])
                if kind == "bucket":
                    self.values[i] += sum(1 for v in got if v <= self.le[i])
                elif kind == "count":
                    self.values[i] += len(got)
                else:
                    self.values[i] += sum(got)
            elif kind == "gauge" and ("usage" in self.names[i] or "running" in self.names[i]):
                self.values[i] = max(0.0, min(1.0 if "usage" in self.names[i] else 8.0,
                                              self.values[i] + rng.uniform(-0.05, 0.05)
                                              * (1 if "usage" in self.names[i] else 20)))
        out = []
        k = 0
        for ln in self.lines:
            if len(ln) == 1:
                out.append(ln[0])
            else:
                out.append(f"{ln[0]} {self.values[k]!r}")
                k += 1
        return "\n".join(out) + "\n"


async def record(directory: Path, polls: int) -> tuple[Recorder, float, float]:
    """Polls of two slots into a recorder; (recorder, loop-side CPU s, writer CPU s)."""
    clock = [1_796_000_000.0]
    targets = tuple(SlotTarget(slot, model, 8000 + i, f"http://127.0.0.1:{8000 + i}",
                               (i,), 0.45) for i, (slot, (_, model)) in
                    enumerate(SOURCES.items()))
    traffic = {slot: Traffic(path.read_text().replace('model_name="tiny-main"',
                                                      f'model_name="{model}"'), i)
               for i, (slot, (path, model)) in enumerate(SOURCES.items())}

    async def probe(client, target, timeout, api_key=None, metrics=True, memo=None):  # type: ignore[no-untyped-def]
        text = traffic[target.slot].step()
        exp = parse(text, FAMILIES, target.served_model_name, memo or ParseMemo())
        return SlotProbe(target, clock[0], "up", "200", (target.served_model_name,), exp,
                         None)

    poller_mod.probe_slot = probe  # the HTTP fetch only: the rest is the poller's own
    history = History(3600.0, REFRESH_S)
    p = DeploymentPoller("bench", targets, window_s=300.0, history=history,
                         probe_interval_s=1e12, clock=lambda: clock[0])
    view = ConsoleView("bench", targets, False, False, REFRESH_S, 30.0)
    rec = Recorder(directory, {"profile": "bench", "window_s": 300.0, "history_s": 3600.0,
                               "refresh_s": REFRESH_S}, clock=lambda: clock[0])
    pod = PodSnapshot(pod_id="bench1", status="RUNNING", gpu_name="NVIDIA H200",
                      gpu_count=2, cost_per_hr=7.0, started_at=clock[0])
    loop_cpu = 0.0
    for i in range(polls):
        snap = await p.poll()
        pod_read = None
        if i % 5 == 0:
            pod = PodSnapshot(**{**pod.__dict__, "fetched_at": clock[0]})
            pod_read = pod
        c0 = time.thread_time()
        state = ConsoleState(view=view, ready=True, now=clock[0], snapshot=snap, pod=pod,
                             alerts=(), stale=None, history=history, allowed=frozenset(),
                             polled_at=clock[0])
        while not rec.poll(PollItem(state, p.last_read, pod_read)):
            await asyncio.to_thread(rec.flush)  # the bench outruns real time: wait
        loop_cpu += time.thread_time() - c0
        clock[0] += REFRESH_S
    await asyncio.to_thread(rec.flush, 600.0)
    cpu = rec.cpu_s
    await asyncio.to_thread(rec.close, 600.0)
    await p.aclose()
    return rec, loop_cpu, cpu


def seeks(path: Path, n: int) -> list[float]:
    """Open the file and rebuild the state at random minutes: wall ms each (cold)."""
    out = []
    rng = random.Random(5)
    probe = SqliteTape(path)
    t0, t1 = probe.times()[0], probe.times()[-1]
    probe.close()
    for _ in range(n):
        minute = t0 + rng.randrange(int((t1 - t0) // 60)) * 60
        began = time.perf_counter()
        tape = SqliteTape(path)
        state = tape.state_at(index_at(tape.times(), minute))
        assert state.snapshot is not None and state.snapshot.slots[0].figures is not None
        out.append((time.perf_counter() - began) * 1000)
        tape.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--seeks", type=int, default=40)
    args = ap.parse_args()
    polls = int(args.hours * 3600 / REFRESH_S)
    with tempfile.TemporaryDirectory() as tmp:
        began = time.monotonic()
        rec, loop_cpu, writer_cpu = asyncio.run(record(Path(tmp), polls))
        took = time.monotonic() - began
        assert rec.path is not None and rec.written == polls, (rec.written, rec.dropped)
        size = sum(p.stat().st_size for p in Path(tmp).iterdir())
        sim_s = polls * REFRESH_S
        per_slot = size / sim_s / len(SOURCES)
        day = size * 86400 / sim_s
        share = (loop_cpu + writer_cpu) / sim_s
        seek_ms = seeks(rec.path, args.seeks)
        print(f"simulated {args.hours:g} h of {len(SOURCES)} slots at {REFRESH_S:g} s "
              f"({polls} polls) in {took:.0f} s")
        print(f"on disk: {size / 1e6:.1f} MB, {per_slot:.0f} B/s per slot "
              f"(target <= 1024 B/s)")
        print(f"a day of two slots: {day / 1e6:.1f} MB"
              f"{'' if args.hours >= 24 else ' (extrapolated)'} (target <= 200 MB)")
        print(f"recording CPU: {share * 100:.3f} % of a core (writer "
              f"{writer_cpu / polls * 1000:.2f} ms/poll, hand-over "
              f"{loop_cpu / polls * 1000:.3f} ms/poll; target <= 0.5 %)")
        print(f"seek to a minute of the {args.hours:g} h file: worst {max(seek_ms):.0f} ms, "
              f"median {statistics.median(seek_ms):.0f} ms over {len(seek_ms)} "
              "(target <= 200 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
