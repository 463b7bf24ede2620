"""``pod-console doctor``'s checks of the services around the pod, against the real ones:
the LiteLLM proxy with a master key (the right key, a wrong one, none), Prometheus (its
targets labelled as ``profile render`` labels them, one slot without a target) and
Alertmanager."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from console.config.settings import PodSettings, Settings
from console.session.doctor import DoctorReport, Finding, run_doctor
from tests.support import alertmanager_server, litellm_proxy, prometheus_server
from tests.support.emulated_pods import write_profiles
from tests.support.fake_openai import FakeOpenAI
from tests.support.procs import free_port

pytestmark = [pytest.mark.litellm, pytest.mark.prometheus]
SLACK_S = 0.5
POD = "pod-doctor"


def _need(ok: bool, what: str) -> None:
    if not ok:
        if os.environ.get("CI"):
            pytest.fail(f"{what} is missing")
        pytest.skip(f"{what} is missing")


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    _need(litellm_proxy.available(), "the LiteLLM venv (tests/support/litellm_venv.sh)")
    _need(prometheus_server.available(), "prometheus")
    _need(alertmanager_server.available(), "prometheus-alertmanager")
    root = tmp_path_factory.mktemp("doctor-services")
    backend = FakeOpenAI("tiny")
    backend.start()
    proxy = litellm_proxy.LiteLLMProxy(root / "litellm", (
        "model_list:\n  - model_name: tiny\n"
        f"    litellm_params: {{model: openai/tiny, api_base: \"{backend.api_base}\", "
        "api_key: unused}\n"
        "litellm_settings:\n  callbacks: [\"prometheus\"]\n"
        "general_settings:\n  master_key: os.environ/LITELLM_MASTER_KEY\n"))
    # Prometheus scrapes itself as the slot MAIN of the pod: a target that is UP, with
    # the labels `profile render` gives a slot's target
    port = free_port()
    prom = prometheus_server.PrometheusServer(root / "prom", [f"127.0.0.1:{port}"],
                                              labels={"pod": POD, "slot": "MAIN"},
                                              port=port)
    am = alertmanager_server.AlertmanagerServer(
        root / "am", alertmanager_server.fast_config("http://127.0.0.1:9/hook"))
    started: list = []
    try:
        for part in (proxy, prom, am):
            part.start()
            started.append(part)
        prom.wait_scrapes(1)
        yield SimpleNamespace(root=root, proxy=proxy, prom=prom, am=am)
    finally:
        for part in reversed(started):
            part.stop()
        backend.stop()


def _settings(sv: SimpleNamespace, tmp_path: Path, profiles: Path | None = None,
              **over: object) -> Settings:
    profiles = profiles or write_profiles(tmp_path / "profiles", [free_port()])
    return Settings(profiles_dir=profiles, state_dir=tmp_path / "state",
                    pod=PodSettings(machine_id=POD), prometheus_url=sv.prom.url,
                    gateway_url=sv.proxy.url, alertmanager_url=sv.am.url, **over)


IDS = ("prometheus.reach", "prometheus.targets_up", "gateway.reach", "gateway.key",
       "alertmanager.reach")


def _run(settings: Settings) -> DoctorReport:
    return asyncio.run(run_doctor(settings, transport=None, only=IDS))


def _is(report: DoctorReport, check_id: str, status: str, *words: str) -> Finding:
    f = report.by_id()[check_id]
    assert f.status == status, (check_id, "\n".join(report.lines()))
    for w in words:
        assert w in f"{f.sentence} {f.next_step}", (w, f)
    assert f.elapsed_s <= f.timeout_s + SLACK_S, f
    return f


def test_all_ok_with_the_right_key(services, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LITELLM_MASTER_KEY", litellm_proxy.MASTER_KEY)
    report = _run(_settings(services, tmp_path))
    for cid in IDS:
        _is(report, cid, "ok")
    assert report.exit_code == 0
    _is(report, "gateway.key", "ok", "with LITELLM_MASTER_KEY")
    _is(report, "prometheus.targets_up", "ok", "MAIN")


def test_a_bad_gateway_key_and_none(services, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LITELLM_MASTER_KEY", "sk-not-the-master-key-0000")
    report = _run(_settings(services, tmp_path))
    _is(report, "gateway.reach", "ok")  # alive: only the key is wrong
    f = _is(report, "gateway.key", "fail", "refused the key in LITELLM_MASTER_KEY",
            "master_key")
    assert "sk-not-the-master-key" not in f"{f.sentence} {f.next_step}"
    monkeypatch.delenv("LITELLM_MASTER_KEY")
    report = _run(_settings(services, tmp_path))
    _is(report, "gateway.key", "fail", "LITELLM_MASTER_KEY is not set",
        "export LITELLM_MASTER_KEY")


def test_a_slot_without_a_prometheus_target(services, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LITELLM_MASTER_KEY", litellm_proxy.MASTER_KEY)
    profiles = write_profiles(tmp_path / "profiles", [free_port()])
    for p in profiles.glob("*.yaml"):  # a second slot, SIDE, that Prometheus never scrapes
        doc = yaml.safe_load(p.read_text())
        main = doc["slots"]["MAIN"]
        main["gpu_util"] = 0.4
        doc["slots"]["SIDE"] = {**main, "served_model_name": f"side-{main['served_model_name']}",
                                "port": free_port()}
        p.write_text(yaml.safe_dump(doc, sort_keys=False))
    report = _run(_settings(services, tmp_path, profiles))
    _is(report, "prometheus.targets_up", "fail", "SIDE no target", "prometheus.yml")


def test_prometheus_and_alertmanager_down(services, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LITELLM_MASTER_KEY", litellm_proxy.MASTER_KEY)
    closed = f"http://127.0.0.1:{free_port()}"
    report = _run(_settings(services, tmp_path).model_copy(
        update={"prometheus_url": closed, "alertmanager_url": closed}))
    _is(report, "prometheus.reach", "fail", "connection refused", "start Prometheus")
    _is(report, "prometheus.targets_up", "fail", "Prometheus targets")
    _is(report, "alertmanager.reach", "fail", "connection refused", "start Alertmanager")
    assert report.exit_code == 2
