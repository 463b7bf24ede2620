"""A test's folder names its tier (tests/conftest.py ``TIERS``), with no list of exceptions:
a module in tests/screens starts no process (it draws a screen, or runs the real app on
static sources, in the test's own process), and a module in tests/tui (e2e) starts one
(the demo's agent and servers, tmux, Chromium, a child Python). Read from the source, so a
test that moves in or out of a process world has to move folder too."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

TESTS = REPO / "tests"

STARTERS_MODULES = {"subprocess", "multiprocessing", "console.demo.deployment",
                    "tests.support.procs", "tests.support.browser", "tests.support.sshd",
                    "tests.support.vllm_server", "tests.support.prometheus_server",
                    "tests.support.alertmanager_server", "tests.support.litellm_proxy",
                    "tests.support.plain_venv", "tests.support.load",
                    "console.commands.tui_cmd.build_demo",  # a DemoDeployment of its own
                    "tools.palette_stress.stress"}  # the demo and busy loops beside it
"""Importing one of these is how a test module reaches a process of its own."""
STARTER_FIXTURES = {"demo", "real_vllm", "real_prometheus", "real_sshd", "world", "slow_world"}
"""Fixtures (tests/conftest.py, tests/tui/conftest.py) that start processes."""
STARTER_CALLS = {"create_subprocess_exec", "create_subprocess_shell", "Popen", "tmux"}


def starts_processes(path: Path) -> list[str]:
    """What in the module starts (or asks a fixture for) a process: empty when nothing."""
    tree = ast.parse(path.read_text(), str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name in STARTERS_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            full = {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            found += sorted(full & STARTERS_MODULES)
            if node.module == "tests.tui.conftest":
                found += [a.name for a in node.names if a.name in {"Requests", "wait_slots_up"}]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found += [a.arg for a in node.args.args if a.arg in STARTER_FIXTURES]
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in STARTER_CALLS:
                found.append(name)
    return found


def _modules(folder: str) -> list[Path]:
    return sorted((TESTS / folder).glob("test_*.py"))


def test_the_screen_tier_starts_no_process() -> None:
    starting = {p.name: starts_processes(p) for p in _modules("screens")}
    assert {k: v for k, v in starting.items() if v} == {}, \
        "these start processes: their tier is e2e (tests/tui) or integration"


def test_the_e2e_tier_is_only_modules_that_start_processes() -> None:
    idle = [p.name for p in _modules("tui") if not starts_processes(p)]
    assert idle == [], "these start no process: their tier is screen (tests/screens)"


def test_the_check_sees_a_process(tmp_path: Path) -> None:
    # the check must be able to fail: each way of starting a process is seen
    for body in ("import subprocess\n", "from tests.support import browser\n",
                 "async def test_x(demo):\n    pass\n",
                 "import asyncio\nasyncio.create_subprocess_exec('x')\n",
                 "from console.demo.deployment import DemoDeployment\n"):
        mod = tmp_path / "test_m.py"
        mod.write_text(body)
        assert starts_processes(mod), body
    (tmp_path / "test_m.py").write_text("from tests.support.static_app import build\n")
    assert starts_processes(tmp_path / "test_m.py") == []
