"""The layers hold: import-linter's contracts (``pyproject.toml``), and headless commands
that really run load no Textual at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROFILES, REPO


def test_import_contracts_are_kept() -> None:
    # through the interpreter, not a console script that PATH may not reach
    code = ("import sys\nfrom importlinter.cli import lint_imports\n"
            "sys.exit(lint_imports(no_cache=True, no_logo=True))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


RUN = """
import json, sys
from console.cli import main
try:
    rc = main(sys.argv[1:])
except SystemExit as exc:
    rc = exc.code
heavy = sorted(m for m in sys.modules if m.split(".")[0] in
               ("textual",))
print("LOADED " + json.dumps({"rc": rc, "heavy": heavy}), file=sys.stderr)
"""


def _run(args: list[str], env: dict[str, str]) -> dict:
    r = subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True,
                       timeout=180, cwd=REPO, env=env)
    line = [x for x in r.stderr.splitlines() if x.startswith("LOADED ")]
    assert line, r.stdout[-2000:] + r.stderr[-2000:]
    return json.loads(line[-1][len("LOADED "):])


@pytest.mark.parametrize("cmd", ["status", "metrics", "catalog", "rebalance", "up", "down",
                                 "doctor"])
def test_headless_commands_load_no_textual(cmd: str, tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {PROFILES}\nstate_dir: {tmp_path / 'state'}\n"
                   "pod:\n  runpod_id: nopod\n  host: 127.0.0.1\n")
    # nothing listens on port 9; retrying it (~30 s of backoff) is not what is tested here
    # (tests/unit/test_runpod_retries.py is)
    env = dict(os.environ, PYTHONPATH=str(REPO), RUNPOD_API_KEY="k",
               RUNPOD_API_BASE="http://127.0.0.1:9/v2", RUNPOD_API_RETRIES="0")
    env.pop("POD_CONSOLE_STATE_DIR", None)
    args = {
        "status": ["status", "--json", "--config", str(cfg), "--sample", "0.2"],
        "metrics": ["metrics", str(REPO / "tests" / "fixtures" / "vllm-0.32.0-cpu" / "plain"
                                   / "metrics-after-load.txt"), "--json"],
        "catalog": ["catalog", "--json"],
        "rebalance": ["rebalance", "--plan", "--json", "--config", str(cfg)],
        "up": ["up", "--config", str(cfg), "--rounds", "1", "--no-resume"],
        "down": ["down", "--config", str(cfg)],
        "doctor": ["doctor", "--json", "--config", str(cfg)],
    }[cmd]
    out = _run(args, env)
    assert out["heavy"] == [], out
    if cmd in ("up", "down"):
        assert out["rc"] == 3  # RunPod unreachable: fatal, reached through the whole path
