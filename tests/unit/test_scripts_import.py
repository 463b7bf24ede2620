"""The committed benchmark and capture scripts still import: a module they name that moved
(the layout by layer moved most of them) fails here, not on the day someone runs them."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import REPO

ON_THE_GPU_MACHINE = {"pynvml"}
"""Libraries only the device machine has (``tools/nvml_capture.py`` runs there): a script
that needs one is compiled here, and its own imports of the console are still checked."""

SCRIPTS = sorted([*(REPO / "bench").glob("*.py"), *(REPO / "tools").glob("*.py"),
                  *(REPO / "screenshots").glob("*.py")])


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_script_imports(path) -> None:
    assert "__name__ == \"__main__\"" in path.read_text(), "runs only as a script"
    spec = importlib.util.spec_from_file_location(f"_script_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)  # definitions only: main() waits for __main__
    except ModuleNotFoundError as e:
        if e.name not in ON_THE_GPU_MACHINE:
            raise
        compile(path.read_text(), str(path), "exec")
        for line in path.read_text().splitlines():
            if line.startswith(("from console", "import console", "from pod_agent")):
                importlib.import_module(line.split()[1])
    finally:
        sys.modules.pop(spec.name, None)
