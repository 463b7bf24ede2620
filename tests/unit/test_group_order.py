"""The workers take the longest groups first (tests/conftest.py, ``GROUP_SECONDS_FILE``):
the collected order puts a group the table says is long before a shorter one, whatever
order the files were named in, and the short single tests last."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import GROUP_SECONDS_FILE, REPO

LONG, SHORTER = "integration/test_alertmanager_delivery.py", "tui/test_demo_quit.py"
QUICK = "unit/test_slo.py"


def test_the_longest_group_is_collected_first() -> None:
    table = json.loads(GROUP_SECONDS_FILE.read_text())
    assert table[LONG] > table[SHORTER]  # the premise, from the committed table
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0",
         "-p", "no:cacheprovider", f"tests/{QUICK}", f"tests/{SHORTER}", f"tests/{LONG}"],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    files = [line.split("::", 1)[0].removeprefix("tests/") for line in out.stdout.splitlines()
             if "::" in line]
    order = list(dict.fromkeys(files))
    assert order == [LONG, SHORTER, QUICK], order
