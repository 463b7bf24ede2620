"""Contexts: the config's deployments, merged over its top level, each with its own state;
a bad one is refused with its file, line and key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from console.config.settings import ConfigError, load_settings
from console.operations.audit import AuditLog, audit_log_for
from tests.conftest import REPO

CONFIG = """\
state_dir: {state}
refresh_s: 3
pod:
  ssh_key: /keys/id
  ssh_port: 2222
thresholds:
  default: {{ttft_p95_s: 2.0}}
current_context: east
contexts:
  east:
    pod: {{runpod_id: pod-e, host: 10.0.0.1}}
    prometheus_url: http://global:9090
  west:
    pod:
      runpod_id: pod-w
      ssh_port: 22
    thresholds:
      default: {{ttft_p95_s: 3.5}}
    state_dir: {state}/the-west
  broken:
    pod:
      ssh_port: twenty-two
"""


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.delenv("POD_CONSOLE_CONTEXT", raising=False)
    monkeypatch.delenv("POD_CONSOLE_STATE_DIR", raising=False)
    p = tmp_path / "config.yaml"
    p.write_text(CONFIG.format(state=tmp_path / "state"))
    return p


def test_a_context_is_the_top_level_with_its_keys_over_it(cfg: Path, tmp_path: Path) -> None:
    s = load_settings(cfg)  # current_context
    assert s.context == "east" and s.context_names == ["east", "west", "broken"]
    assert (s.pod.machine_id, s.pod.host, s.pod.ssh_key, s.pod.ssh_port) == (
        "pod-e", "10.0.0.1", Path("/keys/id"), 2222)  # nested sections merge key by key
    assert s.prometheus_url == "http://global:9090" and s.refresh_s == 3
    assert s.state_dir == tmp_path / "state" / "contexts" / "east"
    w = load_settings(cfg, context="west")
    assert (w.pod.machine_id, w.pod.ssh_port, w.pod.ssh_key) == ("pod-w", 22, Path("/keys/id"))
    assert w.thresholds_for("Q27").ttft_p95_s == 3.5 and w.prometheus_url is None
    assert w.state_dir == tmp_path / "state" / "the-west"  # its own, as it asked


def test_the_environment_chooses_as_the_flag_does(cfg: Path, monkeypatch) -> None:
    monkeypatch.setenv("POD_CONSOLE_CONTEXT", "west")
    assert load_settings(cfg).context == "west"
    assert load_settings(cfg, context="east").context == "east"  # the flag wins


def test_bad_contexts_name_file_line_and_key(cfg: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load_settings(cfg, context="broken")
    assert str(e.value).startswith(f"{cfg}:22: contexts.broken.pod.ssh_port: Input should be")
    with pytest.raises(ConfigError) as e:
        load_settings(cfg, context="north")
    assert str(e.value) == (f"{cfg}:9: context 'north' is not in the config "
                            "(have: broken, east, west)")
    cfg.write_text("state_dir: /tmp/x\ncontexts:\n  a:\n    contexts: {}\n")
    with pytest.raises(ConfigError, match=r":4: contexts.a.contexts: not allowed"):
        load_settings(cfg, context="a")
    cfg.write_text("state_dir: /tmp/x\n")
    with pytest.raises(ConfigError, match="context 'a': the config defines no contexts"):
        load_settings(cfg, context="a")
    assert load_settings(cfg).context is None  # no contexts: one deployment, as before


def test_audit_records_name_the_context_and_the_pod(cfg: Path) -> None:
    s = load_settings(cfg, context="west")
    log = audit_log_for(s)
    log.append("rebalance", {"set": {"A": 0.5}}, "ok")
    s.pod.machine_id = "pod-w2"  # a fallback moved the console to a new pod
    log.append("host_checks", {}, "started")
    log.append("up", {"pod": "pod-new"}, "ok")  # the operation's own pod wins
    recs = AuditLog(s.state_dir / "audit.jsonl").records()
    assert [(r["context"], r["pod"], r["action"]) for r in recs[:2]] == [
        ("west", "pod-w", "rebalance"), ("west", "pod-w2", "host_checks")]
    assert "pod" not in recs[2] and recs[2]["arguments"] == {"pod": "pod-new"}


def test_the_flag_goes_before_or_after_any_subcommand(cfg: Path) -> None:
    for argv in (["--context", "west", "bench", "--history"],
                 ["bench", "--history", "--context", "west"]):
        r = subprocess.run([sys.executable, "-m", "console.cli", *argv, "--config", str(cfg)],
                           capture_output=True, text=True, timeout=60,
                           env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
                                "HOME": str(cfg.parent)})
        assert r.returncode == 0, r.stderr
        assert "the-west/bench" in r.stdout, r.stdout


def test_reopening_on_another_context_keeps_the_command(monkeypatch) -> None:
    from console.commands import tui_cmd

    assert tui_cmd.without_context(["wall", "--context", "east", "--rotate", "9",
                                    "--context=x", "--config", "c.yaml"]) == [
        "wall", "--rotate", "9", "--config", "c.yaml"]
    seen: list[list[str]] = []
    monkeypatch.setattr(sys, "argv", ["pod-console", "--context", "east", "wall",
                                      "--pod-rotate", "30"])
    monkeypatch.setattr("os.execv", lambda exe, argv: seen.append(argv))
    tui_cmd.reopen_on("west")
    assert seen == [[sys.executable, "-m", "console.cli", "wall", "--pod-rotate", "30",
                     "--context", "west"]]
