"""What provisioning uploads to a pod: the whole agent, its subpackages included. A module
left out of the tarball is an ImportError on the pod, seen only as "check-host gave no
report" (the engines package once was)."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from pathlib import Path

from console.operations.provision import agent_tarball
from pod_agent.profiles import load_profiles

REPO = Path(__file__).resolve().parents[2]


def test_the_tarball_holds_every_agent_module_and_the_agent_runs_from_it(tmp_path: Path
                                                                         ) -> None:
    profile = load_profiles(REPO / "profiles")[0]
    data = agent_tarball(profile)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        names = set(tar.getnames())
        tar.extractall(tmp_path, filter="data")
    agent = REPO / "pod_agent"
    want = {f"pod_agent/{p.relative_to(agent).as_posix()}" for p in agent.rglob("*.py")
            if "__pycache__" not in p.parts}
    assert want <= names, sorted(want - names)
    assert any(n.startswith("pod_agent/engines/") for n in names)
    assert not any("__pycache__" in n for n in names)
    # the pod's view: nothing but what was uploaded (no checkout on the path)
    out = subprocess.run([sys.executable, "-c", "import pod_agent.cli, pod_agent.engines"],
                         cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
