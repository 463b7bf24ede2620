"""No import circle in ``console`` or ``pod_agent``: every import counts, at the top, inside a
function or under ``TYPE_CHECKING``, because a circle hidden in a function is still two
modules that cannot be understood (or moved) one without the other."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

ROOTS = ("console", "pod_agent")

# None: the app's collaborators name what they need of it as protocols
# (``console/ui/host.py``), never the app.
KNOWN: set[frozenset[str]] = set()


def _modules() -> dict[str, tuple[Path, bool]]:
    mods: dict[str, tuple[Path, bool]] = {}
    for root in ROOTS:
        for path in (REPO / root).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            mods[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return mods


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (``from a import b`` names the submodule
    ``a.b`` when there is one, else the module ``a``; relative imports resolved)."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in mods.items():
        package = name if is_pkg else name.rpartition(".")[0]
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in mods)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    if f"{source}.{alias.name}" in mods:
                        out.add(f"{source}.{alias.name}")
                    elif source in mods:
                        out.add(source)
        out.discard(name)
        graph[name] = out
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_the_checker_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [frozenset({"a", "b", "c"})]


def test_the_graph_counts_imports_in_functions_and_type_checking() -> None:
    graph = import_graph()
    # `from console.session.judging import judge_once` inside a method of fleet.py
    assert "console.session.judging" in graph["console.session.fleet"]
    # `from console.session.fleet import FleetCollector` under TYPE_CHECKING
    assert "console.session.fleet" in graph["console.session.session"]
    # `from . import clock, paths, ...`: submodules of the package, by name
    assert {"pod_agent.audit", "pod_agent.paths"} <= graph["pod_agent.supervisor"]
    # `from .. import MODE` (not a module): the package one level up
    assert "console.demo.faketorch.torch" in graph["console.demo.faketorch.torch.distributed"]


def test_no_import_circle() -> None:
    graph = import_graph()
    report = []
    for component in circles(graph):
        if component in KNOWN:
            continue
        edges = [f"  {a} -> {b}" for a in sorted(component)
                 for b in sorted(graph[a] & component)]
        report.append(f"{len(component)} modules:\n" + "\n".join(edges))
    assert not report, "import circles:\n" + "\n".join(report)
