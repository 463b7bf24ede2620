"""One composition root (issue 46, item 2): the provisioner, the SSH transport to a pod's
agent and the gateway's collector are built in ``console/session/deployment.py`` and
nowhere else, so every caller gets them wired from the same settings (``f`` once built
its own transport with the user ``root`` while ``up`` read ``pod.ssh_user``; ``down``
built a provisioner of its own; the gateway's collector was wired in three places)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

ROOT = Path("console/session/deployment.py")
BUILT_THERE = {"Provisioner", "GatewayCollector", "AgentTransport"}
"""(An ``AgentEndpoint`` without a transport carries no user anywhere: the demo's local
process names one for its pod id.)"""


def constructor_calls(tree: ast.AST) -> list[tuple[str, int]]:
    """Every call of one of ``BUILT_THERE`` (by name or as ``module.Name``)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(
                f, ast.Attribute) else None
            if name in BUILT_THERE:
                out.append((name, node.lineno))
    return out


def test_the_parts_are_built_in_the_composition_root_only() -> None:
    outside = []
    for path in sorted((REPO / "console").rglob("*.py")):
        rel = path.relative_to(REPO)
        if rel == ROOT:
            continue
        outside += [f"{rel}:{line} {name}(…)"
                    for name, line in constructor_calls(ast.parse(path.read_text()))]
    assert outside == [], "build these in deployment.py (the composition root):\n" + \
        "\n".join(outside)
    built = {name for name, _ in constructor_calls(ast.parse((REPO / ROOT).read_text()))}
    assert built == BUILT_THERE  # the root does build each (the check looks at real names)


def test_the_check_finds_a_constructor_call() -> None:
    """The walk above can fail: a call by name or through its module is found."""
    tree = ast.parse("from x import Provisioner\nimport y\n"
                     "def f():\n    return Provisioner(1), y.GatewayCollector(2)\n")
    assert constructor_calls(tree) == [("Provisioner", 4), ("GatewayCollector", 4)]


def test_the_context_is_assembled_in_a_page() -> None:
    # make_context was 129 lines of wiring; what it builds is the root's now
    tree = ast.parse((REPO / "console/session/context.py").read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
              and n.name == "make_context")
    assert fn.end_lineno is not None and fn.end_lineno - fn.lineno + 1 <= 60


def test_runpod_id_is_only_an_old_name_read_with_the_config() -> None:
    # the pod's id is `machine_id` everywhere; `runpod_id` is accepted where a config is
    # read (the settings' alias and the boot's fast read of the file), nowhere else
    readers = {Path("console/config/settings.py"), Path("console/session/boot.py")}
    used = sorted(str(p.relative_to(REPO)) for p in (REPO / "console").rglob("*.py")
                  if "runpod_id" in p.read_text() and p.relative_to(REPO) not in readers)
    assert used == []
