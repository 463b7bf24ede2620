"""What the screen prints for numbers and for a newcomer: formats that never mislead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from console.model import fmt
from tests.conftest import REPO


def test_seconds_move_up_a_unit_when_rounding_reaches_it() -> None:
    assert fmt.secs(0.9996) == "1.0s"  # was "1000ms"
    assert fmt.secs(0.9949) == "990ms"
    assert fmt.secs(9.96) == "10s"  # was "10.0s"
    assert fmt.secs(0.00996) == "10ms"
    assert fmt.secs(0.0042) == "4.2ms"
    assert fmt.secs(None) == fmt.DASH


def test_watchdog_stop_reads_as_a_wall_time_with_a_countdown() -> None:
    import datetime as dt

    when = dt.datetime(2026, 11, 30, 18, 0, tzinfo=dt.timezone(dt.timedelta(hours=9)))
    now = when.timestamp() - (2 * 3600 + 10 * 60)
    # the viewer's own hour (this test's zone), the pod's beside it where it differs
    local = when.astimezone().strftime("%a %H:%M")
    pod = "" if when.astimezone().utcoffset() == when.utcoffset() else \
        " (18:00 +09:00 on the pod)"
    assert fmt.stop_time(when.isoformat(), now) == f"{local}{pod}, in 2h10m"
    # just past its time a stop is due, not late (issue 30, finding 6)
    assert fmt.stop_time(when.isoformat(), when.timestamp() + 5).endswith("due now")
    assert fmt.stop_time(when.isoformat(), when.timestamp() + 200).endswith("overdue")
    assert fmt.stop_time("not a time", now) == "not a time"


def test_a_newcomer_without_config_is_told_where_it_goes_and_about_the_demo(
        tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POD_CONSOLE_")}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "cfg"),
               PYTHONPATH=str(REPO))
    for args in (["status", "--json"], ["watch"]):
        r = subprocess.run([sys.executable, "-m", "console.cli", *args], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        assert "No such file" not in r.stderr
        assert str(tmp_path / "cfg" / "pod-console" / "config.yaml") in r.stderr, r.stderr
        assert "pod-console demo" in r.stderr and "Traceback" not in r.stderr


def test_the_docs_config_example_is_a_valid_config(tmp_path: Path) -> None:
    from console.config.settings import load_settings

    text = (REPO / "docs" / "configuration.md").read_text()
    block = text.split("\n## The console\n", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "profiles").mkdir()
    cfg = tmp_path / "config.yaml"
    cfg.write_text(block.replace("~/pod-console/profiles", str(tmp_path / "profiles"))
                   .replace("~/.local/state/pod-console", str(tmp_path / "state")))
    s = load_settings(cfg)
    assert s.alerts.down_for_s == 6 and s.thresholds_for("Q27").acceptance_baseline == 0.52
