"""Regenerate SGLang's exposition with SGLang's own metrics code and compare it with the
committed fixture (``tests/fixtures/sglang-0.5.23``): the proof that the fixture is
SGLang's, not written by hand. Needs the SGLang venv (``bash tests/support/sglang_venv.sh``,
about 2.4 GB), so it is a check to run, not a test: the suite (and CI, which has no such
venv) would otherwise skip it. Exit 0: identical families and labels, and the same values
fed; 1: what differs.

    python3 tests/support/check_sglang_fixture.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from console.model.engines import SGLANG  # noqa: E402

SGL = REPO / "tests" / "fixtures" / "sglang-0.5.23"
VENV = Path(os.environ.get("POD_CONSOLE_SGLANG_VENV", "/opt/sglang-venv"))


def series(text: str) -> set[tuple[str, str]]:
    """The families the console reads, as (name, line) with prometheus_client's
    multiprocess ``pid`` label left out (it differs on every run)."""
    fams = SGLANG.families()
    out = set()
    for line in text.split("\n"):
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in fams:
            out.add((name, re.sub(r'pid="\d+",?', "", line)))
    return out


def main() -> int:
    if not (VENV / "bin" / "python").exists():
        print(f"no SGLang venv at {VENV}: bash tests/support/sglang_venv.sh", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([str(VENV / "bin" / "python"),
                        str(REPO / "tests" / "support" / "sglang_exposition.py"), tmp],
                       check=True, capture_output=True, timeout=600,
                       env={**os.environ, "HF_HUB_OFFLINE": "1"})
        bad = 0
        for f in sorted(SGL.glob("*.txt")):
            made, kept = series((Path(tmp) / f.name).read_text()), series(f.read_text())
            if made != kept:
                bad += 1
                print(f"{f.name}: {len(made - kept)} lines only in SGLang's, "
                      f"{len(kept - made)} only in the fixture", file=sys.stderr)
        if json.loads((Path(tmp) / "fed.json").read_text()) != \
                json.loads((SGL / "fed.json").read_text()):
            bad += 1
            print("fed.json differs", file=sys.stderr)
    print("the fixture is what SGLang's metrics code makes" if not bad else f"{bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
