"""Where the console's first number goes: ``pod-console watch`` started on the demo, traced.

Run:  python bench/start_trace.py [--starts 7]

``bench/tui_bench.py`` says how long the first number takes against a bare Textual app;
this says where that time goes (issue 47), the same way each run:
  * a timeline of each start, in a real pseudo-terminal (160×48) on the demo deployment, as
    the median over the starts of each phase's time from the process's spawn: the boot plan
    read, the first poll begun (in its thread) and ended, Textual's import begun, the app
    built and mounted, the first poll shown, the first frame drawn, and the first number
    read off the terminal's bytes (as the bench reads it);
  * CPU: the console's own user + system time when its first frame is drawn (beside the
    frame's time: nearly all of a start is CPU on one core, the first poll's I/O having
    ended long before the screen is ready);
  * dataclasses created before the first frame, and the time that took;
  * the console's imports after Textual's, in the order a start makes them, each group's
    own time (median of as many runs, each a fresh interpreter).
Phases are marked from inside the traced process: a meta-path hook wraps the functions that
begin and end each phase once their module has loaded (so the import order is the
console's own), and marks go to a file as they happen.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MARKS_ENV = "START_TRACE_MARKS"
SPAWN_ENV = "START_TRACE_SPAWNED"

PHASES = ("boot plan read", "first poll begun", "first poll ended", "Textual import begun",
          "app built", "app mounted", "first poll shown", "first frame drawn")

IMPORT_GROUPS = (
    ("Textual (as the bare app)", ("textual.app", "textual.widgets._static")),
    ("CLI and boot plan (YAML)", ("console.cli", "console.session.boot")),
    ("poller and the model it fills", ("console.sources.collect.poller",
                                       "console.session.first_poll")),
    ("view", ("console.session.view",)),
    ("replay", ("console.session.record.replay",)),
    ("session", ("console.session.session",)),
    ("operation specs", ("console.operations.specs",)),
    ("main screen and widgets", ("console.ui.screens.main",)),
    ("app", ("console.ui.app",)),
)


# -- the traced process ------------------------------------------------------------------
class _After(importlib.abc.MetaPathFinder):
    """Runs ``hooks[name](module)`` once ``name`` has been executed; marks when a module
    in ``begins`` starts to load."""

    def __init__(self, hooks: dict[str, Callable[[Any], None]],
                 begins: dict[str, str], mark: Callable[[str], None]) -> None:
        self.hooks, self.begins, self.mark = hooks, begins, mark

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name in self.begins:
            self.mark(self.begins.pop(name))
        hook = self.hooks.pop(name, None)
        if hook is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            hook(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _child(argv: list[str]) -> None:
    """Run ``pod-console ARGV`` with the phase marks and the dataclass count on."""
    import dataclasses

    spawned = float(os.environ[SPAWN_ENV])
    out = os.open(os.environ[MARKS_ENV], os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def mark(what: str, **extra: Any) -> None:
        os.write(out, (json.dumps({"what": what, "t": time.monotonic() - spawned, **extra})
                       + "\n").encode())

    made = {"n": 0, "s": 0.0, "done": False}
    process_class = dataclasses._process_class  # type: ignore[attr-defined]

    def counted(cls: Any, *a: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return process_class(cls, *a, **kw)
        finally:
            if not made["done"]:
                made["n"] += 1
                made["s"] += time.perf_counter() - t

    dataclasses._process_class = counted  # type: ignore[attr-defined]

    def wrap(owner: Any, name: str, before: str | None, after: str | None) -> None:
        fn = getattr(owner, name)

        def traced(*a: Any, **kw: Any) -> Any:
            if before:
                mark(before)
            r = fn(*a, **kw)
            if after:
                mark(after)
            return r

        setattr(owner, name, traced)

    def first_poll(module: Any) -> None:
        run = module.FirstPoll._poll

        async def traced(self: Any) -> Any:
            mark("first poll begun")
            try:
                return await run(self)
            finally:
                mark("first poll ended")

        module.FirstPoll._poll = traced

    def app(module: Any) -> None:
        wrap(module, "make_app", None, "app built")
        changed = module.PodConsoleApp._session_changed
        mounted = module.PodConsoleApp.on_mount

        async def on_mount(self: Any) -> None:
            mark("app mounted")
            await mounted(self)

        def session_changed(self: Any, kind: str) -> None:
            changed(self, kind)
            if kind == "poll" and not made["done"]:
                made["done"] = True
                mark("first poll shown")
                self.call_after_refresh(lambda: mark(
                    "first frame drawn", dataclasses=made["n"], dataclass_s=made["s"],
                    cpu_s=time.process_time()))

        module.PodConsoleApp.on_mount = on_mount
        module.PodConsoleApp._session_changed = session_changed

    sys.meta_path.insert(0, _After(
        {"console.session.boot": lambda m: wrap(m, "plan", None, "boot plan read"),
         "console.session.first_poll": first_poll, "console.ui.app": app},
        {"textual": "Textual import begun"}, mark))
    sys.argv = ["pod-console", *argv]
    import runpy

    runpy.run_module("console.cli", run_name="__main__")


# -- the bench ---------------------------------------------------------------------------
def _imports(runs: int) -> list[tuple[str, float]]:
    """Each import group's own time (ms, median of ``runs`` fresh interpreters)."""
    code = ("import importlib, json, sys, time\n"
            "out = []\n"
            "for mods in json.loads(sys.argv[1]):\n"
            "    t = time.perf_counter()\n"
            "    for m in mods:\n"
            "        importlib.import_module(m)\n"
            "    out.append((time.perf_counter() - t) * 1000)\n"
            "print(json.dumps(out))\n")
    groups = json.dumps([list(mods) for _, mods in IMPORT_GROUPS])
    per: list[list[float]] = [[] for _ in IMPORT_GROUPS]
    for _ in range(runs):
        r = subprocess.run([sys.executable, "-c", code, groups], cwd=ROOT, check=True,
                           capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
        for i, ms in enumerate(json.loads(r.stdout)):
            per[i].append(ms)
    return [(label, statistics.median(ms)) for (label, _), ms in zip(IMPORT_GROUPS, per,
                                                                      strict=True)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=7)
    ap.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        _child(args.child)
        return 0
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    import tui_bench  # the bench's pty, demo config and first-number reading
    sys.setswitchinterval(0.0005)  # as the bench: its pty reader wakes as bytes come

    from console.demo.deployment import DEMO_KEY, DemoDeployment

    subprocess.run([sys.executable, "-m", "compileall", "-q", "console", "pod_agent"],
                   cwd=ROOT, check=True)
    demo = DemoDeployment(seed=7, startup_s=2.0)
    demo.start()
    rows: dict[str, list[float]] = {p: [] for p in (*PHASES, "first number on screen")}
    made: list[tuple[int, float, float]] = []
    try:
        time.sleep(6)  # slots up
        tmp = Path(tempfile.mkdtemp())
        cfg = tui_bench.write_config(demo, tmp)
        for i in range(args.starts):
            marks = tmp / f"marks-{i}.jsonl"
            env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor",
                       RUNPOD_API_KEY=DEMO_KEY, RUNPOD_API_BASE=demo.emulator.base_url,
                       PYTHONPATH=str(ROOT), POD_CONSOLE_PLOT_REFRESH_S="60",
                       **{MARKS_ENV: str(marks), SPAWN_ENV: repr(time.monotonic())})
            got = tui_bench.run_in_pty(
                [sys.executable, __file__, "--child", "watch", "--config", str(cfg),
                 "--refresh", "2"], env, tui_bench.first_number, 0)
            rows["first number on screen"].append(got["first_s"])
            for line in marks.read_text().splitlines():
                m = json.loads(line)
                if m["what"] in rows and len(rows[m["what"]]) <= i:
                    rows[m["what"]].append(m["t"])
                if "dataclasses" in m:
                    made.append((m["dataclasses"], m["dataclass_s"], m["cpu_s"]))
    finally:
        demo._stop_all()
    print(f"one start of `pod-console watch` on the demo, {args.starts} starts "
          "(medians, ms from the spawn):")
    for phase, ts in rows.items():
        print(f"  {phase:<24} {statistics.median(ts) * 1000:7.0f}" if ts
              else f"  {phase:<24}       –")
    if made:
        n = statistics.median(m[0] for m in made)
        s = statistics.median(m[1] for m in made)
        cpu = statistics.median(m[2] for m in made)
        print(f"CPU used by the first frame: {cpu * 1000:.0f} ms")
        print(f"dataclasses created before the first frame: {n:.0f}, {s * 1000:.0f} ms")
    print(f"imports, in a start's order (each group's own time, median of {args.starts} "
          "fresh interpreters):")
    for label, ms in _imports(args.starts):
        print(f"  {label:<32} {ms:6.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
