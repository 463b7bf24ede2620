"""The P2P probe certifies P2P only when NCCL used it (real NCCL logs of an H200×2 host).

The stand-in torch replays NCCL 2.28's own INFO lines captured on that host
(``console/demo/faketorch/nccl/``); ``tests/fixtures/nccl-h200x2/probe-2026-11-29/``
holds what this probe reported on the real machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pod_agent import p2p
from tests.conftest import REPO
from tests.unit.test_agent_units import FAKETORCH, agent

NCCL = REPO / "tests" / "fixtures" / "nccl-h200x2"


def test_transports_read_from_the_real_nccl_logs() -> None:
    for rank in (0, 1):
        assert p2p.transports_in((NCCL / f"rank{rank}-p2p-enabled.log").read_text())[0] == (
            "P2P/CUMEM",)
        assert p2p.transports_in((NCCL / f"rank{rank}-NCCL_P2P_DISABLE-1.log").read_text()
                                 )[0] == ("SHM/direct/direct",)
    _, n = p2p.transports_in((NCCL / "rank0-p2p-enabled.log").read_text())
    assert n == 24  # one line per channel, ring peers only


def test_inherited_transport_settings_are_scrubbed() -> None:
    env, own = p2p.probe_env({"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1",
                              "NCCL_P2P_LEVEL": "LOC", "NCCL_DEBUG": "WARN",
                              "CUDA_VISIBLE_DEVICES": "2,3", "PATH": "/bin"})
    assert "NCCL_P2P_DISABLE" not in env and "NCCL_SHM_DISABLE" not in env
    assert "NCCL_P2P_LEVEL" not in env
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_NVLS_ENABLE"] == "0"
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and env["PATH"] == "/bin"
    assert own == {"NCCL_DEBUG": "INFO", "NCCL_NVLS_ENABLE": "0"}


def _check(tmp_path: Path, mode: str, **env: str) -> tuple[int, dict]:
    r = agent(["check-host", "--json", "--p2p-timeout", "3"], tmp_path,
              FAKE_NVIDIA_SMI_GPUS="2", PYTHONPATH=str(FAKETORCH), FAKE_TORCH_MODE=mode,
              **env)
    c = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["p2p"]
    return r.returncode, c


def _env_file(tmp_path: Path) -> str:
    return (tmp_path / "home" / ".env").read_text()


def test_inherited_p2p_disable_does_not_fake_a_pass(tmp_path: Path) -> None:
    # the pod's .env says NCCL_P2P_DISABLE=1 after an earlier bad host: the probe must
    # still test P2P itself, not pass over SHM and certify P2P
    rc, c = _check(tmp_path, "good", NCCL_P2P_DISABLE="1")
    assert rc == 0 and c["value"]["verdict"] == "ok"
    assert c["value"]["transports"] == ["P2P/CUMEM"] and c["value"]["p2p_exercised"]
    assert "NCCL_P2P_DISABLE=0" in _env_file(tmp_path)


@pytest.mark.parametrize(("mode", "verdict"), [("shm", "unused"), ("quiet", "unproven")])
def test_a_finished_run_without_p2p_certifies_nothing(tmp_path: Path, mode: str,
                                                      verdict: str) -> None:
    rc, c = _check(tmp_path, mode)
    assert c["value"]["verdict"] == verdict and c["value"]["p2p_exercised"] is False
    assert c["ok"] is True  # the host serves, with P2P off
    assert c["value"]["nccl_p2p_disable"] == 1 and "NCCL_P2P_DISABLE=1" in _env_file(tmp_path)
    assert rc == 0


def test_a_hang_is_followed_by_a_proven_fallback(tmp_path: Path) -> None:
    rc, c = _check(tmp_path, "hang")
    v = c["value"]
    assert rc == 3 and c["ok"] is False and v["verdict"] == "hung"
    assert v["fallback"]["env"]["NCCL_P2P_DISABLE"] == "1"
    assert v["fallback"]["transports"] == ["SHM/direct/direct"]
    assert v["fallback_proven"] is True and "fallback without P2P proven" in c["detail"]
    assert "NCCL_P2P_DISABLE=1" in _env_file(tmp_path)


@pytest.mark.parametrize("mode", ["hang-always", "bad-always"])
def test_a_fallback_that_fails_too_is_said(tmp_path: Path, mode: str) -> None:
    _, c = _check(tmp_path, mode)
    assert c["ok"] is False and c["value"]["fallback_proven"] is False
    assert "fallback without P2P also" in c["detail"]


def test_what_the_real_h200_pair_reported() -> None:
    d = NCCL / "probe-2026-11-29"
    plain = json.loads((d / "probe-plain.json").read_text())
    inherited = json.loads((d / "probe-inherited-disable.json").read_text())
    forced = json.loads((d / "probe-fallback-path.json").read_text())
    assert plain["verdict"] == inherited["verdict"] == "ok"
    assert plain["transports"] == inherited["transports"] == ["P2P/CUMEM"]
    assert forced["verdict"] == "unused" and forced["transports"] == ["SHM/direct/direct"]
    # what the old probe ran under the inherited setting: SHM, yet it passed
    old = (d / "inherited-disable-old-probe-rank0.log").read_text()
    assert p2p.transports_in(old)[0] == ("SHM/direct/direct",)
