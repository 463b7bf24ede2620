"""The suite under load: pytest with ``N`` busy loops beside it, its wall time and result.

    python3 -m tests.support.load                 # the whole suite, two busy loops
    python3 -m tests.support.load -n 4 --tier e2e # one tier (a marker: unit, screen, ...)
    python3 -m tests.support.load tests/tui/test_gpu_demo.py -- -n 0 -x

The suite must hold with the machine twice as busy (the charter; issue 48): two busy
loops on two cores is that. Each loop is a ``yes`` into /dev/null, started here and
stopped here by its pid when pytest ends, however it ends: a failure, Ctrl-C, SIGTERM or
SIGHUP; and a loop dies with this process even when it is killed outright (the kernel's
parent-death signal), so none outlives a run.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

REPO = Path(__file__).resolve().parents[2]
TIERS = ("unit", "screen", "session", "integration", "e2e")
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the process that started it dies (Linux;
    elsewhere the ``finally`` below is all there is)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@contextlib.contextmanager
def busy_loops(n: int) -> Iterator[list[int]]:
    """``n`` busy loops while the block runs; their pids. Each is stopped by its pid."""
    loops: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(n):
            loops.append(subprocess.Popen(["yes"], stdout=subprocess.DEVNULL,
                                          stdin=subprocess.DEVNULL,
                                          preexec_fn=_die_with_parent))
        yield [p.pid for p in loops]
    finally:
        for p in loops:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
        for p in loops:
            p.wait()


def _raise_interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def pytest_args(tier: str | None, paths: Sequence[str], extra: Sequence[str]) -> list[str]:
    args = [sys.executable, "-m", "pytest", "-q"]
    if tier is not None:
        args += ["-m", tier]
    return args + list(paths) + list(extra)


def main(argv: Sequence[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in raw:  # what follows goes to pytest as it is
        extra = raw[raw.index("--") + 1:]
        raw = raw[:raw.index("--")]
    ap = argparse.ArgumentParser(prog="python3 -m tests.support.load",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--loops", type=int, default=2,
                    help="busy loops beside the run (default 2: twice as busy on 2 cores)")
    ap.add_argument("--tier", choices=TIERS, help="one tier only (its marker)")
    ap.add_argument("paths", nargs="*", help="test files or node ids (default: the suite)")
    opts = ap.parse_args(raw)
    if opts.loops < 0:
        ap.error("--loops must be 0 or more")
    cmd = pytest_args(opts.tier, opts.paths, extra)
    what = " ".join(cmd[4:]) or "the suite"
    # SIGTERM and SIGHUP end the run as Ctrl-C does: through the finally that stops loops
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_interrupt)
    started = time.monotonic()
    rc: int | str = "interrupted"
    proc: subprocess.Popen[bytes] | None = None
    try:
        with busy_loops(opts.loops) as pids:
            print(f"load: {opts.loops} busy loop(s) (pids {pids or '-'}) beside "
                  f"pytest {what}", flush=True)
            proc = subprocess.Popen(cmd, cwd=REPO)
            rc = proc.wait()
    except KeyboardInterrupt:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # pytest stops its workers and servers
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finally:
        took = time.monotonic() - started
        result = "passed" if rc == 0 else ("interrupted" if rc == "interrupted"
                                           else f"failed (rc {rc})")
        print(f"load: {what}: {result} in {took:.0f} s wall ({took / 60:.1f} min) with "
              f"{opts.loops} busy loop(s) on {os.cpu_count()} core(s)", flush=True)
    return rc if isinstance(rc, int) else 130


if __name__ == "__main__":
    sys.exit(main())
