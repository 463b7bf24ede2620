"""``pod-console doctor`` against the running demo deployment (real agent processes, real
HTTP to the simulated slots, gateway and exporter): all ok, then one set-up broken at a
time, each failing the right check with the right next step within that check's limit."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from console.session.doctor import CHECKS, DoctorReport, Finding, run_doctor
from console.sources.remote import LocalAgentTransport
from tests.conftest import REPO
from tests.tui.conftest import wait_slots_up

SLACK_S = 0.5
"""A check's result is made within its limit; the gather around it adds scheduling only."""


def _doctor(demo, settings=None, transport=None) -> DoctorReport:
    settings = settings or demo.settings()
    t = transport or demo.transport_for(demo.pod_id)
    return asyncio.run(run_doctor(settings, transport=t))


def _failed(report: DoctorReport, check_id: str, *words: str) -> Finding:
    f = report.by_id()[check_id]
    assert f.status == "fail", (check_id, "\n".join(report.lines()))
    text = f"{f.sentence} {f.next_step}"
    for w in words:
        assert w in text, (w, f)
    assert f.next_step, f
    assert f.elapsed_s <= f.timeout_s + SLACK_S, f
    assert report.exit_code == 2
    return f


@contextlib.contextmanager
def _silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a hung server)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    try:
        yield s.getsockname()[1]
    finally:
        s.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_exporter(demo) -> None:
    """Until the demo's exporter serves its first GPU readings (it reads the agent's
    samples every 2 s from its start)."""
    import time

    import httpx

    deadline = time.monotonic() + 90
    while True:
        with contextlib.suppress(httpx.HTTPError):
            r = httpx.get(f"http://127.0.0.1:{demo.exporter_port}/metrics", timeout=5)
            if "DCGM_FI_DEV_GPU_UTIL{" in r.text:
                return
        assert time.monotonic() < deadline, "the demo's exporter serves no GPU readings"
        time.sleep(0.2)


def test_doctor_on_the_demo_is_all_ok(demo) -> None:
    wait_slots_up(demo)
    _wait_exporter(demo)
    report = _doctor(demo)
    got = report.by_id()
    assert set(got) == {c.id for c in CHECKS}
    assert report.exit_code == 0, "\n".join(report.lines())
    # what the demo has is checked, and passes; what it has not (SSH, Prometheus,
    # Alertmanager) is skipped, never called ok
    for cid in ("config.valid", "profile.valid", "agent.version", "agent.socket",
                "clock.skew", "slots.health", "slots.models", "gateway.reach",
                "gateway.key", "exporter.reach", "disk.state_dir", "recording.writable"):
        assert got[cid].status == "ok", (cid, got[cid])
    for cid in ("ssh.reach", "ssh.hostkey", "prometheus.reach", "prometheus.targets_up",
                "alertmanager.reach"):
        assert got[cid].status == "skip", (cid, got[cid])
    assert all(f.elapsed_s <= f.timeout_s + SLACK_S for f in report.findings)


def test_a_slot_down(demo) -> None:
    s = demo.settings()
    port = demo.profiles()[0].profile.slots["FLASH"].port
    s.pod.port_map = {port: _closed_port()}
    _failed(_doctor(demo, s), "slots.health", "FLASH", "connection refused",
            "pod-agent logs FLASH")


def test_a_slot_serving_another_model(demo, tmp_path) -> None:
    wait_slots_up(demo)
    d = tmp_path / "profiles"
    shutil.copytree(demo.profiles_dir, d)
    first = sorted(d.glob("*.yaml"))[0]
    first.write_text(first.read_text().replace("served_model_name: qwen3.8-27b",
                                               "served_model_name: qwen3.8-27b-other"))
    s = demo.settings()
    s.profiles_dir = d
    report = _doctor(demo, s)
    _failed(report, "slots.models", "Q27", "qwen3.8-27b-other", "restart")
    assert report.by_id()["slots.health"].status == "ok"


def test_prometheus_down_and_hung(demo) -> None:
    s = demo.settings()
    s.prometheus_url = f"http://127.0.0.1:{_closed_port()}"
    _failed(_doctor(demo, s), "prometheus.reach", "connection refused", "start Prometheus")
    with _silent_port() as port:
        s.prometheus_url = f"http://127.0.0.1:{port}"
        report = _doctor(demo, s)
    f = _failed(report, "prometheus.reach", "timed out")
    assert f.elapsed_s >= 1.0  # it waited for an answer, then gave up in its limit


def test_alertmanager_down(demo) -> None:
    s = demo.settings()
    s.alertmanager_url = f"http://127.0.0.1:{_closed_port()}"
    _failed(_doctor(demo, s), "alertmanager.reach", "connection refused",
            "start Alertmanager", "no alert is delivered")


def test_gateway_and_exporter_down(demo) -> None:
    s = demo.settings()
    s.gateway_url = f"http://127.0.0.1:{_closed_port()}"
    s.gpu_metrics_url = f"http://127.0.0.1:{_closed_port()}/metrics"
    report = _doctor(demo, s)
    _failed(report, "gateway.reach", "connection refused", "LiteLLM proxy")
    _failed(report, "exporter.reach", "connection refused", "pod-agent exporter")


def test_agent_missing(demo, tmp_path) -> None:
    empty = tmp_path / "agent-dir" / "pkg"
    empty.mkdir(parents=True)
    # the pod's own Python with an empty agent directory: -S leaves out this machine's
    # site-packages, where the editable install would find one, -I the current directory
    # (the repository's root, where `-m` would find it)
    t = LocalAgentTransport([sys.executable, "-I", "-S", "-m", "pod_agent"],
                            {"PATH": os.environ["PATH"], "PYTHONPATH": str(empty)})
    report = _doctor(demo, transport=t)
    _failed(report, "agent.version", "No module named", "pod_agent", "install the agent",
            "pod-console up")
    assert report.by_id()["agent.socket"].status == "skip"


def test_supervisor_not_running(demo, tmp_path) -> None:
    good = demo.transport_for(demo.pod_id)
    t = LocalAgentTransport(good.argv_prefix,
                            {**good.env, "POD_AGENT_HOME": str(tmp_path / "home")})
    report = _doctor(demo, transport=t)
    assert report.by_id()["agent.version"].status == "ok"
    _failed(report, "agent.socket", "not running", "serve --profile")


def _clock_off(demo, tmp_path: Path, by_s: float) -> LocalAgentTransport:
    """The demo's agent on a pod whose clock is ``by_s`` fast (a pod's `date` is its
    host's clock)."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "date").write_text(f"#!/bin/sh\nexec {sys.executable} -c "
                               f"'import time; print(f\"{{time.time() + {by_s}:.6f}}\")'\n")
    (fake / "date").chmod(0o755)
    good = demo.transport_for(demo.pod_id)
    return LocalAgentTransport(good.argv_prefix,
                               {**good.env, "PATH": f"{fake}:{good.env['PATH']}"})


def test_pod_clock_five_minutes_off(demo, tmp_path) -> None:
    t = _clock_off(demo, tmp_path, 300)
    f = _failed(_doctor(demo, transport=t), "clock.skew", "off this machine's", "NTP")
    assert 290 < float(f.sentence.split("is ")[1].split(" s")[0]) < 310, f.sentence


def test_a_warning_is_exit_status_one(demo, tmp_path) -> None:
    """Half a minute off: a warning (the console alerts past two minutes), exit 1."""
    wait_slots_up(demo)
    _wait_exporter(demo)
    report = _doctor(demo, transport=_clock_off(demo, tmp_path, 30))
    f = report.by_id()["clock.skew"]
    assert f.status == "warn" and "NTP" in f.next_step, f
    assert report.exit_code == 1, "\n".join(report.lines())


def test_config_and_profiles_broken(demo, tmp_path) -> None:
    from console.session.doctor import load

    cfg = tmp_path / "config.yaml"
    cfg.write_text("refresh_s: 2\nno_such_key: 1\n")
    settings, error = load(cfg)
    assert settings is None
    report = asyncio.run(run_doctor(None, error))
    _failed(report, "config.valid", "no_such_key", "fix that key")
    assert {f.status for f in report.findings if f.id != "config.valid"} == {"skip"}

    bad = tmp_path / "profiles"
    bad.mkdir()
    shutil.copy(REPO / "tests" / "profiles_broken" / "duplicate-key.yaml",
                bad / "10-dup.yaml")
    s = demo.settings()
    s.profiles_dir, s.profile = bad, None
    report = _doctor(demo, s)
    _failed(report, "profile.valid", "duplicate key", "profile check")
    assert report.by_id()["slots.health"].status == "skip"


def _can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@contextlib.contextmanager
def _tmpfs(where: Path, *opts: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(("size=1m", *opts)), "tmpfs",
                        str(where)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


@pytest.mark.skipif(not _can_mount(), reason="a full or read-only filesystem needs a mount")
def test_state_dir_full_and_read_only(demo, tmp_path) -> None:
    with _tmpfs(tmp_path / "full") as mnt:
        (mnt / "state").mkdir()
        with contextlib.suppress(OSError), open(mnt / "filler", "wb") as f:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        s = demo.settings()
        s.state_dir = mnt / "state"
        report = _doctor(demo, s)
        _failed(report, "disk.state_dir", "full", "free space")
        _failed(report, "recording.writable", "full")
    with _tmpfs(tmp_path / "ro", "ro") as mnt:
        s = demo.settings()
        s.state_dir = mnt / "state"
        _failed(_doctor(demo, s), "disk.state_dir", "not writable",
                "POD_CONSOLE_STATE_DIR")


CANARIES = {
    "RUNPOD_API_KEY": "canary-runpod-7Hq2", "LITELLM_MASTER_KEY": "canary-litellm-Zp41",
    "VLLM_API_KEY": "canary-vllm-Kx93", "GPU_METRICS_TOKEN": "canary-exporter-Wd08",
    "SOME_OTHER_SECRET": "canary-other-Rb55",
}
CONFIG_CANARIES = ("canary-webhook-Tm61", "canary-urlpass-Qe27", "canary-hftoken-Lo83")


def _planted(demo, tmp_path: Path, token_in_profile: bool = False) -> Path:
    """The demo's config with secrets planted in it (a webhook URL, a password in a URL),
    in a profile (a slot's token) and in the logs the bundle copies."""
    state = tmp_path / "state"
    state.mkdir()
    webhook, urlpass, hftoken = CONFIG_CANARIES
    profiles = tmp_path / "profiles"
    shutil.copytree(demo.profiles_dir, profiles)
    if token_in_profile:
        # refused by the profile's validation (secrets reach slots from the agent's
        # environment): a refused profile is just what a bundle is sent for
        first = sorted(profiles.glob("*.yaml"))[0]
        doc = yaml.safe_load(first.read_text())
        slot = next(iter(doc["slots"].values()))
        slot.setdefault("env", {})["HF_TOKEN"] = hftoken
        first.write_text(yaml.safe_dump(doc, sort_keys=False))
    data = yaml.safe_load(demo.write_config().read_text())
    hook = f"https://hooks.example/services/{webhook}"
    am = f"http://admin:{urlpass}@127.0.0.1:{_closed_port()}"
    data.update(state_dir=str(state), profiles_dir=str(profiles), webhook_url=hook,
                alertmanager_url=am)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(data))
    said = [*CANARIES.values(), hook, am]  # as a log would hold them
    (state / "audit.jsonl").write_text("".join(
        f'{{"op": "up", "message": "failed with {c}"}}\n' for c in said))
    (state / "errors.log").write_text("".join(f"Traceback: token={c}\n" for c in said))
    return cfg


def _bundle(demo, cfg: Path, out: Path) -> DoctorReport:
    from console.session.doctor import load, open_for
    from console.session.doctor.bundle import write_bundle

    settings, error = load(cfg)
    assert settings is not None, error
    dep, _ = open_for(settings)
    t = demo.transport_for(demo.pod_id)
    report = asyncio.run(run_doctor(settings, deployment=dep, transport=t))
    asyncio.run(write_bundle(out, report, settings, cfg, deployment=dep, transport=t))
    return report


def test_bundle_holds_no_secret(demo, tmp_path, monkeypatch) -> None:
    """Secrets planted in the environment, the config, a profile and the logs: none is
    in the bundle, compressed or decompressed, and everything it promises is there."""
    import gzip

    wait_slots_up(demo)
    cfg = _planted(demo, tmp_path)
    for k, v in CANARIES.items():
        monkeypatch.setenv(k, v)
    out = tmp_path / "support.tar.gz"
    report = _bundle(demo, cfg, out)
    # Alertmanager is planted down (its URL carries a canary): a failure
    assert report.by_id()["alertmanager.reach"].status == "fail"
    raw = out.read_bytes()
    with tarfile.open(out, "r:gz") as tar:
        members = {m.name.split("/", 1)[1]: tar.extractfile(m).read()  # type: ignore[union-attr]
                   for m in tar.getmembers() if m.isfile()}
    import json

    manifest = json.loads(members["MANIFEST.json"])["missing"]
    for name in ("doctor.json", "versions.json", "settings.json", "config/config.yaml",
                 "audit.jsonl", "errors.log", "agent-status.json", "MANIFEST.json",
                 "expositions/FLASH.txt", "expositions/Q27.txt"):
        assert name in members, (name, manifest, " ".join(sorted(members)))
    assert any(n.startswith("profiles/") for n in members)
    assert b"vllm:" in members["expositions/FLASH.txt"]
    assert b'"supervisor": "running"' in members["agent-status.json"]
    every = [*CANARIES.values(), *CONFIG_CANARIES]
    for secret in every:
        for blob in (raw, gzip.decompress(raw), *members.values()):
            assert secret.encode() not in blob, secret
    assert b"[redacted]" in members["audit.jsonl"]
    assert b"[redacted]" in members["config/config.yaml"]
    assert b"alertmanager.reach" in members["doctor.json"]


def test_a_profile_refused_for_its_token_is_bundled_without_it(demo, tmp_path) -> None:
    cfg = _planted(demo, tmp_path, token_in_profile=True)
    out = tmp_path / "support.tar.gz"
    report = _bundle(demo, cfg, out)
    assert report.by_id()["profile.valid"].status == "fail"
    with tarfile.open(out, "r:gz") as tar:
        members = {m.name.split("/", 1)[1]: tar.extractfile(m).read()  # type: ignore[union-attr]
                   for m in tar.getmembers() if m.isfile()}
    profile = next(v for k, v in sorted(members.items()) if k.startswith("profiles/"))
    assert b"HF_TOKEN: [redacted]" in profile
    assert not any(CONFIG_CANARIES[2].encode() in v for v in members.values())


def test_a_bundle_that_would_hold_a_secret_is_not_kept(demo, tmp_path, monkeypatch) -> None:
    """The last guard: were a secret to slip past the redaction, the file is searched
    before it is kept, and deleted."""
    from console.session.doctor import bundle as doctor_bundle
    from console.session.doctor.bundle import BundleError

    cfg = _planted(demo, tmp_path)
    for k, v in CANARIES.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(doctor_bundle, "scrub", lambda value, secrets: value)
    out = tmp_path / "support.tar.gz"
    with pytest.raises(BundleError, match="held a secret"):
        _bundle(demo, cfg, out)
    assert not out.exists() and not list(tmp_path.glob("support.tar.gz*"))


def test_doctor_cli_on_the_demo_config(demo, tmp_path) -> None:
    """The command itself: JSON, the exit status, the checks by id."""
    import json

    wait_slots_up(demo)
    cfg = demo.write_config()
    env = {**os.environ, **demo.session_env(), "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-m", "console.cli", "doctor", "--json", "--config",
                        str(cfg)], capture_output=True, text=True, timeout=60, env=env)
    out = json.loads(r.stdout)
    got = {c["id"]: c for c in out["checks"]}
    assert r.returncode == out["exit_code"] == 0, r.stdout
    assert got["slots.health"]["status"] == "ok"
    assert got["ssh.reach"]["status"] == "skip"  # the demo's agent is no SSH host
    s = demo.settings()
    s.alertmanager_url = f"http://127.0.0.1:{_closed_port()}"
    bad = tmp_path / "bad.yaml"
    bad.write_text(cfg.read_text() + f"alertmanager_url: {s.alertmanager_url}\n")
    r = subprocess.run([sys.executable, "-m", "console.cli", "doctor", "--config", str(bad)],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2, r.stdout
    assert "FAIL  alertmanager.reach" in r.stdout and "start Alertmanager" in r.stdout


async def test_the_palette_runs_the_doctor_in_the_console(demo) -> None:
    """"Doctor" in the palette: the checks run in a worker on the console's own
    deployment and agent, and the action log says the outcome; a broken part (the
    Alertmanager planted down) is a red line with its id and next step."""
    from console.commands.tui_cmd import demo_context
    from console.ui.app import make_app
    from tests.support.waits import wait_for
    from tests.tui.conftest import live

    ctx = demo_context(demo, 1.0, stop_demo_on_exit=False)
    app = make_app(ctx)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: live(app), 40)
        _wait_exporter(demo)

        def said() -> list[str]:
            return [text for _, text, _ in app.log_lines if text.startswith("doctor")]

        offered = {c.title: c.callback for c in app.get_system_commands(app.screen)}
        await offered["Doctor"]()
        assert await wait_for(pilot, lambda: any(" ok, " in t for t in said()), 30), said()
        summary = next(t for t in said() if " ok, " in t)
        assert "0 warning(s), 0 failure(s)" in summary, said()
        ctx.settings.alertmanager_url = f"http://127.0.0.1:{_closed_port()}"
        try:
            n = len(said())
            await offered["Doctor"]()
            assert await wait_for(pilot, lambda: any(" ok, " in t for t in said()[n:]), 30)
        finally:
            ctx.settings.alertmanager_url = None
        new = said()[n:]
        assert any(t.startswith("doctor FAIL alertmanager.reach:") and "start Alertmanager"
                   in t for t in new), new
        assert "1 failure(s)" in new[-1], new
        assert app.is_running and app.screen is not None


def test_the_cli_bundle_holds_a_recording_and_no_secret(demo, tmp_path) -> None:
    """The command end to end: the headless recorder records the demo for a few polls
    (the real recorder, with the canaries in its environment), then `doctor --bundle`
    writes the bundle with a `record export` of the last 15 minutes in it."""
    import gzip
    import sqlite3

    wait_slots_up(demo)
    cfg = _planted(demo, tmp_path)
    env = {**os.environ, **demo.session_env(), **CANARIES, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-m", "console.cli", "record", "--for", "4",
                        "--config", str(cfg)], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "support.tar.gz"
    r = subprocess.run([sys.executable, "-m", "console.cli", "doctor", "--config", str(cfg),
                        "--bundle", str(out)], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 2, (r.stdout, r.stderr)  # the planted Alertmanager is down
    assert "FAIL  alertmanager.reach" in r.stdout and "bundle written" in r.stderr
    with tarfile.open(out, "r:gz") as tar:
        members = {m.name.split("/", 1)[1]: tar.extractfile(m).read()  # type: ignore[union-attr]
                   for m in tar.getmembers() if m.isfile()}
    assert "recording.podrec" in members, members.get("MANIFEST.json")
    rec = tmp_path / "x.podrec"
    rec.write_bytes(members["recording.podrec"])
    db = sqlite3.connect(rec)
    try:
        assert db.execute("SELECT count(*) FROM polls").fetchone()[0] >= 1
    finally:
        db.close()
    raw = out.read_bytes()
    for secret in [*CANARIES.values(), *CONFIG_CANARIES]:
        for blob in (raw, gzip.decompress(raw), *members.values(), r.stdout.encode(),
                     r.stderr.encode()):
            assert secret.encode() not in blob, secret


def test_an_agent_of_another_version_is_a_warning(demo, tmp_path) -> None:
    """The pod runs an older agent than this console ships: a warning saying both."""
    pkg = tmp_path / "agent-dir" / "pkg"
    shutil.copytree(REPO / "pod_agent", pkg / "pod_agent",
                    ignore=shutil.ignore_patterns("__pycache__"))
    init = pkg / "pod_agent" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "0.0.1-old+'))
    good = demo.transport_for(demo.pod_id)
    # -P: the agent directory first, not the current directory (the repository's root)
    t = LocalAgentTransport([sys.executable, "-P", "-m", "pod_agent"],
                            {**good.env, "PYTHONPATH": f"{pkg}:{good.env['PYTHONPATH']}"})
    report = _doctor(demo, transport=t)
    f = report.by_id()["agent.version"]
    assert f.status == "warn", "\n".join(report.lines())
    assert "0.0.1-old+" in f.sentence and "install this console's agent" in f.next_step
    assert report.by_id()["agent.socket"].status == "ok"  # the supervisor still answers
