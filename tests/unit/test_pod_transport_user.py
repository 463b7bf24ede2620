"""One composition root for provisioning (issue 46, item 2): ``up`` and the console's
``f``/``r`` build their provisioner and a new pod's agent connection through the
deployment, with the configured SSH user and key (the console's ``f`` once connected as
``root`` whatever ``pod.ssh_user`` said, while ``up`` read it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.config.settings import PodSettings, Settings
from console.session import deployment as deployment_mod
from console.session.context import make_context
from console.session.deployment import Deployment, open_deployment
from console.sources.provider.base import Machine
from tests.conftest import PROFILES

POD = Machine(id="pod-new", status="RUNNING", ssh_endpoint=("10.9.8.7", 40022))


def _settings(tmp_path: Path) -> Settings:
    return Settings(profiles_dir=PROFILES, state_dir=tmp_path / "state",
                    pod=PodSettings(machine_id="pod-old", ssh_host="10.0.0.1", ssh_user="ubuntu",
                                    ssh_key=tmp_path / "id_pod"))


def test_up_connects_to_a_new_pod_as_the_configured_user(tmp_path: Path) -> None:
    dep = open_deployment(_settings(tmp_path))
    prov = dep.provisioner(object())  # type: ignore[arg-type]  # never called here
    t = prov.transport_factory(POD, "python3 -m pod_agent")
    assert (t.ep.user, t.ep.host, t.ep.port, t.ep.key_path, t.ep.pod_id) == (
        "ubuntu", "10.9.8.7", 40022, tmp_path / "id_pod", "pod-new")
    assert prov.pod_id == "pod-old" and prov.cfg.ledger == tmp_path / "state" / "pods.jsonl"


def test_the_consoles_fallback_connects_as_the_configured_user(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNPOD_API_KEY", "rp-test-key")
    made = []
    real = Deployment.provisioner

    def spy(self: Deployment, *a: object, **kw: object):  # type: ignore[no-untyped-def]
        made.append(prov := real(self, *a, **kw))  # type: ignore[arg-type]
        return prov

    monkeypatch.setattr(deployment_mod.Deployment, "provisioner", spy)
    ctx = make_context(_settings(tmp_path), runpod_base="http://127.0.0.1:9")
    [prov] = made  # the context's f and r go through the deployment's one provisioner
    t = prov.transport_factory(POD, "python3 -m pod_agent")
    assert (t.ep.user, t.ep.host, t.ep.port) == ("ubuntu", "10.9.8.7", 40022)
    assert ctx.deployment is not None


def test_down_provisions_through_the_root_without_profiles(tmp_path: Path) -> None:
    """``down`` once built a provisioner of its own (no profiles, no transport): it goes
    through the composition root now, and still needs no profile — a missing profiles
    directory must never keep a pod billing."""
    s = Settings(profiles_dir=tmp_path / "no-profiles", state_dir=tmp_path / "state",
                 pod=PodSettings(machine_id="pod-old", ssh_host="10.0.0.1", ssh_user="ubuntu",
                                 ssh_key=tmp_path / "id_pod"))
    prov = deployment_mod.provisioner(s, object())  # type: ignore[arg-type]  # never called
    assert prov.profiles == [] and prov.pod_id == "pod-old"
    assert prov.cfg.ledger == tmp_path / "state" / "pods.jsonl"
    assert "pod-old" in prov.cfg.in_use()  # a sweep keeps its hands off the pods in use
    t = prov.transport_factory(POD, "python3 -m pod_agent")
    assert (t.ep.user, t.ep.host, t.ep.port) == ("ubuntu", "10.9.8.7", 40022)
