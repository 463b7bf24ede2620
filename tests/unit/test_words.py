"""The console's words (issue 47, #8): counts agree with their nouns, under a minute is
seconds, an alert's history says how long it lasted, times read in the viewer's zone."""

from __future__ import annotations

import os
import time

import pytest

from console.model import fmt
from console.model.alerts import Alert, AlertBook
from console.model.conditions import Condition
from console.ui.widgets.panels import active_line, history_line


@pytest.fixture
def tokyo_viewer():
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Tokyo"
    time.tzset()
    yield
    if before is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = before
    time.tzset()


def test_one_attempt_two_attempts() -> None:
    assert fmt.count(1, "attempt") == "1 attempt"
    assert fmt.count(3, "attempt") == "3 attempts"
    assert fmt.count(0, "copy", "copies") == "0 copies"


def test_under_a_minute_is_seconds() -> None:
    assert fmt.elapsed(0) == "0 s"
    assert fmt.elapsed(54.9) == "54 s"
    assert fmt.elapsed(60) == "1m"
    assert fmt.elapsed(3 * 3600 + 300) == "3h05m"


def test_an_alert_under_a_minute_old_says_its_seconds() -> None:
    a = Alert("k", "warn", "Q27 TTFT p95 2.05s > 2s", "", since=1000.0, fired_at=1000.0)
    assert "(41 s)" in active_line(a, 1041.0).plain
    assert "(0m)" not in active_line(a, 1041.0).plain


def test_the_history_says_how_long_an_alert_lasted() -> None:
    book = AlertBook()
    cond = Condition("k", "warn", "Q27 down", "", for_s=0, hold_s=0)
    book.update([cond], 100.0)
    book.update([cond], 110.0)
    book.update([], 154.0)
    resolved = book.history[-1]
    assert resolved.kind == "resolved" and resolved.lasted_s == pytest.approx(54.0)
    assert "lasted 54 s" in history_line(resolved).plain


def test_times_in_the_viewers_zone_with_the_pods_only_when_it_differs(tokyo_viewer) -> None:
    # 18:00 in Tokyo is 09:00 UTC: a Tokyo viewer sees their own hour alone
    assert fmt.when_text("2026-12-04T18:00:00+09:00") == "Fri 18:00"
    # a pod in UTC, the same viewer: their hour first, the pod's beside it
    assert fmt.when_text("2026-12-04T09:00:00+00:00") == "Fri 18:00 (09:00 +00:00 on the pod)"
    now = time.mktime((2026, 12, 4, 16, 0, 0, 0, 0, -1))
    assert fmt.stop_time("2026-12-04T09:00:00+00:00", now) == (
        "Fri 18:00 (09:00 +00:00 on the pod), in 2h00m")
    # never the raw instant, never a failure on a value that is not one
    assert fmt.when_text("soon") == "soon" and fmt.when_text(None) == fmt.DASH


def test_down_help_lists_its_exit_statuses() -> None:
    import subprocess
    import sys

    from tests.conftest import REPO

    out = subprocess.run([sys.executable, "-m", "console.cli", "down", "--help"],
                         capture_output=True, text=True, timeout=60, cwd=REPO,
                         env=dict(os.environ, PYTHONPATH=str(REPO))).stdout
    lines = [ln.split() for ln in out.splitlines()]
    codes = {words[0] for words in lines if words and words[0].isdigit()}
    assert {"3", "7"} <= codes, out
    assert "MAY STILL BE BILLING" in out


def test_demo_and_watch_flags_say_what_they_do() -> None:
    import subprocess
    import sys

    from tests.conftest import REPO

    def help_of(*cmd: str) -> str:
        return subprocess.run([sys.executable, "-m", "console.cli", *cmd, "--help"],
                              capture_output=True, text=True, timeout=60, cwd=REPO,
                              env=dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200")).stdout

    demo = {ln.split()[0]: ln for ln in help_of("demo").splitlines()
            if ln.strip().startswith("--")}
    for flag in ("--refresh", "--rotate", "--seed", "--attach"):
        line = next(v for k, v in demo.items() if v.strip().startswith(flag))
        assert len(line.split()) > 2, f"{flag} has no help text: {line!r}"
    watch = [ln for ln in help_of("watch").splitlines() if ln.strip().startswith("--config")]
    assert watch and len(watch[0].split()) > 2, watch


def test_status_says_the_pods_state_and_why_its_price_is_unknown() -> None:
    from console.commands.status_cmd import pod_lines

    pod = {"pod_id": "abc", "status": None, "cost_per_hr": None, "spend_today": None,
           "uptime_s": 3600.0, "provider_error": "RUNPOD_API_KEY is not set",
           "agent_error": None}
    line = pod_lines(pod)[0]
    assert " ? " not in line and "RUNNING (its agent answers; RunPod not read)" in line
    assert "$/h unknown (RunPod did not answer: provider error below)" in line
    assert "–/h" not in line
    gone = dict(pod, agent_error="ssh: connection refused", uptime_s=None)
    assert "state unknown (RunPod not read)" in pod_lines(gone)[0]
    priced = dict(pod, status="RUNNING", cost_per_hr=4.18)
    assert pod_lines(priced)[0].startswith("pod abc RUNNING  $4.18/h")
