"""Shared test configuration: paths, the tiers and markers, isolation under xdist, and the
wall time of each tier.

Tiers follow the architecture (a test's folder names its tier; ``pytest -m screen`` runs
one):

* ``unit``         tests/unit: the model, the sources and the operations on fixed inputs;
* ``screen``       tests/screens (and the TUI modules that start no process): every screen
                   and dialog from a fixed ``ConsoleState``;
* ``session``      tests/session: the session layer (states built from polls) without Textual;
* ``integration``  tests/integration: real servers (vLLM, Prometheus, sshd, LiteLLM);
* ``e2e``          tests/tui: the demo deployment, a pty under tmux, the web wall in Chromium.

Markers name each real part a test talks to (``vllm``, ``prometheus``, ``sshd``,
``litellm``, ``chromium``, ``tmux``) and ``realtime`` (its length is real time passing:
a server starting, a clock running). ``REAL_PARTS`` below says it for modules that start
a part themselves; a test that uses the session's fixtures (``real_vllm``…) gets its
markers from them.

The suite runs on four workers (``-n 4 --dist loadgroup``, set below: ``WORKERS``). A module whose
tests share one expensive world (a module-scoped fixture) runs on one worker; every test
that reads the session's real vLLM runs on one worker (it is started once), and the module
whose vLLM the agent starts runs on another.

The workers take the groups longest first (``GROUP_SECONDS``: a long module started last
would be the run's tail while the other workers stand idle); the table is refreshed with
``POD_CONSOLE_GROUP_SECONDS=tests/group_seconds.json python3 -m pytest -q``.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path

import pytest

# a snapshot mismatch prints the text of both pictures (a CI log has no HTML report)
pytest_plugins = ["tests.support.snapshot_text"]

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
PROFILES = REPO / "profiles"

TIERS = {"unit": "unit", "screens": "screen", "session": "session",
         "integration": "integration", "tui": "e2e"}
"""Folder under tests/ → tier."""
TIER_ORDER = ("unit", "screen", "session", "integration", "e2e")
PARTS = ("vllm", "prometheus", "sshd", "litellm", "chromium", "tmux")

REAL_PARTS: dict[str, tuple[str, ...]] = {
    "integration/test_agent_over_ssh.py": ("vllm", "sshd", "realtime"),
    "integration/test_exact_paths.py": ("prometheus", "realtime"),
    "integration/test_federation.py": ("prometheus", "realtime"),
    "integration/test_fleet.py": ("sshd",),
    "integration/test_gateway_litellm.py": ("litellm", "prometheus", "realtime"),
    "integration/test_gpu_exporter_prometheus.py": ("prometheus", "realtime"),
    "integration/test_ledger_across_processes.py": ("sshd", "realtime"),
    "integration/test_prometheus_agreement.py": ("vllm", "prometheus", "realtime"),
    "integration/test_provisioning.py": ("sshd",),
    "integration/test_smoke_gateway.py": ("vllm", "prometheus", "litellm"),
    "integration/test_status_framing.py": (),
    "integration/test_stall_vllm.py": ("vllm", "prometheus", "realtime"),
    "integration/test_stop_policy_over_ssh.py": ("sshd", "realtime"),
    "integration/test_unhappy_provisioning.py": ("sshd",),
    "integration/test_vllm_collector.py": ("vllm",),
    "tui/test_pty.py": ("tmux",),
    "tui/test_web_wall.py": ("chromium",),
    "tui/test_stop_demo.py": ("realtime",),
}
"""Module (under tests/) → the real parts it starts itself, and ``realtime``."""
AGENT_VLLM = {"integration/test_agent_over_ssh.py"}
"""Modules whose vLLM the real agent starts (not the session's shared server). The stop
policy's module runs its agent on the demo's simulated vLLM: its own group, as any module."""
GROUP_SECONDS_FILE = Path(__file__).resolve().parent / "group_seconds.json"
"""Seconds each xdist group spent in tests on the last refresh of the table (module
docstring): the order the workers take them in. A group not in it counts as
``NEW_GROUP_S`` (integration and e2e: each starts something real) or nothing (the rest,
short tests that fill in at the end)."""
NEW_GROUP_S = 20.0
MIN_TABLED_S = 3.0
"""Shorter groups are left out of the table: their order does not change the run's end."""
FIXTURE_PARTS = {"real_vllm": ("vllm",), "real_prometheus": ("prometheus", "vllm"),
                 "real_sshd": ("sshd",), "world": ("sshd",), "slow_world": ("sshd",)}


def _isolate() -> None:
    """Each worker (and each concurrent run of the suite) has its own config and state
    folders: nothing a test writes by default lands in the user's, or in another worker's.
    The demo takes free ports, never the profiles' own (two demos at once would both find
    8881 free and then collide)."""
    base = Path(tempfile.mkdtemp(prefix="pod-console-tests-"))
    _made.append(base)
    os.environ["XDG_STATE_HOME"] = str(base / "state")
    os.environ["XDG_CONFIG_HOME"] = str(base / "config")
    os.environ.pop("POD_CONSOLE_STATE_DIR", None)
    os.environ.pop("POD_CONSOLE_CONFIG", None)
    # each worker's demos take ports from a range of their own, below the kernel's
    # ephemeral ports (32768 up), where every other test's servers bind port 0: a demo
    # slot's port is bound seconds after it was found free, and meanwhile another server
    # could be handed it (a loaded CI run saw a slot's /metrics answer 404)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    low = DEMO_PORTS_FROM + DEMO_PORTS_EACH * (int(worker) if worker.isdigit() else 0)
    os.environ["POD_CONSOLE_DEMO_PORTS"] = f"{low}-{low + DEMO_PORTS_EACH - 1}"


DEMO_PORTS_FROM, DEMO_PORTS_EACH = 20000, 1500
"""Each worker's demo ports (``_isolate``): eight workers' ranges end below 32768."""
WORKERS = 4
"""The machine has two cores (CI's too), and four workers: much of the suite waits on real
time (servers starting, demo clocks, polls), which leaves the cores idle under two. Measured
on one 2-core machine, the whole suite: 1,436 s at ``-n 2``, 1,214 s at ``-n 3`` (an earlier
suite); 1,009 s at ``-n 3`` and 837 s at ``-n 4`` (this one, 1,751 tests, CPU 1,058 s: the
cores about two-thirds busy, the workers' time spent in tests 98 % of the run)."""


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``-n WORKERS --dist loadgroup`` unless the command line says how many workers (``-n 0``:
    one process). Set here, not in ``addopts``: ``-p no:xdist`` must still work."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    if hasattr(config, "workerinput"):
        # A worker parses the original command line, where --dist may not be: without the
        # controller's word it would not add the group to each test's id, and loadgroup
        # would then scatter a module's tests (and the vLLM ones) over both workers.
        if config.workerinput.get("pod_console_loadgroup"):  # type: ignore[attr-defined]
            config.option.loadgroup = True
        return
    opt = config.option
    if getattr(opt, "numprocesses", None) is None and getattr(opt, "dist", "no") == "no":
        opt.numprocesses = WORKERS
        opt.dist = "loadgroup"
    if getattr(opt, "dist", "no") == "loadgroup":
        # xdist would sort the groups by their number of tests: the items' order (longest
        # group first, pytest_collection_modifyitems) is the one it must keep
        opt.loadscopereorder = False


def pytest_configure_node(node) -> None:  # xdist's hook, on the controller
    node.workerinput["pod_console_loadgroup"] = node.config.getvalue("dist") == "loadgroup"


_made: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    _isolate()
    for tier in TIER_ORDER:
        config.addinivalue_line("markers", f"{tier}: the {tier} tier (set from the folder)")


def pytest_unconfigure(config: pytest.Config) -> None:
    for d in _made:
        shutil.rmtree(d, ignore_errors=True)


def _rel(item: pytest.Item) -> str:
    return Path(str(item.fspath)).resolve().relative_to(Path(__file__).resolve().parent) \
        .as_posix()


def tier_of(rel: str) -> str:
    return TIERS.get(rel.partition("/")[0], "unit")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        rel = _rel(item)
        tier = tier_of(rel)
        marks = {tier, *REAL_PARTS.get(rel, ())}
        for fixture in getattr(item, "fixturenames", ()):
            marks.update(FIXTURE_PARTS.get(fixture, ()))
        if rel.startswith("tui/") and tier == "e2e":
            marks.add("realtime")  # the demo's processes start and poll in real time
        for m in sorted(marks - {m.name for m in item.iter_markers()}):
            item.add_marker(m)
        names = {m.name for m in item.iter_markers()}
        if "vllm" in names:
            # The session's shared vLLM is started once, on the worker that runs every test
            # that reads it. The agent's module starts its own through the agent: a group
            # of its own, so the two chains of vLLM starts overlap instead of adding up
            # (together they were the suite's critical path, ~1,000 s of ~1,150).
            item.add_marker(pytest.mark.xdist_group(
                "vllm-agent" if rel in AGENT_VLLM else "vllm"))
        elif tier in ("integration", "e2e"):
            # a module's tests share its world (module-scoped): one worker builds it once
            item.add_marker(pytest.mark.xdist_group(rel))
    weights = _group_seconds()
    # longest first (a stable sort: within a group, and among the rest, the file's order)
    items.sort(key=lambda item: -weights.get(group_of(item), _new_group_s(item)))


def group_of(item: pytest.Item) -> str:
    """The xdist group an item runs in (its own node id when it has none)."""
    mark = item.get_closest_marker("xdist_group")
    return str(mark.args[0]) if mark is not None and mark.args else item.nodeid


def _new_group_s(item: pytest.Item) -> float:
    return NEW_GROUP_S if tier_of(_rel(item)) in ("integration", "e2e") else 0.0


def _group_seconds() -> dict[str, float]:
    try:
        table = json.loads(GROUP_SECONDS_FILE.read_text())
    except (OSError, ValueError):
        return {}  # no table: the file order, as xdist would take it
    return {str(k): float(v) for k, v in table.items() if isinstance(v, int | float)}


# -- the wall time of each tier (.ci/run shows it after --durations) -------------------------

_spans: dict[str, list[float]] = defaultdict(lambda: [float("inf"), 0.0, 0.0, 0.0])
"""tier → [first start, last stop, seconds spent in it (all workers), tests]."""


def _cpu_s() -> float:
    """CPU seconds of this process and of its children it has reaped (the servers a test
    started and stopped, its subprocesses): a test's own cost, whatever else runs beside."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Generator:
    """Each phase's report carries the CPU spent since the last phase ended (xdist carries
    user_properties to the controller). A session fixture's server is counted where it is
    stopped and reaped: the last teardown of the worker that started it."""
    now = _cpu_s()
    outcome = yield
    before = item.config.stash.get(_CPU_AT, now)
    item.config.stash[_CPU_AT] = now
    outcome.get_result().user_properties.append(("cpu_s", now - before))


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_CPU_AT] = _cpu_s()  # collection is not a test's


_CPU_AT = pytest.StashKey[float]()
_cpu: dict[str, float] = defaultdict(float)
"""tier → CPU seconds its tests cost (their processes and their children)."""
_cpu_by_test: dict[str, float] = defaultdict(float)
_group_s: dict[str, float] = defaultdict(float)
"""xdist group → seconds its tests took (all phases): the table's refresh."""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller adds the workers' reports up
    cpu = sum(v for k, v in report.user_properties if k == "cpu_s")
    _cpu[tier_of(report.nodeid.split("::", 1)[0].removeprefix("tests/"))] += cpu
    _cpu_by_test[report.nodeid.split("@", 1)[0]] += cpu
    rel = report.nodeid.split("::", 1)[0].removeprefix("tests/")
    span = _spans[tier_of(rel)]
    start, stop = getattr(report, "start", None), getattr(report, "stop", None)
    if start is not None and stop is not None:
        span[0], span[1] = min(span[0], start), max(span[1], stop)
    span[2] += report.duration
    # xdist names the group after the id; a test in none is a group of its own
    _group_s[report.nodeid.rsplit("@", 1)[1] if "@" in report.nodeid else report.nodeid] \
        += report.duration
    if report.when == "call":
        span[3] += 1


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") or not _spans:
        return
    tr = terminalreporter
    tr.write_sep("=", "wall time of each tier")
    t0 = min(s[0] for s in _spans.values())
    for tier in (*TIER_ORDER, *sorted(set(_spans) - set(TIER_ORDER))):
        if tier not in _spans:
            continue
        first, last, busy, n = _spans[tier]
        tr.write_line(f"{tier:<12} {last - first:7.1f} s wall (from +{first - t0:.0f} s to "
                      f"+{last - t0:.0f} s)  {busy:7.1f} s in tests  {_cpu[tier]:7.1f} s CPU  "
                      f"{int(n)} tests")
    tr.write_line(f"{'all':<12} {max(s[1] for s in _spans.values()) - t0:7.1f} s wall  "
                  f"{sum(_cpu.values()):7.1f} s CPU  (clock {time.strftime('%H:%M:%S')})")
    table = os.environ.get("POD_CONSOLE_GROUP_SECONDS")
    if table and _group_s and exitstatus == 0:  # a failed run's times are not the suite's
        Path(table).write_text(json.dumps(
            {g: round(s) for g, s in sorted(_group_s.items(), key=lambda kv: -kv[1])
             if s >= MIN_TABLED_S}, indent=0) + "\n")
        tr.write_line(f"the groups' seconds written to {table}")
    tr.write_sep("=", "most CPU (the test's process and the children it reaped)")
    for nodeid, cpu in sorted(_cpu_by_test.items(), key=lambda kv: -kv[1])[:15]:
        tr.write_line(f"{cpu:7.1f} s  {nodeid}")
