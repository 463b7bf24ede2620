"""``pod-console doctor``'s SSH and agent checks against a real OpenSSH server on loopback
(the console's own transport, asyncssh): a first contact, a changed host key, a refused
login, a closed and a hung SSH port, and a pod clock five minutes off."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.config.settings import PodSettings, Settings
from console.session.doctor import DoctorReport, Finding, run_doctor
from tests.conftest import REPO
from tests.support import sshd

SLACK_S = 0.5
SSH_IDS = ("ssh.reach", "ssh.hostkey", "agent.version", "agent.socket", "clock.skew")


@pytest.fixture(scope="module")
def pod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    if not sshd.available():
        pytest.skip("openssh-server not installed")
    root = tmp_path_factory.mktemp("doctor-pod")
    podbin = root / "podbin"
    podbin.mkdir()
    # on the pod's PATH before the system's: a `date` a test replaces with a clock five
    # minutes fast, and the pod's Python (this one, whose editable install finds an agent;
    # the agent missing is the demo's test). The session reads no rc file (tests/support/
    # sshd.py), so nothing but this PATH says which Python the pod has.
    (podbin / "date").symlink_to(shutil.which("date") or "/bin/date")
    (podbin / "python3").symlink_to(sys.executable)
    agent_dir = root / "agent-dir"
    shutil.copytree(REPO / "pod_agent", agent_dir / "pkg" / "pod_agent",
                    ignore=shutil.ignore_patterns("__pycache__"))
    srv = sshd.SshServer(root / "sshd")
    srv.env = {"PATH": f"{podbin}:/usr/bin:/bin", "POD_AGENT_HOME": str(root / "home")}
    srv.start()
    try:
        yield {"root": root, "srv": srv, "podbin": podbin, "agent_dir": agent_dir}
    finally:
        srv.stop()


def _settings(pod: dict, tmp_path: Path, **over: object) -> Settings:
    srv = pod["srv"]
    p = {"machine_id": "pod-doctor", "ssh_host": "127.0.0.1", "ssh_port": srv.port,
         "ssh_key": srv.client_key, "agent_dir": str(pod["agent_dir"]), **over}
    return Settings(profiles_dir=REPO / "profiles", state_dir=tmp_path / "state",
                    pod=PodSettings(**p))


def _run(settings: Settings) -> DoctorReport:
    return asyncio.run(run_doctor(settings, only=SSH_IDS))


def _status(report: DoctorReport, check_id: str, status: str, *words: str) -> Finding:
    f = report.by_id()[check_id]
    assert f.status == status, (check_id, "\n".join(report.lines()))
    for w in words:
        assert w in f"{f.sentence} {f.next_step}", (w, f)
    assert f.elapsed_s <= f.timeout_s + SLACK_S, f
    return f


def test_first_contact_then_a_changed_host_key(pod, tmp_path) -> None:
    s = _settings(pod, tmp_path)
    report = _run(s)
    _status(report, "ssh.reach", "ok", "logged in as root@127.0.0.1")
    _status(report, "ssh.hostkey", "ok", "first contact", "recorded new host key")
    _status(report, "agent.version", "ok", "pod-agent 0.1.0")
    # no supervisor was started on this pod: the socket check says so, with the command
    _status(report, "agent.socket", "fail", "not running", "serve --profile")
    _status(report, "clock.skew", "ok", "within")
    report = _run(s)
    _status(report, "ssh.hostkey", "ok", "matches the one recorded for pod pod-doctor")
    srv = pod["srv"]
    srv.regenerate_host_key()  # the pod's host key is not the one recorded
    srv.restart()
    try:
        report = _run(s)
        _status(report, "ssh.reach", "ok", "host key is refused")
        f = _status(report, "ssh.hostkey", "fail", "HOST KEY CHANGED", "re-created",
                    "known_hosts")
        assert str(s.state_dir / "known_hosts" / "pod-doctor") in f.next_step
        assert report.by_id()["agent.version"].status == "skip"
        assert report.exit_code == 2
    finally:
        (s.state_dir / "known_hosts" / "pod-doctor").unlink()


def test_a_refused_login(pod, tmp_path) -> None:
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)],
                   check=True)
    report = _run(_settings(pod, tmp_path, ssh_key=other))
    _status(report, "ssh.reach", "fail", "login failed", "pod.ssh_key", "authorized_keys")
    assert report.by_id()["ssh.hostkey"].status == "skip"


def test_a_closed_and_a_hung_ssh_port(pod, tmp_path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    report = _run(_settings(pod, tmp_path, ssh_port=closed))
    _status(report, "ssh.reach", "fail", "nothing answers", "pod.ssh_port")
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)  # accepts, never says its SSH banner
        report = _run(_settings(pod, tmp_path, ssh_port=hung.getsockname()[1]))
    f = _status(report, "ssh.reach", "fail", "no answer within 3 s", "pod.ssh_host")
    assert f.elapsed_s >= 2.5


def test_a_pod_clock_five_minutes_fast(pod, tmp_path) -> None:
    date = pod["podbin"] / "date"
    date.unlink()
    # coreutils' own date, five minutes on (a Python one added its start-up to the
    # check's 3 s budget, which a busy machine ran out of)
    real = shutil.which("date") or "/bin/date"
    date.write_text(f'#!/bin/sh\nexec {real} -d "+300 seconds" "$@"\n')
    date.chmod(0o755)
    try:
        report = _run(_settings(pod, tmp_path))
    finally:
        date.unlink()
        date.symlink_to(shutil.which("date") or "/bin/date")
    f = _status(report, "clock.skew", "fail", "NTP", "off this machine's")
    assert 290 < float(f.sentence.split("is ")[1].split(" s")[0]) < 310, f.sentence
